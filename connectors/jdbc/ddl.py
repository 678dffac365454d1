"""Spark types to column DDL per dialect, for ``auto.create`` and ``auto.evolve`` of the JDBC sink.

One column per field. Nested values (arrays, maps, structs) are stored as JSON (``jsonb`` in
PostgreSQL, ``JSON`` — a checked LONGTEXT — in MariaDB), binary as ``bytea`` / ``LONGBLOB``. A Spark
``TimestampType`` is an instant: ``timestamptz`` in PostgreSQL, ``DATETIME(6)`` holding UTC in
MariaDB (the sink's session runs with ``time_zone='+00:00'``; MariaDB's TIMESTAMP ends in 2038).
Key columns in MariaDB need a bounded type: text keys become ``VARCHAR(255)``.

``auto.evolve`` only ever adds nullable columns (Kafka Connect's rule): a dropped or retyped field
is never applied to the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sluice.connectors.jdbc.urls import Dialect

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructField, StructType


class UnsupportedTypeError(TypeError):
    """A field whose Spark type has no column type in the target dialect."""


def quote(dialect: Dialect, name: str) -> str:
    """A quoted identifier (names from data can hold any character)."""
    if not name:
        raise ValueError("empty SQL identifier")
    if dialect is Dialect.MYSQL:
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


def qualified(dialect: Dialect, schema: str, table: str) -> str:
    """``schema.table`` quoted; an empty schema means the connection's default."""
    return f"{quote(dialect, schema)}.{quote(dialect, table)}" if schema else quote(dialect, table)


_PG: dict[str, str] = {
    "string": "text",
    "varchar": "text",
    "char": "text",
    "boolean": "boolean",
    "byte": "smallint",
    "short": "smallint",
    "integer": "integer",
    "long": "bigint",
    "float": "real",
    "double": "double precision",
    "date": "date",
    "timestamp_ntz": "timestamp",
    "timestamp": "timestamptz",
    "binary": "bytea",
}
_MYSQL: dict[str, str] = {
    "string": "LONGTEXT",
    "varchar": "LONGTEXT",
    "char": "LONGTEXT",
    "boolean": "BOOLEAN",
    "byte": "TINYINT",
    "short": "SMALLINT",
    "integer": "INT",
    "long": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "date": "DATE",
    "timestamp_ntz": "DATETIME(6)",
    "timestamp": "DATETIME(6)",
    "binary": "LONGBLOB",
}


def column_type(dialect: Dialect, dt: DataType, key: bool = False) -> str:
    """The column type for a Spark type; ``key`` columns get an indexable type in MariaDB."""
    from pyspark.sql import types as T  # pyspark: config validation imports this module (the jdbc-sink class)

    if isinstance(dt, T.DecimalType):
        return (
            f"numeric({dt.precision},{dt.scale})"
            if dialect is Dialect.POSTGRESQL
            else (f"DECIMAL({dt.precision},{dt.scale})")
        )
    if isinstance(dt, T.ArrayType | T.MapType | T.StructType):
        return "jsonb" if dialect is Dialect.POSTGRESQL else "JSON"
    table = _PG if dialect is Dialect.POSTGRESQL else _MYSQL
    kind = table.get(dt.typeName())
    if kind is None:
        raise UnsupportedTypeError(f"no {dialect.value} column type for Spark type {dt.simpleString()}")
    if key and dialect is Dialect.MYSQL and kind in ("LONGTEXT", "LONGBLOB"):
        return "VARCHAR(255)" if kind == "LONGTEXT" else "VARBINARY(255)"
    return kind


def _column(dialect: Dialect, f: StructField, pk: Sequence[str], owner: str) -> str:
    try:
        kind = column_type(dialect, f.dataType, key=f.name in pk)
    except UnsupportedTypeError as exc:
        raise UnsupportedTypeError(f"{owner}: field {f.name!r}: {exc}") from None
    return f"{quote(dialect, f.name)} {kind}{' NOT NULL' if f.name in pk else ' NULL'}"


def create_table_sql(
    dialect: Dialect, schema: str, table: str, fields: StructType, pk: Sequence[str], owner: str
) -> str:
    """``CREATE TABLE IF NOT EXISTS`` for ``fields``; ``owner`` names the connector in errors."""
    missing = [k for k in pk if k not in fields.fieldNames()]
    if missing:
        raise ValueError(f"{owner}: key fields {missing} are not fields of the records {fields.fieldNames()}")
    cols = [_column(dialect, f, pk, owner) for f in fields.fields]
    if pk:
        cols.append(f"PRIMARY KEY ({', '.join(quote(dialect, k) for k in pk)})")
    return f"CREATE TABLE IF NOT EXISTS {qualified(dialect, schema, table)} ({', '.join(cols)})"


def add_columns_sql(
    dialect: Dialect, schema: str, table: str, fields: Sequence[StructField], owner: str
) -> list[str]:
    """``ALTER TABLE … ADD COLUMN`` (nullable) per new field, for ``auto.evolve``."""
    target = qualified(dialect, schema, table)
    return [f"ALTER TABLE {target} ADD COLUMN {_column(dialect, f, (), owner)}" for f in fields]
