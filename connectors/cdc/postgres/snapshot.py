"""The PostgreSQL side of the initial snapshot (connectors.cdc.snapshot): chunk queries.

Every column is read as its type's text output (psycopg's text loader on each column's type, not
a ``::text`` cast: the cast of a boolean is ``true``, its output ``t``) in the session settings the
slot's reader uses and parsed by the same ``parse_value`` as pgoutput's text values, with the same type
mapping (from ``pg_attribute``'s type oid and modifier): a snapshot row and a streamed row of the
same table have the same Spark types and values. Keys are compared as a row value
``(k1, k2) > (a1::type, a2::type)``, which the primary-key index serves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from sluice.connectors.backfills import sql_condition
from sluice.connectors.cdc.postgres.slot import fetch
from sluice.connectors.cdc.postgres.values import mapped_column, parse_value
from sluice.connectors.cdc.snapshot import Rows


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _table(table: str) -> str:
    schema, _, name = table.partition(".")
    return f"{_ident(schema)}.{_ident(name)}"


def columns(conn: Any, table: str) -> list[tuple[str, int, int, str]]:
    """(name, type oid, type modifier, SQL type) of the table's columns, in order."""
    rows = fetch(
        conn,
        "SELECT a.attname::text, a.atttypid::int, a.atttypmod, format_type(a.atttypid, a.atttypmod) "
        "FROM pg_attribute a WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attnum",
        (_table(table),),
    )
    return [(str(n), int(o), int(m), str(t)) for n, o, m, t in rows]


def _text_rows(conn: Any, sql: str, params: Sequence[Any], oids: set[int]) -> list[tuple[Any, ...]]:
    """Rows with every value as the server's text output, as pgoutput sends it."""
    # psycopg: config validation imports this module (the postgres-cdc class)
    from psycopg.types.string import TextLoader

    with contextlib.closing(conn.cursor()) as cur:
        for oid in oids:
            cur.adapters.register_loader(oid, TextLoader)
        cur.execute(sql, params)
        return [tuple(r) for r in cur.fetchall()]


def read_chunk(
    conn: Any,
    table: str,
    keys: Sequence[str],
    after: list[Any] | None,
    upto: list[Any] | None,
    limit: int | None,
    where: str,
    condition: str = "",
) -> Rows:
    """Rows with ``after < key <= upto`` (either bound optional) in key order, at most ``limit``,
    of those that meet the SQL ``condition`` when there is one (a backfill's filter)."""
    cols = columns(conn, table)
    types = {name: sql_type for name, _, _, sql_type in cols}
    owner = f"{where} table {table!r}"
    mapped = tuple(mapped_column(name, oid, mod, owner) for name, oid, mod, _ in cols)
    key_row = "(" + ", ".join("t." + _ident(k) for k in keys) + ")"

    def bound(values: list[Any]) -> str:
        return "(" + ", ".join(f"%s::{types[k]}" for k in keys) + ")"

    conds, params = [sql_condition(condition)] if condition else [], []
    if after is not None:
        conds.append(f"{key_row} > {bound(after)}")
        params += [str(v) for v in after]
    if upto is not None:
        conds.append(f"{key_row} <= {bound(upto)}")
        params += [str(v) for v in upto]
    # Every column name is qualified: an output column ``"id"::text`` is also called ``id``, and an
    # unqualified ORDER BY would sort by that text.
    select = ", ".join(f"t.{_ident(name)}" for name, *_ in cols)
    key_text = ", ".join(f"t.{_ident(k)}" for k in keys)
    sql = f"SELECT {key_text}, {select} FROM {_table(table)} AS t"
    if conds:
        sql += " WHERE " + " AND ".join(conds)
    sql += " ORDER BY " + ", ".join("t." + _ident(k) for k in keys)
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    raw = _text_rows(conn, sql, params, {oid for _, oid, _, _ in cols})
    n = len(keys)
    by_column = zip(*raw, strict=True) if raw else ([] for _ in range(n + len(mapped)))
    texts = list(by_column)[n:]
    values = [[parse_value(c, v, owner) for v in column] for c, column in zip(mapped, texts, strict=True)]
    return Rows(mapped, tuple(keys), values, [list(r[:n]) for r in raw])
