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

from sluice.connectors.cdc.postgres.slot import fetch
from sluice.connectors.cdc.postgres.values import mapped_column, parse_value
from sluice.connectors.cdc.snapshot import ChunkQuery, Rows


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


def read_chunk(conn: Any, query: ChunkQuery, where: str) -> Rows:
    """The rows of ``query``, each value the server's text output parsed as pgoutput's."""
    cols = columns(conn, query.table)
    types = {name: sql_type for name, _, _, sql_type in cols}
    owner = f"{where} table {query.table!r}"
    mapped = tuple(mapped_column(name, oid, mod, owner) for name, oid, mod, _ in cols)
    keys = [f"t.{_ident(k)}" for k in query.keys]
    tail, params = query.sql_tail(keys, [f"%s::{types[k]}" for k in query.keys], str)
    # Every column name is qualified: an output column ``"id"::text`` is also called ``id``, and an
    # unqualified ORDER BY would sort by that text.
    select = ", ".join(f"t.{_ident(name)}" for name, *_ in cols)
    sql = f"SELECT {', '.join(keys)}, {select} FROM {_table(query.table)} AS t{tail}"
    raw = _text_rows(conn, sql, params, {oid for _, oid, _, _ in cols})
    n = len(keys)
    by_column = zip(*raw, strict=True) if raw else ([] for _ in range(n + len(mapped)))
    texts = list(by_column)[n:]
    values = [[parse_value(c, v, owner) for v in column] for c, column in zip(mapped, texts, strict=True)]
    return Rows(mapped, query.keys, values, [list(r[:n]) for r in raw])
