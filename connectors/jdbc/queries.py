"""The SQL of a JDBC source, planned as pure values per mode and dialect (table-driven tests).

Positions are "the column values reached" (Kafka Connect JDBC's offsets): the last incrementing
value, the last timestamp, or the last ``(timestamp, id)`` pair read. A planned range
``[start, end)`` of Sluice positions therefore reads the rows *after* ``start`` up to and including
``end`` in the mode's order — ``(start, end]`` in column values — so replaying a plan reads the same
rows (as far as the table still holds them), and consecutive ranges neither overlap nor leave a gap.

======================== =============================== ==========================================
mode                     position key                    rows of a range
======================== =============================== ==========================================
incrementing             (id,)                           ``start < id <= end``
timestamp                (ts_micros,)                    ``start < ts <= end``
timestamp+incrementing   (ts_micros, id)                 ``(start_ts, start_id) < (ts, id) <= end``
bulk                     (snapshot number,)              the whole table (one snapshot per batch)
======================== =============================== ==========================================

Several timestamp columns mean ``COALESCE(c1, c2, …)`` (Kafka's comma list). Placeholders are
``%s`` for both drivers (PyMySQL and psycopg); a user's ``query`` has its ``%`` doubled so a
``LIKE 'a%'`` survives parameter substitution.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from sluice.connectors.jdbc.ddl import quote
from sluice.connectors.jdbc.urls import Dialect

#: The position before every row: Kafka's incrementing default is -1; Sluice starts below any id.
INCREMENTING_FLOOR: Final = -(2**63)
#: 0001-01-01T00:00:00 in microseconds since the epoch: before every timestamp a database holds.
TIMESTAMP_FLOOR: Final = -62135596800 * 1_000_000
QUERY_ALIAS: Final = "sluice_q"


class Mode(StrEnum):
    BULK = "bulk"
    INCREMENTING = "incrementing"
    TIMESTAMP = "timestamp"
    TIMESTAMP_INCREMENTING = "timestamp+incrementing"

    @property
    def uses_timestamp(self) -> bool:
        return self in (Mode.TIMESTAMP, Mode.TIMESTAMP_INCREMENTING)

    @property
    def uses_incrementing(self) -> bool:
        return self in (Mode.INCREMENTING, Mode.TIMESTAMP_INCREMENTING)


def quote_table(dialect: Dialect, table: str) -> str:
    """``db.table`` / ``schema.table`` / ``table`` quoted part by part."""
    return ".".join(quote(dialect, part) for part in table.split("."))


@dataclass(frozen=True)
class SelectColumn:
    """One column of the select list: cast to text or to a decimal when its type needs it."""

    name: str
    as_text: bool = False
    as_decimal: str = ""  # e.g. "DECIMAL(20,0)"


@dataclass(frozen=True)
class Source:
    """What one partition reads: a table or a custom query, in one mode."""

    dialect: Dialect
    mode: Mode
    table: str = ""
    query: str = ""
    incrementing: str = ""
    timestamps: tuple[str, ...] = ()
    order_keys: tuple[str, ...] = ()  # the primary key: a stable row order inside one timestamp

    def q(self, name: str) -> str:
        return quote(self.dialect, name)

    @property
    def relation(self) -> str:
        if self.query:
            return f"({self.query.replace('%', '%%')}) {QUERY_ALIAS}"
        return quote_table(self.dialect, self.table)

    @property
    def ts_expr(self) -> str:
        cols = [self.q(c) for c in self.timestamps]
        return cols[0] if len(cols) == 1 else f"COALESCE({', '.join(cols)})"

    @property
    def position_exprs(self) -> tuple[str, ...]:
        """The SQL expressions a position's key parts are values of, in order."""
        if self.mode is Mode.INCREMENTING:
            return (self.q(self.incrementing),)
        if self.mode is Mode.TIMESTAMP:
            return (self.ts_expr,)
        if self.mode is Mode.TIMESTAMP_INCREMENTING:
            return (self.ts_expr, self.q(self.incrementing))
        return ()

    @property
    def order_by(self) -> str:
        exprs = list(self.position_exprs)
        exprs += [self.q(k) for k in self.order_keys if self.q(k) not in exprs]
        return ", ".join(exprs)


@dataclass(frozen=True)
class Sql:
    text: str
    params: tuple[Any, ...] = ()


def _after(src: Source, start: Sequence[Any]) -> Sql:
    exprs = src.position_exprs
    if len(exprs) == 1:
        return Sql(f"{exprs[0]} > %s", (start[0],))
    ts, inc = exprs
    return Sql(f"({ts} > %s OR ({ts} = %s AND {inc} > %s))", (start[0], start[0], start[1]))


def _at_most(src: Source, end: Sequence[Any]) -> Sql:
    exprs = src.position_exprs
    if len(exprs) == 1:
        return Sql(f"{exprs[0]} <= %s", (end[0],))
    ts, inc = exprs
    return Sql(f"({ts} < %s OR ({ts} = %s AND {inc} <= %s))", (end[0], end[0], end[1]))


def _between(src: Source, start: Sequence[Any], end: Sequence[Any]) -> Sql:
    a, b = _after(src, start), _at_most(src, end)
    return Sql(f"{a.text} AND {b.text}", a.params + b.params)


def select_list(src: Source, columns: Sequence[SelectColumn]) -> str:
    """The columns, each under its own name, cast where its type is carried as text or decimal."""
    parts = []
    for c in columns:
        col = f"{QUERY_ALIAS}.{src.q(c.name)}" if src.query else src.q(c.name)
        if c.as_text:
            expr = f"CAST({col} AS CHAR)" if src.dialect is Dialect.MYSQL else f"{col}::text"
        elif c.as_decimal:
            expr = f"CAST({col} AS {c.as_decimal})"
        else:
            parts.append(col)
            continue
        parts.append(f"{expr} AS {src.q(c.name)}")
    return ", ".join(parts)


def range_query(
    src: Source, columns: Sequence[SelectColumn], start: Sequence[Any] | None, end: Sequence[Any] | None
) -> Sql:
    """The rows of one range ``(start, end]`` in position order (bulk: the whole relation)."""
    head = f"SELECT {select_list(src, columns)} FROM {src.relation}"
    if src.mode is Mode.BULK or start is None or end is None:
        order = ", ".join(src.q(k) for k in src.order_keys)
        return Sql(head + (f" ORDER BY {order}" if order else ""))
    where = _between(src, start, end)
    return Sql(f"{head} WHERE {where.text} ORDER BY {src.order_by}", where.params)


def latest_query(src: Source, cap: Any | None) -> Sql:
    """The last position present now; timestamp modes only up to ``cap`` (now - delay)."""
    exprs = src.position_exprs
    if src.mode is Mode.INCREMENTING:
        return Sql(f"SELECT MAX({exprs[0]}) FROM {src.relation}")
    if src.mode is Mode.TIMESTAMP:
        return Sql(f"SELECT MAX({exprs[0]}) FROM {src.relation} WHERE {exprs[0]} <= %s", (cap,))
    if src.mode is Mode.TIMESTAMP_INCREMENTING:
        ts, inc = exprs
        return Sql(
            f"SELECT {ts}, {inc} FROM {src.relation} WHERE {ts} <= %s ORDER BY {ts} DESC, {inc} DESC LIMIT 1",
            (cap,),
        )
    raise ValueError("bulk mode has no column position")


def nth_position_query(src: Source, start: Sequence[Any], end: Sequence[Any], n: int) -> Sql:
    """The position of the ``n``-th row (1-based) after ``start`` up to ``end`` in position order:
    ``WHERE key > start ORDER BY key LIMIT 1 OFFSET n-1`` (limits hold for keys with gaps)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    where = _between(src, start, end)
    exprs = ", ".join(src.position_exprs)
    return Sql(
        f"SELECT {exprs} FROM {src.relation} WHERE {where.text} ORDER BY {exprs} LIMIT 1 OFFSET {n - 1}",
        where.params,
    )


def now_query(dialect: Dialect) -> str:
    """The database's clock in UTC (timestamp modes cap their end at now - delay by it)."""
    if dialect is Dialect.MYSQL:
        return "SELECT UTC_TIMESTAMP(6)"
    return "SELECT (clock_timestamp() AT TIME ZONE 'UTC')"


def columns_query(dialect: Dialect, table: str) -> Sql:
    """The table's columns in order, with the facts ``types.ColumnInfo`` needs."""
    schema, _, name = table.rpartition(".")
    if dialect is Dialect.MYSQL:
        return Sql(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, NUMERIC_PRECISION, NUMERIC_SCALE, IS_NULLABLE, "
            "COLUMN_KEY FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = COALESCE(%s, DATABASE()) "
            "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
            (schema or None, name),
        )
    return Sql(
        "SELECT c.column_name, c.data_type, c.udt_name, c.numeric_precision, c.numeric_scale, "
        "c.is_nullable, CASE WHEN k.column_name IS NULL THEN '' ELSE 'PRI' END "
        "FROM information_schema.columns c LEFT JOIN ("
        " SELECT kcu.table_schema, kcu.table_name, kcu.column_name"
        " FROM information_schema.table_constraints tc"
        " JOIN information_schema.key_column_usage kcu ON kcu.constraint_name = tc.constraint_name"
        " AND kcu.table_schema = tc.table_schema AND kcu.table_name = tc.table_name"
        " WHERE tc.constraint_type = 'PRIMARY KEY') k ON k.table_schema = c.table_schema"
        " AND k.table_name = c.table_name AND k.column_name = c.column_name "
        "WHERE c.table_schema = COALESCE(%s, current_schema()) AND c.table_name = %s "
        "ORDER BY c.ordinal_position",
        (schema or None, name),
    )


def tables_query(dialect: Dialect) -> str:
    """Base tables of the connection's database (MySQL) or visible schemas (PostgreSQL)."""
    if dialect is Dialect.MYSQL:
        return (
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
            "AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME"
        )
    return (
        "SELECT CASE WHEN table_schema = current_schema() THEN table_name "
        "ELSE table_schema || '.' || table_name END FROM information_schema.tables "
        "WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema') "
        "AND table_schema NOT LIKE 'pg_toast%%' AND table_schema NOT LIKE 'pg_temp%%' ORDER BY 1"
    )
