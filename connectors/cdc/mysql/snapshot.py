"""The MySQL/MariaDB side of the initial snapshot (connectors.cdc.snapshot): chunk queries.

Columns are described as the binlog's table map describes them (``information_schema`` types
folded onto the binlog's kinds: every TEXT is ``text``, every BLOB ``blob``, BINARY/VARBINARY
``varbinary``) and mapped by the same ``sluice.connectors.cdc.mysql.values.mapped_column``; PyMySQL's
values go through the same ``to_spark``. So a snapshot row and a streamed row of a table have the
same Spark types and values (the session runs in UTC, as the binlog's TIMESTAMPs are). The rows
are read by the JDBC source's compiled reader (``connectors.jdbc.read.mysql_fetches``, asyncmy with
PyMySQL's own decoders: the same values, 0.9 against 6.5-7 µs a row); the columns over PyMySQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from sluice.connectors.cdc.mysql.binlog import fetch
from sluice.connectors.cdc.mysql.values import to_spark
from sluice.connectors.cdc.snapshot import ChunkQuery, Rows
from sluice.connectors.jdbc.queries import Sql
from sluice.connectors.jdbc.read import ConnectParams, mysql_fetches
from sluice.connectors.jdbc.types import ColumnInfo, MappedColumn, map_column
from sluice.connectors.jdbc.urls import Dialect

_KINDS = {
    "tinytext": "text",
    "text": "text",
    "mediumtext": "text",
    "longtext": "text",
    "tinyblob": "blob",
    "blob": "blob",
    "mediumblob": "blob",
    "longblob": "blob",
    "binary": "varbinary",
    "varbinary": "varbinary",
}


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _table(table: str) -> str:
    db, _, name = table.partition(".")
    return f"{_ident(db)}.{_ident(name)}"


def _info(name: str, data_type: str, column_type: str, precision: Any, scale: Any) -> ColumnInfo:
    """The column as ``values.column_info`` describes the binlog table map's (same kinds)."""
    kind = _KINDS.get(data_type.lower(), data_type.lower())
    unsigned = "unsigned" in column_type.lower()
    if kind not in ("decimal", "bit"):
        precision = scale = None
    if kind == "bit":
        scale = None
    return ColumnInfo(
        name,
        kind,
        f"{kind} unsigned" if unsigned else kind,
        int(precision) if precision is not None else None,
        int(scale) if scale is not None else None,
    )


def columns(conn: Any, table: str, where: str) -> tuple[Any, ...]:
    db, _, name = table.partition(".")
    rows = fetch(
        conn,
        "SELECT column_name, data_type, column_type, numeric_precision, numeric_scale "
        "FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
        "ORDER BY ordinal_position",
        (db, name),
    )
    owner = f"{where} table {table!r}"
    return tuple(
        map_column(Dialect.MYSQL, _info(str(n), str(d), str(c), p, s), owner) for n, d, c, p, s in rows
    )


#: Spark types whose PyMySQL value, when it is exactly of this Python type, ``to_spark`` returns as
#: it is: most of a chunk's values, which then skip the call (``_column_values``).
_AS_IS: dict[str, type] = {
    "TINYINT": int, "SMALLINT": int, "INT": int, "BIGINT": int, "FLOAT": float, "DOUBLE": float,
    "STRING": str, "BINARY": bytes, "TIMESTAMP_NTZ": datetime, "DATE": date,
}  # fmt: skip


def _value(column: MappedColumn, value: Any, where: str) -> Any:
    if isinstance(value, bytes) and column.spark_ddl == "BOOLEAN":  # BIT(1) arrives as a byte
        return int.from_bytes(value, "big") != 0
    return to_spark(column, value, where)


def _column_values(column: MappedColumn, values: Sequence[Any], where: str) -> list[Any]:
    """One column of a chunk as Spark-ready values: ``_value`` of each, called only for the values
    it would change (a per-value call was a fifth of a snapshot chunk's read, #18)."""
    ddl = column.spark_ddl
    kind = Decimal if ddl.startswith("DECIMAL") else _AS_IS.get(ddl)
    return [v if v is None or type(v) is kind else _value(column, v, where) for v in values]


def read_chunk(conn: Any, reads: ConnectParams, query: ChunkQuery, where: str) -> Rows:
    """The rows of ``query``: the columns read over ``conn``, the rows by ``mysql_fetches`` of
    ``reads``."""
    mapped = columns(conn, query.table, where)
    owner = f"{where} table {query.table!r}"
    select = ", ".join(_ident(c.name) for c in mapped)
    tail, params = query.sql_tail([_ident(k) for k in query.keys], ["%s"] * len(query.keys))
    sql = Sql(f"SELECT {select} FROM {_table(query.table)}{tail}", tuple(params))
    raw = [row for rows in mysql_fetches(reads, where, sql) for row in rows]
    names = [c.name for c in mapped]
    at = [names.index(k) for k in query.keys]
    by_column = zip(*raw, strict=True) if raw else ([] for _ in mapped)
    values = [_column_values(c, column, owner) for c, column in zip(mapped, by_column, strict=True)]
    return Rows(mapped, query.keys, values, [[r[i] for i in at] for r in raw])
