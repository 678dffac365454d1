"""The initial snapshot of a change-capture source: existing rows in primary-key chunks, lock-free.

``snapshot.mode=initial`` (Debezium's default) makes every captured table ``db.table`` also have a
snapshot partition ``snapshot:db.table`` routed to the same topic. Its position is the chunk
counter ``(n,)`` with meta ``after`` (the last primary key read, JSON) and ``done`` once the table
is read to its end; a range ``[(n,){after=a}, (n+1,){after=b})`` is the rows with ``a < pk <= b``
in key order, emitted as op ``r`` records. Planning reads the next ``snapshot.chunk.size`` rows of
each table (``WHERE pk > a ORDER BY pk LIMIT n``) with plain reads — no lock, no long transaction —
and a re-run of a planned chunk after a crash reads the same key range again.

Why the target ends equal to the source without locks (the ordering argument DBLog relies on):
  1. Capture's start ``S`` is fixed *before* the first chunk is read (PostgreSQL: the replication
     slot's consistent point; MySQL: the binlog end, kept in the snapshot positions' meta
     ``origin`` so a restarted task resumes streaming at the same ``S``). Every change committed
     after ``S`` is in the log from ``S`` on.
  2. The log partitions are *held* at ``S`` until every snapshot partition has *committed* its
     last chunk, so every snapshot record is sent before any change record of its table — and to
     the same RocketMQ queue (``chunk_table``), so a sink sees them in that order too.
  3. A chunk read at time ``T`` shows each row as of ``T``: every change committed before ``T`` is
     in it, and the log replays the changes since ``S`` after it, in commit order. A keyed sink
     (upsert, delete on tombstone) applying "row as of T" then "every change since S" ends with
     each key's last change (or with the snapshot row when the key did not change after ``S``): a
     replayed older change is overwritten by the later ones, and no snapshot row can follow a
     later change of its key. Rows deleted before ``T`` are not read; their delete is replayed.
So the target converges to the source; while the snapshot and the replay of ``[S, T]`` run it may
show older states of a row (it is not a point-in-time copy until the replay has passed ``T``).
The log must be kept from ``S`` while the snapshot runs (the slot does this for PostgreSQL; MySQL's
binlog retention must be longer than the snapshot takes). A snapshot of tables without a primary
key is not done (they are refused, as for streaming).

Generations: a snapshot partition's position also carries meta ``gen`` (absent: 0, the initial
snapshot above). A signal (connectors.cdc.ondemand) starts generation ``g + 1`` of a table at the
next chunk counter — the key keeps growing, so positions never go backwards — and those chunks are
read beside the running log, reconciled differently (connectors.cdc.ondemand says how); only
generation 0 holds the log.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from sluice.connectors.backfills import sql_condition
from sluice.connectors.cdc.envelope import read_table
from sluice.connectors.cdc.read_ahead import ReadAhead
from sluice.connectors.jdbc.types import MappedColumn
from sluice.connectors.key_chunks import (
    PREFIX,
    Chunk,
    decode_key,
    encode_key,
    first_position,
    is_snapshot,
    partition_of,
    table_of,
)
from sluice.connectors.positions import Position

__all__ = [
    "PREFIX",
    "Chunk",
    "decode_key",
    "encode_key",
    "first_position",
    "is_snapshot",
    "partition_of",
    "table_of",
]

if TYPE_CHECKING:
    import pyarrow as pa

#: snapshot.mode values -> what the source does: read existing rows first, and stream or not.
MODES: Final = {
    "never": "never",
    "no_data": "never",
    "schema_only": "never",
    "initial": "initial",
    "initial_only": "initial_only",
}
CHUNK_SIZE: Final = 10_000


def mode_problem(value: Any) -> str | None:
    if value in MODES:
        return None
    return (
        f"snapshot.mode {value!r} is not supported: use initial, initial_only or never ({', '.join(MODES)})"
    )


def snapshot_mode(config: Mapping[str, Any]) -> str:
    return MODES.get(str(config.get("snapshot.mode") or "initial"), "initial")


def origin_of(committed: Mapping[str, Position]) -> str:
    """The capture start a committed snapshot position recorded ("" when none has)."""
    for partition, position in committed.items():
        if is_snapshot(partition) and position.get("origin"):
            return position.get("origin")
    return ""


def finished(tables: Sequence[str], committed: Mapping[str, Position]) -> bool:
    """Every table's initial snapshot committed its last chunk (the log may be released from its
    hold); a later generation (connectors.cdc.ondemand) runs beside the log and holds nothing."""

    def over(position: Position | None) -> bool:
        return position is not None and (position.get("done") == "1" or bool(position.get("gen")))

    return all(over(committed.get(partition_of(t))) for t in tables)


# ---- reading ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rows:
    """A chunk as read: the table's columns (Spark-mapped, as the log's records have them), its key
    columns, the values of each column as Spark-ready values (a list per column, in ``columns``'
    order: the records are built a column at a time, ``chunk_table``), and each row's primary key
    as the database compares it."""

    columns: tuple[MappedColumn, ...]
    keys: tuple[str, ...]
    values: list[list[Any]]
    row_keys: list[list[Any]]

    def __len__(self) -> int:
        return len(self.row_keys)

    def column(self, name: str) -> list[Any]:
        return self.values[[c.name for c in self.columns].index(name)]

    def taken(self, rows: Sequence[int]) -> Rows:
        """The rows at ``rows``, in that order."""
        return Rows(
            self.columns,
            self.keys,
            [[values[i] for i in rows] for values in self.values],
            [self.row_keys[i] for i in rows],
        )


@dataclass(frozen=True)
class ChunkQuery:
    """A chunk to read: the rows of ``table`` with ``after < key <= upto`` (either bound optional)
    in key order, at most ``limit``, that meet the SQL ``condition`` ("": all; a backfill's filter:
    connectors.backfills)."""

    table: str
    keys: tuple[str, ...]
    after: list[Any] | None = None
    upto: list[Any] | None = None
    limit: int | None = None
    condition: str = ""

    def sql_tail(
        self, keys: Sequence[str], bounds: Sequence[str], param: Callable[[Any], Any] = lambda v: v
    ) -> tuple[str, list[Any]]:
        """The query's ``WHERE … ORDER BY … LIMIT …`` and its parameters, for a database that
        spells the key columns ``keys`` (quoted, qualified) and a bound key value ``bounds``
        (``%s``, ``%s::type``), each value passed as ``param`` makes it: the dialects differ in
        those spellings only. Keys compare as a row value, which the primary-key index serves."""
        row, bound = "(" + ", ".join(keys) + ")", "(" + ", ".join(bounds) + ")"
        conds, params = [sql_condition(self.condition)] if self.condition else [], []
        for op, values in ((">", self.after), ("<=", self.upto)):
            if values is not None:
                conds.append(f"{row} {op} {bound}")
                params += [param(v) for v in values]
        sql = (" WHERE " + " AND ".join(conds) if conds else "") + " ORDER BY " + ", ".join(keys)
        return sql + (f" LIMIT {int(self.limit)}" if self.limit is not None else ""), params


#: (table, after key, up-to key (inclusive), limit, condition) -> that ``ChunkQuery``'s rows (the
#: task binds each table's key columns).
Fetch = Callable[[str, list[Any] | None, list[Any] | None, int | None, str], Rows]


class TableSnapshots:
    """Plans and reads the snapshot partitions of one task; ``fetch`` is the database's chunk query.

    ``fetch_apart`` is the same query over a connection of its own: with it, each table's next
    chunk is read on a thread while the batch of the chunk just planned runs
    (connectors.cdc.read_ahead), and the next planning takes it when it starts where that read
    did. Reading a chunk earlier changes nothing of the argument above: any read after capture's
    start ``S`` converges, whenever it is made."""

    def __init__(
        self,
        tables: Sequence[str],
        chunk_size: int,
        fetch: Fetch,
        idle: Sequence[str] = (),
        fetch_apart: Fetch | None = None,
    ) -> None:
        self.tables = list(tables)
        self.idle = [t for t in idle if t not in self.tables]  # partitions for signals only
        self.chunk_size = max(1, chunk_size)
        self.fetch = fetch
        self.fetch_apart = fetch_apart
        self._cache: dict[tuple[str, Position, Position], Rows] = {}
        #: each table's next chunk, read ahead from the key it starts after (``encode_key``)
        self._ahead: dict[str, ReadAhead[str, Rows]] = {}

    def partitions(self) -> list[str]:
        return [partition_of(t) for t in self.partitions_tables()]

    def partitions_tables(self) -> list[str]:
        """The tables that have a snapshot partition: the snapshot's, then those for re-reads only."""
        return self.tables + self.idle

    def first(self, partition: str, origin: str) -> Position:
        return first_position(origin, done=table_of(partition) in self.idle)

    def current(self, committed: Mapping[str, Position], origin: str) -> dict[str, Position]:
        """Every snapshot partition's committed position, or its first."""
        return {p: committed.get(p) or self.first(p, origin) for p in self.partitions()}

    def latest(self, committed: Mapping[str, Position], origin: str) -> dict[str, Position]:
        """The end of each table's next chunk (read now, kept for ``rows``); a finished table stays."""
        self._cache.clear()
        out = {
            partition_of(t): committed.get(partition_of(t)) or self.first(partition_of(t), origin)
            for t in self.idle
        }
        for table in self.tables:
            partition = partition_of(table)
            start = committed.get(partition) or first_position(origin)
            chunk = Chunk.of(start)
            if chunk.done or chunk.generation:  # a later generation is connectors.cdc.ondemand's
                out[partition] = start
                continue
            rows = self._next_chunk(table, chunk.after)
            last = rows.row_keys[-1] if rows.row_keys else chunk.after
            done = len(rows) < self.chunk_size
            end = Chunk(chunk.index + 1, last, done, chunk.origin).position()
            self._cache[(partition, start, end)] = rows
            out[partition] = end
            if not done:
                self._read_ahead(table, last)
        return out

    def _next_chunk(self, table: str, after: list[Any] | None) -> Rows:
        """The chunk after ``after``: the one read ahead when it started there, else read now."""
        ahead = self._ahead.get(table)
        rows = ahead.take(_ahead_key(after)) if ahead is not None else None
        return rows if rows is not None else self.fetch(table, after, None, self.chunk_size, "")

    def _read_ahead(self, table: str, after: list[Any] | None) -> None:
        fetch = self.fetch_apart
        if fetch is None:
            return
        ahead = self._ahead.setdefault(table, ReadAhead(f"snapshot of {table}"))
        ahead.start(_ahead_key(after), lambda _: fetch(table, after, None, self.chunk_size, ""), follow=False)

    def rows(self, partition: str, start: Position, end: Position) -> Rows:
        """The rows of a planned chunk: from planning, or read again by key range (after a crash)."""
        cached = self._cache.get((partition, start, end))
        if cached is not None:
            return cached
        first, last = Chunk.of(start), Chunk.of(end)
        if last.after is None:  # an empty table: nothing was read
            return self.fetch(table_of(partition), None, None, 0, "")
        return self.fetch(table_of(partition), first.after, last.after, None, "")


def _ahead_key(after: list[Any] | None) -> str:
    return "" if after is None else encode_key(after)


def chunk_table(
    rows: Rows,
    source: Mapping[str, Any],
    source_fields: Sequence[tuple[str, str]],
    topic: str,
    partition: str,
) -> pa.Table:
    """The op ``r`` records of a chunk, offsets in key order (connectors.cdc.envelope.read_table).
    Their ``partition`` column is the *table's*, not the snapshot partition's: the runtime shards
    messages by it, so a table's snapshot records land on the same RocketMQ queue as its change
    records, behind them in queue order — a sink reading several queues could otherwise apply a
    change before the snapshot row it follows. (Within a batch no log range of the table is beside
    a chunk: the log is held.)"""
    now_us = time.time_ns() // 1000  # when the chunk was read, as Debezium stamps snapshot records
    ts_ms = now_us // 1000
    return read_table(
        rows.values,
        columns=rows.columns,
        key_columns=rows.keys,
        source={**source, "ts_ms": ts_ms, "snapshot": "true"},
        ts_ms=ts_ms,
        offsets=range(len(rows)),
        timestamp_us=now_us,
        source_fields=source_fields,
        topic=topic,
        partition=table_of(partition),
    )
