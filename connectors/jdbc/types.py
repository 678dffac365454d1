"""Database column types -> Spark types, faithfully, for MySQL/MariaDB and PostgreSQL.

A record's schema comes from the table (``information_schema.columns``), so every value keeps its
exact type: ``DECIMAL(p,s)`` stays ``DECIMAL(p,s)``, an unsigned integer is widened to the next type
that holds all its values (``BIGINT UNSIGNED`` -> ``DECIMAL(20,0)``), a timestamp *with* a zone
(MySQL ``TIMESTAMP``, PostgreSQL ``timestamptz``) is an instant (Spark ``TIMESTAMP``, UTC) and one
without (``DATETIME``, ``timestamp``) a local date-time (``TIMESTAMP_NTZ``). Types with no exact
Spark counterpart are carried as their database text (``TIME``, ``JSON``, ``uuid``, an unconstrained
PostgreSQL ``numeric``, enums, ``interval``): the select list casts them (``select_expr``) so the
value is the database's own spelling. A type Sluice cannot carry (geometry, arrays, ranges,
``DECIMAL`` wider than 38 digits) is refused with an error naming connector, table and column.

Pure: Spark types are named by DDL strings (``spark_ddl``) so this module imports no PySpark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from sluice.connectors import spark_schema
from sluice.connectors.jdbc.urls import Dialect

if TYPE_CHECKING:
    import pyarrow as pa

MAX_DECIMAL_PRECISION: Final = 38


class UnsupportedColumnType(ValueError):
    """A column whose type Sluice cannot carry; the message names the column and its type."""


@dataclass(frozen=True)
class ColumnInfo:
    """One column as the catalogue describes it (``information_schema.columns``)."""

    name: str
    data_type: str  # DATA_TYPE: "bigint", "decimal", "timestamp with time zone", "USER-DEFINED"
    column_type: str = ""  # MySQL COLUMN_TYPE ("bigint(20) unsigned", "tinyint(1)"); PG udt_name
    precision: int | None = None
    scale: int | None = None
    nullable: bool = True


@dataclass(frozen=True)
class MappedColumn:
    """A column with its Spark type (``spark_ddl``) and whether the select list casts it to text."""

    name: str
    db_type: str
    spark_ddl: str
    nullable: bool
    as_text: bool = False  # read as the database's text spelling (select_expr casts it)
    as_decimal: bool = False  # read through CAST(... AS DECIMAL(p,s)) (unsigned BIGINT)


_MYSQL_TEXT: Final = {
    "char",
    "varchar",
    "tinytext",
    "text",
    "mediumtext",
    "longtext",
    "enum",
    "set",
    "json",
}
_MYSQL_BINARY: Final = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
_MYSQL_INTS: Final = {
    # signed type, unsigned type (the next one that holds every value)
    "tinyint": ("TINYINT", "SMALLINT"),
    "smallint": ("SMALLINT", "INT"),
    "mediumint": ("INT", "INT"),
    "int": ("INT", "BIGINT"),
    "integer": ("INT", "BIGINT"),
    "bigint": ("BIGINT", "DECIMAL(20,0)"),
}
_PG_SIMPLE: Final = {
    "smallint": "SMALLINT",
    "integer": "INT",
    "bigint": "BIGINT",
    "real": "FLOAT",
    "double precision": "DOUBLE",
    "boolean": "BOOLEAN",
    "date": "DATE",
    "timestamp without time zone": "TIMESTAMP_NTZ",
    "timestamp with time zone": "TIMESTAMP",
    "bytea": "BINARY",
    "text": "STRING",
    "character varying": "STRING",
    "character": "STRING",
    "name": "STRING",
    "citext": "STRING",
}
#: PostgreSQL types carried as their text spelling (``col::text``).
_PG_AS_TEXT: Final = {
    "json",
    "jsonb",
    "uuid",
    "xml",
    "inet",
    "cidr",
    "macaddr",
    "interval",
    "money",
    "time without time zone",
    "time with time zone",
    "bit",
    "bit varying",
    "tsvector",
}


def _decimal(info: ColumnInfo, where: str) -> str:
    p, s = info.precision, info.scale or 0
    if p is None:
        raise UnsupportedColumnType(f"{where}: DECIMAL without precision")
    if p > MAX_DECIMAL_PRECISION:
        raise UnsupportedColumnType(
            f"{where}: type {info.column_type or info.data_type} has precision {p}; Spark decimals hold "
            f"at most {MAX_DECIMAL_PRECISION} digits (cast it in a 'query' to a narrower DECIMAL or to text)"
        )
    return f"DECIMAL({p},{s})"


def map_mysql(info: ColumnInfo, where: str) -> MappedColumn:
    kind = info.data_type.lower()
    full = (info.column_type or kind).lower()
    unsigned = "unsigned" in full

    def mapped(ddl: str, **flags: bool) -> MappedColumn:
        return MappedColumn(info.name, full, ddl, info.nullable, **flags)

    if kind in _MYSQL_INTS:
        ddl = _MYSQL_INTS[kind][1 if unsigned else 0]
        return mapped(ddl, as_decimal=ddl.startswith("DECIMAL"))
    if kind == "decimal" or kind == "numeric":
        return mapped(_decimal(info, where))
    if kind == "float":
        return mapped("FLOAT")
    if kind in ("double", "real"):
        return mapped("DOUBLE")
    if kind == "bit":
        return mapped("BOOLEAN" if (info.precision or 1) == 1 else "BINARY")
    if kind == "boolean" or kind == "bool":
        return mapped("BOOLEAN")
    if kind == "date":
        return mapped("DATE")
    if kind == "datetime":
        return mapped("TIMESTAMP_NTZ")
    if kind == "timestamp":
        return mapped("TIMESTAMP")
    if kind == "year":
        return mapped("SMALLINT")
    if kind == "time":
        return mapped("STRING", as_text=True)
    if kind in _MYSQL_TEXT:
        return mapped("STRING", as_text=kind in ("enum", "set"))
    if kind in _MYSQL_BINARY:
        return mapped("BINARY")
    raise UnsupportedColumnType(f"{where}: unsupported column type {full!r}")


def map_postgres(info: ColumnInfo, where: str) -> MappedColumn:
    kind = info.data_type.lower()
    udt = (info.column_type or kind).lower()

    def mapped(ddl: str, as_text: bool = False) -> MappedColumn:
        return MappedColumn(info.name, udt, ddl, info.nullable, as_text=as_text)

    if kind in _PG_SIMPLE:
        return mapped(_PG_SIMPLE[kind])
    if kind == "numeric":
        if info.precision is None:  # unconstrained numeric: any scale; its text is exact
            return mapped("STRING", as_text=True)
        return mapped(_decimal(info, where))
    if kind in _PG_AS_TEXT:
        return mapped("STRING", as_text=True)
    if kind == "user-defined" and info.column_type:
        return mapped("STRING", as_text=True)  # enums and domains over text (checked at read)
    raise UnsupportedColumnType(f"{where}: unsupported column type {udt!r}")


def map_column(dialect: Dialect, info: ColumnInfo, where: str) -> MappedColumn:
    """The Spark type of one column; ``where`` names connector and table for the error."""
    where = f"{where} column {info.name!r}"
    return map_mysql(info, where) if dialect is Dialect.MYSQL else map_postgres(info, where)


_PG_CURSOR_TYPES: Final = {
    16: "boolean",
    17: "bytea",
    20: "bigint",
    21: "smallint",
    23: "integer",
    25: "text",
    700: "real",
    701: "double precision",
    1042: "character",
    1043: "character varying",
    1082: "date",
    1114: "timestamp without time zone",
    1184: "timestamp with time zone",
    1700: "numeric",
    114: "json",
    3802: "jsonb",
    2950: "uuid",
    1083: "time without time zone",
}


def postgres_info_from_oid(name: str, oid: int, precision: int | None, scale: int | None) -> ColumnInfo:
    """A ColumnInfo for a custom query's result column (psycopg's type OID, precision and scale)."""
    kind = _PG_CURSOR_TYPES.get(oid, f"oid {oid}")
    if kind != "numeric":
        precision = scale = None
    return ColumnInfo(name, kind, kind, precision, scale)


_MYSQL_FIELD_TYPES: Final = {
    0: "decimal",
    246: "decimal",
    1: "tinyint",
    2: "smallint",
    3: "int",
    4: "float",
    5: "double",
    7: "timestamp",
    8: "bigint",
    9: "mediumint",
    10: "date",
    11: "time",
    12: "datetime",
    13: "year",
    16: "bit",
    245: "json",
    247: "enum",
    248: "set",
    15: "varchar",
    253: "varchar",
    254: "char",
    249: "blob",
    250: "blob",
    251: "blob",
    252: "blob",
}
_BINARY_CHARSET: Final = 63


def mysql_info_from_field(
    name: str, type_code: int, length: int, decimals: int, flags: int, charset: int
) -> ColumnInfo:
    """A ColumnInfo for a custom query's result column (PyMySQL's field description)."""
    kind = _MYSQL_FIELD_TYPES.get(type_code, f"type {type_code}")
    unsigned = bool(flags & 32)
    if kind in ("varchar", "char", "blob") and charset == _BINARY_CHARSET:
        kind = "varbinary" if kind != "blob" else "blob"
    elif kind == "blob":
        kind = "text"
    precision = scale = None
    if kind == "decimal":
        scale = decimals
        precision = length - (1 if decimals else 0) - (0 if unsigned else 1)
    column_type = f"{kind} unsigned" if unsigned else kind
    return ColumnInfo(name, kind, column_type, precision, scale)


#: The schema-JSON names (connectors.spark_schema) of the column types' DDL (``MappedColumn.spark_ddl``).
_JSON_NAMES: Final = {
    "TINYINT": "byte",
    "SMALLINT": "short",
    "INT": "integer",
    "BIGINT": "long",
    "FLOAT": "float",
    "DOUBLE": "double",
    "BOOLEAN": "boolean",
    "DATE": "date",
    "TIMESTAMP": "timestamp",
    "TIMESTAMP_NTZ": "timestamp_ntz",
    "BINARY": "binary",
    "STRING": "string",
}


def arrow_type(ddl: str) -> pa.DataType:
    """The Arrow type of a column's Spark DDL (``BIGINT``, ``DECIMAL(12,2)``), as Spark maps it."""
    try:
        return spark_schema.arrow_type(_JSON_NAMES.get(ddl, ddl.lower()))
    except TypeError:
        raise ValueError(f"no Arrow type for {ddl}") from None
