"""Snapshots on demand while streaming (Debezium's incremental snapshot, started by a signal).

A signal (connectors.cdc.signals) found in a batch's log range starts a new *generation* of each
named table's snapshot partition ``snapshot:db.table`` in that same batch: its position moves to the
next chunk counter with meta ``gen`` = g + 1, no key read yet (connectors.cdc.snapshot.Chunk).
From the next batch on, each batch reads one chunk of the table in primary-key order *and* the log,
without holding the log and without locks, until a chunk comes back short (``done``).

Reconciliation (DBLog's watermarks, made exact by Sluice's positions). A batch's log range of table
``t`` is ``[B, E)``: ``B`` where the previous batch ended (everything before it was sent by
committed batches), ``E`` the batch end. Planning reads the chunk with a plain ``SELECT`` at a time
``T``, and only *then* pins the log end and reads the log: so ``E`` lies after every transaction the
``SELECT`` saw (a commit is in the log before it is visible). A chunk row whose key has any change
in ``[B, E)`` is dropped; the rows kept are emitted as op ``r`` records in the batch.

Why a keyed sink (upsert, delete on tombstone) ends equal to the source:
  1. A kept row of key ``k`` is ``k``'s state at ``B``: ``T`` lies in ``[B, E]`` and ``k`` did not
     change between ``B`` and ``E``, so the row read at ``T`` is the one at ``B`` (and at ``E``).
  2. Every log record sent before it is of a change before ``B``, which that state already
     includes; the batch's own log records are of other keys (so their order with the chunk's
     records does not matter); every later change of ``k`` is at or after ``E`` and is sent by a
     later batch, after the chunk row. So no chunk row can overwrite a newer change: the sink ends
     with ``k``'s last change, or with the chunk row when ``k`` never changed again — which is then
     ``k``'s current state.
  3. A dropped row's key changed in ``[B, E)``: its changes from there on are sent, in order, by
     this and later batches, so its last change reaches the sink without the chunk's help. A key
     deleted before ``T`` is not read; its delete is in the log (or happened before capture, and a
     sink that never had the row is right). Rows of the key range inserted after ``T`` are changes
     at or after ``B``: the log carries them.
The chunk's end key (the last key *read*, kept or not) is the next chunk's start, so the key ranges
of a generation tile the table.

Re-reads after a crash give the same records. The chunk position records ``B`` (meta ``log``) and the
key range. A re-read selects the range again at ``T' > T``, pins a new log end ``E' >= E`` after
it, and drops keys changed in ``[B, E')``. A row it keeps did not change since ``B``, so it existed
at ``T`` with the same values and the first read kept it too: the re-read emits a *subset* of the
first read's records, each identical — values, ``ts_ms`` (the signal's commit time, not the read
time) and offset. The offset is a function of the key alone (a 62-bit hash of the primary key, above
``2**62`` so it never meets the log records' offsets of the same table in a batch), so the runtime's
"already sent" check (partition, offset) matches the same record. A record the re-read leaves out
was either sent already, or is of a key whose change since ``E`` a later batch sends (point 3).
Two keys of one chunk colliding in 62 bits would only matter on a re-run (chance about n²/2⁶³).

While the log lags (a batch stopped at ``batch.max.records`` before the log end), no chunk is read:
reconciling would mean reading the backlog twice. Under a sustained backlog the snapshot waits.
A ``stop-snapshot`` signal ends the generation (``done``) at the batch holding it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final, Protocol

from sluice.connectors.cdc import snapshot as snap
from sluice.connectors.cdc.envelope import ChangeRecord, read_table
from sluice.connectors.cdc.signals import EXECUTE, Signal, signals_in
from sluice.connectors.model import PartitionRange
from sluice.connectors.positions import Position

if TYPE_CHECKING:
    import pyarrow as pa

#: On-demand snapshot records' offsets are OFFSET_BASE + a 62-bit hash of the key.
OFFSET_BASE: Final = 1 << 62


def key_text(values: Sequence[Any]) -> str:
    """A key's Spark values as text, equal for a chunk row and a log record of the same key."""
    return json.dumps(list(values), default=str, separators=(",", ":"))


class LogChange(Protocol):
    """What both sources' decoded changes have (connectors.cdc.mysql.changes, .postgres.changes)."""

    @property
    def partition(self) -> str: ...

    @property
    def position(self) -> tuple[int, ...]: ...

    @property
    def record(self) -> ChangeRecord: ...


#: In a ``changed_keys`` set: the table was truncated in the window, so every chunk row is dropped
#: (read before the truncate it is gone; read after, its key was inserted since and is in the log).
#: Not a key text (those are JSON lists).
TRUNCATED: Final = "truncated"


def changed_keys(changes: Iterable[LogChange], table: str, keys: Sequence[str], start: Position) -> set[str]:
    """Key texts of ``table``'s changes at or after ``start``: the keys a chunk must drop."""
    return {
        TRUNCATED if c.record.key is None else key_text([c.record.key[k] for k in keys])
        for c in changes
        if c.partition == table and c.position >= start.key
    }


def signal_inserts(changes: Iterable[LogChange], table: str) -> list[tuple[Mapping[str, Any], int]]:
    """The rows inserted into the signal table ``table``, with their commit times, in log order."""
    return [
        (c.record.value["after"], int(c.record.value["ts_ms"]))
        for c in changes
        if c.partition == table and c.record.value is not None and c.record.value["op"] == "c"
    ]


def offset_of(raw_key: Sequence[Any]) -> int:
    digest = hashlib.blake2b(snap.encode_key(raw_key).encode(), digest_size=8).digest()
    return OFFSET_BASE + (int.from_bytes(digest, "big") >> 2)


def kept(rows: snap.Rows, changed: set[str]) -> snap.Rows:
    """The rows of ``rows`` whose key has no change in ``changed`` (key texts)."""
    if TRUNCATED in changed:
        return rows.taken([])
    keys = zip(*(rows.column(k) for k in rows.keys), strict=True)
    return rows.taken([i for i, key in enumerate(keys) if key_text(list(key)) not in changed])


def opened(position: Position, signal: Signal, table: str) -> Position:
    """Where ``signal`` moves ``table``'s snapshot partition: a new generation (filtered by the
    signal's condition for the table), or (stop) its end. The newest backfill request applied
    (meta ``req``) is carried over, so a request is applied once whatever signals follow."""
    c = snap.Chunk.of(position)
    if signal.action == EXECUTE:
        return c.reopened(signal.id, signal.ts_ms, signal.request, signal.condition(table)).position()
    if not c.running:
        return position
    return c.stopped_here().position()


class OnDemand:
    """Plans and reads the on-demand generations of one task's snapshot partitions; ``fetch`` is the
    database's chunk query (connectors.cdc.snapshot.Fetch)."""

    def __init__(self, chunk_size: int, fetch: snap.Fetch) -> None:
        self.chunk_size = max(1, chunk_size)
        self.fetch = fetch
        self._cache: dict[tuple[str, Position, Position], snap.Rows] = {}
        self._read: dict[str, snap.Rows] = {}

    def apply(self, positions: Mapping[str, Position], signals: Sequence[Signal]) -> dict[str, Position]:
        """The snapshot positions ``signals`` (in log order) move; only those that moved."""
        out: dict[str, Position] = {}
        for signal in signals:
            for table in signal.tables:
                partition = snap.partition_of(table)
                current = out.get(partition) or positions.get(partition)
                if current is None:
                    continue
                moved = opened(current, signal, table)
                if moved != current:
                    out[partition] = moved
        return out

    def read_chunks(self, positions: Mapping[str, Position]) -> None:
        """Step 1 of planning, *before* the log end is pinned: each running generation's next chunk."""
        self._cache.clear()
        self._read = {}
        for partition, position in positions.items():
            c = snap.Chunk.of(position)
            if c.running:
                table = snap.table_of(partition)
                self._read[partition] = self.fetch(table, c.after, None, self.chunk_size, c.condition)

    def finish(
        self,
        positions: Mapping[str, Position],
        changed: Callable[[str], set[str]],
        log_start: Callable[[str], str],
        complete: bool,
    ) -> dict[str, Position]:
        """Step 2, after the log was read: the chunks' ends, their rows reconciled with ``changed``
        (key texts of the table's changes in the batch's log range, from ``log_start``). Nothing
        when the log read stopped short of the pinned end (``complete`` False)."""
        out: dict[str, Position] = {}
        read, self._read = self._read, {}
        if not complete:
            return out
        for partition, rows in read.items():
            start = positions[partition]
            c = snap.Chunk.of(start)
            table = snap.table_of(partition)
            last = rows.row_keys[-1] if rows.row_keys else c.after
            done = len(rows) < self.chunk_size
            end = replace(
                c,
                index=c.index + 1,
                after=last,
                done=done,
                log=log_start(table),
                rows=c.rows + len(rows),
            ).position()
            self._cache[(partition, start, end)] = kept(rows, changed(table))
            out[partition] = end
        return out

    def moves(
        self,
        current: Mapping[str, Position],
        changes: Sequence[LogChange],
        starts: Mapping[str, Position],
        keys: Mapping[str, Sequence[str]],
        signal_table: str,
        where: str,
        complete: bool,
    ) -> dict[str, Position]:
        """Snapshot positions a batch moves: the chunks (``read_chunks``) reconciled with its log
        ``changes`` (each table's from ``starts``), and the generations its signals open or stop (a
        new generation replaces a chunk read for the old)."""
        found = signals_in(signal_inserts(changes, signal_table), list(keys), where)
        ends = self.finish(
            current,
            lambda t: changed_keys(changes, t, keys[t], starts[t]),
            lambda t: ":".join(map(str, starts[t].key)),
            complete,
        )
        return {**ends, **self.apply(current, found)}

    def rows(
        self, partition: str, start: Position, end: Position, changed_since: Callable[[str, str], set[str]]
    ) -> snap.Rows | None:
        """The kept rows of a planned chunk (None: a range that read nothing — a generation opened
        or stopped, an empty key range). After a crash: selected again, then reconciled with the log
        from the chunk's ``B`` to a log end pinned after that select (``changed_since``)."""
        cached = self._cache.get((partition, start, end))
        if cached is not None:
            return cached
        first, last = snap.Chunk.of(start), snap.Chunk.of(end)
        if not last.log or last.after is None or first.generation != last.generation:
            return None
        table = snap.table_of(partition)
        rows = self.fetch(table, first.after, last.after, None, last.condition)
        return kept(rows, changed_since(table, last.log))

    def chunk_table(
        self,
        r: PartitionRange,
        changed_since: Callable[[str, str], set[str]],
        source: Mapping[str, Any],
        source_fields: Sequence[tuple[str, str]],
        topic: str,
    ) -> pa.Table | None:
        """The records of a planned range of a generation (None: it has none)."""
        rows = self.rows(r.partition, r.start, r.end, changed_since)
        if rows is None or not len(rows):
            return None
        return reconciled_table(rows, source, source_fields, topic, r.partition, snap.Chunk.of(r.end).ts)


def snapshot_table(
    r: PartitionRange,
    snapshots: snap.TableSnapshots,
    ondemand: OnDemand | None,
    changed_since: Callable[[str, str], set[str]],
    source: Mapping[str, Any],
    source_fields: Sequence[tuple[str, str]],
    topic: str,
) -> pa.Table | None:
    """The records of a planned snapshot range, for either CDC source: an on-demand generation's
    chunk reconciled with the log (``OnDemand.chunk_table``), or an initial-snapshot chunk."""
    if snap.Chunk.of(r.end).generation:
        assert ondemand is not None, f"{r.partition}: an on-demand chunk without a signal table"
        return ondemand.chunk_table(r, changed_since, source, source_fields, topic)
    rows = snapshots.rows(r.partition, r.start, r.end)
    return snap.chunk_table(rows, source, source_fields, topic, r.partition)


def reconciled_table(
    rows: snap.Rows,
    source: Mapping[str, Any],
    source_fields: Sequence[tuple[str, str]],
    topic: str,
    partition: str,
    ts_ms: int,
) -> pa.Table:
    """The op ``r`` records of a reconciled chunk, offsets from their keys, stamped with the signal's
    commit time, on the table's partition (its queue: see
    connectors.cdc.snapshot.chunk_table)."""
    return read_table(
        rows.values,
        columns=rows.columns,
        key_columns=rows.keys,
        source={**source, "ts_ms": ts_ms, "snapshot": "incremental"},
        ts_ms=ts_ms,
        offsets=[offset_of(raw) for raw in rows.row_keys],
        timestamp_us=ts_ms * 1000,
        source_fields=source_fields,
        topic=topic,
        partition=snap.table_of(partition),
    )
