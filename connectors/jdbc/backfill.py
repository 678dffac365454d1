"""jdbc-source's backfills: a table's rows read again in primary-key chunks while it streams.

A request (connectors.backfills) gives table ``t`` a snapshot partition ``snapshot:t``
(connectors.key_chunks) beside its live partition ``t``. The planning that applies the request
opens a generation (no rows); each later planning takes the next ``read.split.rows`` keys that meet
the condition (``WHERE cond AND pk > after ORDER BY pk LIMIT n``) until a chunk comes back short.
The chunk's rows are read by the batch's Spark task like any range: ``cond AND after < pk <= last``.

Why no key ends older than its source row: a query source sends a row as it is when read, never
an old version of it. A batch that reads a chunk of ``t`` plans no live range of ``t``
(:func:`hold_live`), so the chunk's rows are read after every live range of ``t`` sent before it,
and before every one sent after it; batches of a task are sent one after the other, to the queue
of each row's key. So for every key the sink's last record is the newest read. A re-run of a
planned chunk after a crash reads the same key range again, at that later time: the same holds.
Rows deleted since are not sent (a query source sees deletes only as absence).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from sluice.connectors import backfills
from sluice.connectors.backfills import Action, Backfill
from sluice.connectors.jdbc.queries import SelectColumn, Source, Sql, select_list
from sluice.connectors.key_chunks import Chunk, first_position, partition_of, table_of
from sluice.connectors.positions import Position

#: (chunk, limit) -> the keys after the chunk's last key that meet its condition, in key order.
ReadKeys = Callable[[Chunk, int], list[tuple[Any, ...]]]


def partitions(tables: Iterable[str], requests: Sequence[Backfill]) -> list[str]:
    """The snapshot partitions of the tables some request named (the others have none)."""
    return [partition_of(t) for t in tables if backfills.newest(requests, t) is not None]


def earliest() -> Position:
    """A snapshot partition before any request: nothing to read."""
    return first_position(done=True)


def next_position(
    requests: Sequence[Backfill], table: str, start: Position, read_keys: ReadKeys, size: int
) -> Position:
    """Where ``table``'s committed snapshot position ``start`` moves at this planning: a new
    request opens a generation, a cancelled one ends it, a running one takes its next chunk
    (``read_keys``: at most ``size`` keys; fewer mean the range is read to its end)."""
    chunk = Chunk.of(start)
    step = backfills.step(requests, table, start)
    request = step.request
    if step.action is Action.OPEN and request is not None:
        return chunk.reopened(request.signal, request.requested_ms, request.id, request.condition).position()
    if step.action is Action.STOP:
        return chunk.stopped_here().position()
    if not chunk.running:
        return start
    keys = read_keys(chunk, size)
    last = list(keys[-1]) if keys else chunk.after
    rows = chunk.rows + len(keys)
    return replace(chunk, index=chunk.index + 1, after=last, done=len(keys) < size, rows=rows).position()


def holds_rows(r_start: Position, r_end: Position) -> bool:
    """Whether a planned snapshot range reads rows: a chunk of one generation, not the range that
    opened or ended one."""
    first, last = Chunk.of(r_start), Chunk.of(r_end)
    return first.generation == last.generation and last.after is not None and last.after != first.after


def hold_live(planned: Mapping[str, Position], committed: Mapping[str, Position]) -> dict[str, Position]:
    """The live partitions that wait this planning: those whose table has a chunk planned (its
    committed position is its latest, so no live range of it is beside the chunk)."""
    out = {}
    for partition, end in planned.items():
        start = committed.get(partition)
        table = table_of(partition)
        if start is not None and holds_rows(start, end) and table in committed:
            out[table] = committed[table]
    return out


def key_order(src: Source) -> str:
    return ", ".join(src.q(k) for k in src.order_keys)


def _key_terms(src: Source, condition: str, after: Sequence[Any] | None, upto: Sequence[Any] | None) -> Sql:
    keys = "(" + key_order(src) + ")"
    bound = "(" + ", ".join(["%s"] * len(src.order_keys)) + ")"
    terms, params = ([backfills.sql_condition(condition)] if condition else []), []
    if after is not None:
        terms.append(f"{keys} > {bound}")
        params += list(after)
    if upto is not None:
        terms.append(f"{keys} <= {bound}")
        params += list(upto)
    return Sql(" AND ".join(terms), tuple(params))


def keys_query(src: Source, condition: str, after: Sequence[Any] | None, limit: int) -> Sql:
    """The next ``limit`` keys after ``after`` that meet ``condition``, in key order."""
    where = _key_terms(src, condition, after, None)
    head = f"SELECT {key_order(src)} FROM {src.relation}"
    text = f"{head} WHERE {where.text}" if where.text else head
    return Sql(f"{text} ORDER BY {key_order(src)} LIMIT {int(limit)}", where.params)


def rows_query(
    src: Source,
    columns: Sequence[SelectColumn],
    condition: str,
    after: Sequence[Any] | None,
    upto: Sequence[Any],
) -> Sql:
    """A planned chunk's rows: ``after < key <= upto`` that meet ``condition``, in key order."""
    where = _key_terms(src, condition, after, upto)
    head = f"SELECT {select_list(src, columns)} FROM {src.relation}"
    return Sql(f"{head} WHERE {where.text} ORDER BY {key_order(src)}", where.params)
