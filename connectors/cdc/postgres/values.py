"""pgoutput's column types and text values -> the JDBC source's Spark types and Python values.

A Relation message names each column's type OID and modifier; they are mapped to the same
``ColumnInfo`` the JDBC source builds from the catalogue and then through the one
``sluice.connectors.jdbc.types.map_column``, so a table reads with the same types whether it is captured
or queried (``numeric(p,s)`` -> ``DECIMAL(p,s)``, ``timestamptz`` -> instant, ``timestamp`` ->
local date-time, ``json``/``uuid``/unconstrained ``numeric`` -> their text). Values arrive in
PostgreSQL's text output form (the decoding session runs with ``TimeZone=UTC``, ``DateStyle=ISO``
and ``bytea_output=hex``) and are parsed here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, Final

from sluice.connectors.jdbc.types import ColumnInfo, MappedColumn, UnsupportedColumnType, map_column
from sluice.connectors.jdbc.urls import Dialect

#: OIDs below this are built in; above it, user types (enums, domains), carried as text.
FIRST_USER_OID: Final = 16384
_NUMERIC_OID: Final = 1700
_BUILTIN: Final = {
    16: "boolean",
    17: "bytea",
    18: "character",
    19: "name",
    20: "bigint",
    21: "smallint",
    23: "integer",
    25: "text",
    26: "bigint",  # oid
    114: "json",
    142: "xml",
    650: "cidr",
    700: "real",
    701: "double precision",
    790: "money",
    829: "macaddr",
    869: "inet",
    1042: "character",
    1043: "character varying",
    1082: "date",
    1083: "time without time zone",
    1114: "timestamp without time zone",
    1184: "timestamp with time zone",
    1186: "interval",
    1266: "time with time zone",
    1560: "bit",
    1562: "bit varying",
    1700: "numeric",
    2950: "uuid",
    3614: "tsvector",
    3802: "jsonb",
}


def column_info(name: str, type_oid: int, type_modifier: int) -> ColumnInfo:
    """The catalogue-style description of a Relation column (numeric's precision from its typmod)."""
    if type_oid >= FIRST_USER_OID:
        return ColumnInfo(name, "USER-DEFINED", f"type oid {type_oid}")
    kind = _BUILTIN.get(type_oid, f"type oid {type_oid}")
    precision = scale = None
    if type_oid == _NUMERIC_OID and type_modifier >= 4:
        packed = type_modifier - 4
        precision, scale = (packed >> 16) & 0xFFFF, packed & 0xFFFF
    return ColumnInfo(name, kind, kind, precision, scale)


def mapped_column(name: str, type_oid: int, type_modifier: int, where: str) -> MappedColumn:
    """The Spark type of a Relation column; UnsupportedColumnType names ``where`` and the column."""
    return map_column(Dialect.POSTGRESQL, column_info(name, type_oid, type_modifier), where)


def _bool(text: str) -> bool:
    return text == "t"


def _bytes(text: str) -> bytes:
    if text.startswith("\\x"):
        return bytes.fromhex(text[2:])
    raise ValueError("bytea not in hex output (bytea_output must be 'hex')")


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def _local(text: str) -> datetime:
    return datetime.fromisoformat(text)


_PARSERS: Final[dict[str, Callable[[str], Any]]] = {
    "TINYINT": int,
    "SMALLINT": int,
    "INT": int,
    "BIGINT": int,
    "FLOAT": float,
    "DOUBLE": float,
    "BOOLEAN": _bool,
    "DATE": date.fromisoformat,
    "TIMESTAMP": _instant,
    "TIMESTAMP_NTZ": _local,
    "BINARY": _bytes,
    "STRING": str,
}


def parser_for(column: MappedColumn) -> Callable[[str], Any]:
    """How a text value of ``column`` becomes the Python value of its Spark type."""
    if column.spark_ddl.startswith("DECIMAL"):
        return Decimal
    try:
        return _PARSERS[column.spark_ddl]
    except KeyError:
        raise UnsupportedColumnType(f"column {column.name!r}: no parser for {column.spark_ddl}") from None


def parse_value(column: MappedColumn, text: str | bytes | None, where: str) -> Any:
    """One text value as its Python value; a value the type cannot take names the column."""
    if text is None:
        return None
    if isinstance(text, bytes):  # binary transfer is never requested; refuse rather than guess
        raise ValueError(f"{where} column {column.name!r}: unexpected binary value")
    try:
        return parser_for(column)(text)
    except (ValueError, ArithmeticError) as exc:
        raise ValueError(
            f"{where} column {column.name!r} ({column.db_type} -> {column.spark_ddl}): "
            f"value {text[:60]!r} cannot be read: {exc}"
        ) from None
