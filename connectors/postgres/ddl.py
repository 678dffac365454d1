"""Spark types to PostgreSQL types, and the table DDL of the PostgreSQL sink.

Only what ``auto.create`` needs: one column per field of the value struct, nested values as
``jsonb`` (they travel as JSON text through COPY), binary as ``bytea``. No schema evolution: a
field missing from an existing table is an error naming it, not a silent ALTER.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType


class UnsupportedTypeError(TypeError):
    """A value field whose Spark type has no PostgreSQL column type here."""


def quote_ident(name: str) -> str:
    """A PostgreSQL quoted identifier (names from data can hold any character)."""
    if not name:
        raise ValueError("empty SQL identifier")
    return '"' + name.replace('"', '""') + '"'


def qualified(schema: str, table: str) -> str:
    return f"{quote_ident(schema)}.{quote_ident(table)}"


def pg_type(dt: DataType) -> str:
    """The PostgreSQL column type for a Spark type."""
    from pyspark.sql import types as T

    simple: list[tuple[type, str]] = [
        (T.StringType, "text"),
        (T.VarcharType, "text"),
        (T.CharType, "text"),
        (T.BooleanType, "boolean"),
        (T.ByteType, "smallint"),
        (T.ShortType, "smallint"),
        (T.IntegerType, "integer"),
        (T.LongType, "bigint"),
        (T.FloatType, "real"),
        (T.DoubleType, "double precision"),
        (T.DateType, "date"),
        (T.TimestampNTZType, "timestamp"),
        (T.TimestampType, "timestamptz"),
        (T.BinaryType, "bytea"),
    ]
    for spark_type, pg in simple:
        if isinstance(dt, spark_type):
            return pg
    if isinstance(dt, T.DecimalType):
        return f"numeric({dt.precision},{dt.scale})"
    if isinstance(dt, T.ArrayType | T.MapType | T.StructType):
        return "jsonb"
    raise UnsupportedTypeError(f"no PostgreSQL type for Spark type {dt.simpleString()}")


def create_table_sql(schema: str, table: str, fields: StructType, pk: Sequence[str], owner: str) -> str:
    """``CREATE TABLE IF NOT EXISTS`` for ``fields``; ``owner`` names the connector in errors."""
    cols: list[str] = []
    for f in fields.fields:
        try:
            kind = pg_type(f.dataType)
        except UnsupportedTypeError as exc:
            raise UnsupportedTypeError(f"{owner}: field {f.name!r}: {exc}") from None
        not_null = " NOT NULL" if f.name in pk else ""
        cols.append(f"{quote_ident(f.name)} {kind}{not_null}")
    missing = [k for k in pk if k not in fields.fieldNames()]
    if missing:
        raise ValueError(f"{owner}: pk.fields {missing} are not fields of the records {fields.fieldNames()}")
    if pk:
        cols.append(f"PRIMARY KEY ({', '.join(quote_ident(k) for k in pk)})")
    return f"CREATE TABLE IF NOT EXISTS {qualified(schema, table)} ({', '.join(cols)})"


def copy_ready_columns(fields: StructType) -> list[tuple[str, str]]:
    """(name, Spark SQL expression) per field, turning values CSV cannot carry into text.

    Nested values become JSON (for ``jsonb``), binary becomes ``\\x<hex>`` (bytea's text form);
    everything else is written by Arrow's CSV writer as PostgreSQL reads it.
    """
    from pyspark.sql import types as T

    out: list[tuple[str, str]] = []
    for f in fields.fields:
        ref = "`" + f.name.replace("`", "``") + "`"
        if isinstance(f.dataType, T.ArrayType | T.MapType | T.StructType):
            out.append((f.name, f"to_json({ref})"))
        elif isinstance(f.dataType, T.BinaryType):
            out.append((f.name, f"concat('\\\\x', lower(hex({ref})))"))
        else:
            out.append((f.name, ref))
    return out
