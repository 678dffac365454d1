"""Arrow types to column DDL per dialect, for ``auto.create`` and ``auto.evolve`` of the JDBC sink.

One column per field of the shaped rows (connectors.jdbc.shape). Nested values (arrays, maps,
structs) are stored as JSON (``jsonb`` in PostgreSQL, ``JSON`` — a checked LONGTEXT — in MariaDB),
binary as ``bytea`` / ``LONGBLOB``. A timestamp with a zone is an instant: ``timestamptz`` in
PostgreSQL, ``DATETIME(6)`` holding UTC in MariaDB (the sink's session runs with
``time_zone='+00:00'``; MariaDB's TIMESTAMP ends in 2038). Key columns in MariaDB need a bounded
type: text keys become ``VARCHAR(255)``.

``auto.evolve`` only ever adds nullable columns (Kafka Connect's rule): a dropped or retyped field
is never applied to the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sluice.connectors.jdbc.urls import Dialect

if TYPE_CHECKING:
    import pyarrow as pa


class UnsupportedTypeError(TypeError):
    """A field whose Arrow type has no column type in the target dialect."""


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


def column_type(dialect: Dialect, kind: pa.DataType, key: bool = False) -> str:
    """The column type for an Arrow type; ``key`` columns get an indexable type in MariaDB."""
    import pyarrow as pa  # pyarrow: config validation imports this module (the jdbc-sink class)

    if pa.types.is_decimal(kind):
        if dialect is Dialect.POSTGRESQL:
            return f"numeric({kind.precision},{kind.scale})"
        return f"DECIMAL({kind.precision},{kind.scale})"
    if pa.types.is_nested(kind):  # lists, maps, structs
        return "jsonb" if dialect is Dialect.POSTGRESQL else "JSON"
    table = _PG if dialect is Dialect.POSTGRESQL else _MYSQL
    column = table.get(_kind(kind) or "")
    if column is None:
        raise UnsupportedTypeError(f"no {dialect.value} column type for Arrow type {kind}")
    if key and dialect is Dialect.MYSQL and column in ("LONGTEXT", "LONGBLOB"):
        return "VARCHAR(255)" if column == "LONGTEXT" else "VARBINARY(255)"
    return column


def _kind(kind: pa.DataType) -> str | None:
    """The name ``_PG`` and ``_MYSQL`` know an Arrow type by (a timestamp with a zone is an
    instant, one without a local date-time), None for a type without a column."""
    import pyarrow as pa  # pyarrow: config validation imports this module (the jdbc-sink class)

    if pa.types.is_timestamp(kind):
        return "timestamp" if kind.tz else "timestamp_ntz"
    checks = {
        "string": pa.types.is_string(kind) or pa.types.is_large_string(kind),
        "binary": pa.types.is_binary(kind) or pa.types.is_large_binary(kind),
        "boolean": pa.types.is_boolean(kind),
        "byte": pa.types.is_int8(kind),
        "short": pa.types.is_int16(kind),
        "integer": pa.types.is_int32(kind),
        "long": pa.types.is_int64(kind),
        "float": pa.types.is_float32(kind),
        "double": pa.types.is_float64(kind),
        "date": pa.types.is_date32(kind),
    }
    return next((name for name, matches in checks.items() if matches), None)


def _column(dialect: Dialect, f: pa.Field, pk: Sequence[str], owner: str) -> str:
    try:
        kind = column_type(dialect, f.type, key=f.name in pk)
    except UnsupportedTypeError as exc:
        raise UnsupportedTypeError(f"{owner}: field {f.name!r}: {exc}") from None
    return f"{quote(dialect, f.name)} {kind}{' NOT NULL' if f.name in pk else ' NULL'}"


def create_table_sql(
    dialect: Dialect, schema: str, table: str, fields: Sequence[pa.Field], pk: Sequence[str], owner: str
) -> str:
    """``CREATE TABLE IF NOT EXISTS`` for ``fields``; ``owner`` names the connector in errors."""
    names = [f.name for f in fields]
    missing = [k for k in pk if k not in names]
    if missing:
        raise ValueError(f"{owner}: key fields {missing} are not fields of the records {names}")
    cols = [_column(dialect, f, pk, owner) for f in fields]
    if pk:
        cols.append(f"PRIMARY KEY ({', '.join(quote(dialect, k) for k in pk)})")
    return f"CREATE TABLE IF NOT EXISTS {qualified(dialect, schema, table)} ({', '.join(cols)})"


def add_columns_sql(
    dialect: Dialect, schema: str, table: str, fields: Sequence[pa.Field], owner: str
) -> list[str]:
    """``ALTER TABLE … ADD COLUMN`` (nullable) per new field, for ``auto.evolve``."""
    target = qualified(dialect, schema, table)
    return [f"ALTER TABLE {target} ADD COLUMN {_column(dialect, f, (), owner)}" for f in fields]
