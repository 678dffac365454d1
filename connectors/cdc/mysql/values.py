"""Binary-log column types and decoded values -> the JDBC source's Spark types and Python values.

A table map event describes each column by its binlog type code and metadata (decimal precision
and scale, bit width, character set — ``binary`` for VARBINARY/BLOB — and, with
``binlog_row_metadata=FULL``, signedness and names). That becomes the same ``ColumnInfo`` the JDBC
source builds from ``information_schema`` and goes through the one
``sluice.connectors.jdbc.types.map_column``, so a table reads with the same Spark types whether it is
captured or queried (``DATETIME`` -> local date-time, ``TIMESTAMP`` -> instant, ``TIME`` -> its
text, ``BIGINT UNSIGNED`` -> ``DECIMAL(20,0)``). The binlog cannot tell ``TINYINT(1)`` from
``TINYINT``; both are TINYINT, as the JDBC source reads them.

Values come decoded by ``pymysqlreplication`` and are normalized here: TIMESTAMPs arrive as naive
UTC date-times, TIMEs as timedeltas, SETs as Python sets, JSON (MySQL's binary JSON) as objects.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any, Final

from sluice.connectors.jdbc.types import ColumnInfo, MappedColumn, map_column
from sluice.connectors.jdbc.urls import Dialect

_TYPES: Final = {
    0: "decimal",
    246: "decimal",
    1: "tinyint",
    2: "smallint",
    3: "int",
    4: "float",
    5: "double",
    7: "timestamp",
    17: "timestamp",
    8: "bigint",
    9: "mediumint",
    10: "date",
    14: "date",
    11: "time",
    19: "time",
    12: "datetime",
    18: "datetime",
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


def column_info(column: Any) -> ColumnInfo:
    """The catalogue-style description of a table-map column (``pymysqlreplication.column.Column``)."""
    code = int(column.type)
    kind = _TYPES.get(code, f"binlog type {code}")
    binary = str(getattr(column, "character_set_name", "") or "").lower() == "binary"
    if kind == "blob":
        kind = "blob" if binary else "text"
    elif kind in ("varchar", "char") and binary:
        kind = "varbinary"
    precision = scale = None
    if kind == "decimal":
        precision, scale = getattr(column, "precision", None), getattr(column, "decimals", None)
    elif kind == "bit":
        precision = getattr(column, "bits", None)
    unsigned = bool(getattr(column, "unsigned", False))
    return ColumnInfo(str(column.name), kind, f"{kind} unsigned" if unsigned else kind, precision, scale)


def mapped_column(column: Any, where: str) -> MappedColumn:
    """The Spark type of a table-map column; UnsupportedColumnType names ``where`` and the column."""
    return map_column(Dialect.MYSQL, column_info(column), where)


def _time_text(value: timedelta) -> str:
    sign = "-" if value < timedelta(0) else ""
    total = abs(value)
    seconds = total.days * 86400 + total.seconds
    text = f"{sign}{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
    return text + (f".{total.microseconds:06d}" if total.microseconds else "")


def to_spark(column: MappedColumn, value: Any, where: str) -> Any:
    """One decoded binlog value as the Python value of ``column``'s Spark type."""
    if value is None:
        return None
    ddl = column.spark_ddl
    try:
        if ddl.startswith("DECIMAL"):
            return Decimal(value) if not isinstance(value, Decimal) else value
        if ddl in ("TINYINT", "SMALLINT", "INT", "BIGINT"):
            return int(value)
        if ddl in ("FLOAT", "DOUBLE"):
            return float(value)
        if ddl == "BOOLEAN":
            return bool(int(value, 2) if isinstance(value, str) else value)
        if ddl == "TIMESTAMP":
            return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        if ddl in ("TIMESTAMP_NTZ", "DATE"):
            if not isinstance(value, date):  # a zero date ('0000-00-00') decodes as text or None
                return None
            return value
        if ddl == "BINARY":
            if isinstance(value, str):  # BIT(n > 1) decodes as a string of '0'/'1'
                return int(value, 2).to_bytes((len(value) + 7) // 8, "big")
            return bytes(value)
        if isinstance(value, timedelta):
            return _time_text(value)
        if isinstance(value, set | frozenset):
            return ",".join(sorted(value))
        if isinstance(value, dict | list):
            return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
        if isinstance(value, bytes):
            return value.decode("utf-8", errors="replace")
        if isinstance(value, datetime):
            return value.isoformat(sep=" ")
        return str(value)
    except (ValueError, TypeError, ArithmeticError, AttributeError) as exc:
        raise ValueError(
            f"{where} column {column.name!r} ({column.db_type} -> {ddl}): value {str(value)[:60]!r} "
            f"cannot be read: {exc}"
        ) from None
