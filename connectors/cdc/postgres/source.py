"""postgres-cdc: every INSERT, UPDATE and DELETE of PostgreSQL tables, from a logical replication
slot decoded with the built-in ``pgoutput`` plugin, as Debezium change events.

One task (a slot has one reader); one partition per captured table (``schema.table``), each routed
to its topic ``<topic.prefix>.<schema>.<table>`` (connectors.cdc.topics). Positions are
``(end_lsn, seq)`` (connectors.cdc.postgres.changes); every table's range in a batch ends at the
same transaction boundary, so the whole batch is one stretch of the WAL.

Exactly once into RocketMQ, per batch:
  1. Planning (``latest_positions``) first advances the slot to what the store has committed
     (catching up an advance a crash skipped), then peeks up to the flushed WAL and at most
     ``batch.max.records`` rows (whole transactions): the batch ends after the last commit seen, at
     ``E``; every table's latest position is ``(E + 1, 0)``.
  2. ``read`` returns the changes in ``[start, end)``: from that peek, or after a crash by peeking
     again up to ``E`` — the slot has not moved past ``start``, so the same changes come back.
  3. After the runtime committed the positions, ``committed(plan)`` advances the slot to ``E``
     (:class:`connectors.api.CommitListener`); PostgreSQL may then recycle that WAL.
The slot's confirmed position is flushed only at checkpoints and may step back after a server
crash: the committed position is the truth, and changes below it are filtered out. A slot that
vanished while positions are committed is data loss (``data.loss``), named with slot and position.
``snapshot.mode=initial`` reads the existing rows first, after the slot exists and while the log is
held at the slot's start (connectors.cdc.snapshot); ``initial_only`` reads them without a slot.
``signal.data.collection``: signals re-snapshot tables while streaming (connectors.cdc.ondemand).
``skipped.operations`` (connectors.cdc.operations) filters what ``read`` emits, nothing else.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from connectors.api import SourceConnector, SourceTask
from connectors.cdc import ondemand as od
from connectors.cdc import operations, signals
from connectors.cdc import snapshot as snap
from connectors.cdc.envelope import record_frame, union_frames
from connectors.cdc.postgres import slot as sql
from connectors.cdc.postgres import snapshot as pgsnap
from connectors.cdc.postgres.changes import (
    SOURCE_FIELDS,
    Change,
    ChangeDecoder,
    snapshot_source,
    with_offsets,
)
from connectors.cdc.postgres.checks import params, start_problems
from connectors.cdc.postgres.config import (
    FIELDS,
    select_tables,
    table_problems,
)
from connectors.cdc.topics import debezium_topic
from connectors.config import ConfigDef, ConfigError, FieldError
from connectors.model import BatchPlan, DataLossPolicy, PartitionRange
from connectors.positions import Position

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
#: WAL bytes an idle capture's slot may lag behind the server before an empty batch moves it.
KEEPALIVE_LAG = 1 << 20


def _names(config: Mapping[str, Any], connector: str) -> tuple[str, str]:
    slot = str(config.get("slot.name") or "") or sql.default_name(connector)
    return slot, str(config.get("publication.name") or "") or slot


def _done(position: Position) -> int | None:
    """The LSN the slot may move to once ``position`` is committed: ``(E + 1, 0)`` -> ``E``."""
    lsn, seq = position.key
    return int(lsn) - 1 if seq == 0 and int(lsn) > 0 else None


class PostgresCdcTask(SourceTask):
    """Reads the slot's changes of its tables; see the module docstring."""

    position_unit: ClassVar[str] = "records"

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        super().__init__(config, task_id)
        self.where = f"connector {self.name!r}"
        self.params = params(config)
        self.slot, self.publication = _names(config, self.name)
        self.prefix = str(config["topic.prefix"])
        self.max_records = int(config.get("batch.max.records") or 10_000)
        self._conn: Any = None
        self._keys: dict[str, tuple[str, ...]] | None = None
        self._known: dict[str, Position] = {}
        self._cache: tuple[int, list[Change]] | None = None  # (E, changes up to E)
        self._idle_upto: int | None = None  # the flushed LSN of the last poll that found nothing
        self.mode = snap.snapshot_mode(config)
        self._snapshots: snap.TableSnapshots | None = None
        self.signal_table = signals.signal_table(config)
        self._signal_keys: dict[str, tuple[str, ...]] = {}
        self._ondemand: od.OnDemand | None = None
        self._behind = False  # the last peek stopped at batch.max.records (more may follow)

    # ---- connection, tables, slot ----------------------------------------------------------------
    def _db(self) -> Any:
        if self._conn is None:
            self._conn = sql.connect(self.params, self.where)
        return self._conn

    def _guarded(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(self._db(), *args)
        except (sql.SlotMissing, LookupError):
            raise
        except Exception:
            self.close()  # a broken connection is rebuilt by the next call
            raise

    def _tables(self) -> dict[str, tuple[str, ...]]:
        """Captured tables and their primary keys, resolved once per task (tables created later
        are picked up when the task restarts); the publication is made to match."""
        if self._keys is None:
            facts = {t.name: t for t in self._guarded(sql.list_tables)}
            selected = [t for t in select_tables(self.config, list(facts)) if t != self.signal_table]
            problems = table_problems(
                self.where,
                selected,
                {t: facts[t].primary_key for t in selected},
                {t: facts[t].replica_identity for t in selected},
            )
            signal = facts.get(self.signal_table)
            if self.signal_table and (signal is None or not signal.primary_key):
                problems.append(
                    signals.unusable(self.where, self.signal_table, "it is gone or has no primary key")
                )
            if problems:
                raise ConfigError(problems)
            mode = str(self.config.get("publication.autocreate.mode") or "all_tables")
            published = selected + ([self.signal_table] if self.signal_table else [])
            self._guarded(sql.ensure_publication, self.publication, mode, published)
            self._keys = {t: facts[t].primary_key for t in selected}
            if signal is not None:
                self._signal_keys = {self.signal_table: signal.primary_key}
        return self._keys

    def _stream(self) -> list[str]:
        """The log's partitions (one per table; none under ``snapshot.mode=initial_only``)."""
        return [] if self.mode == "initial_only" else list(self._tables())

    def _snap(self) -> snap.TableSnapshots:
        if self._snapshots is None:
            keys = self._tables()
            tables = [] if self.mode == "never" else list(keys)
            size = int(self.config.get("snapshot.chunk.size") or snap.CHUNK_SIZE)
            fetch: snap.Fetch = lambda t, after, upto, limit: self._guarded(  # noqa: E731
                pgsnap.read_chunk, t, keys[t], after, upto, limit, self.where
            )
            idle = list(keys) if self.signal_table and self._stream() else []
            self._snapshots = snap.TableSnapshots(tables, size, fetch, idle)
            self._ondemand = od.OnDemand(size, fetch) if idle else None
        return self._snapshots

    def partitions(self) -> list[str]:
        return self._stream() + self._snap().partitions()

    def _slot_lost(self, committed: Mapping[str, Position]) -> None:
        error = sql.slot_lost(self.where, self.slot, str(min(committed.values())))
        if DataLossPolicy(self.config.get("data.loss", "fail")) is DataLossPolicy.FAIL:
            raise error
        log.warning("%s; data.loss=skip: creating the slot again", error)

    def _slot(self, committed: Mapping[str, Position]) -> sql.SlotInfo:
        info = self._guarded(sql.slot_info, self.slot)
        if info is None:
            if committed:
                self._slot_lost(committed)
            self._guarded(sql.create_slot, self.slot)
            info = self._guarded(sql.slot_info, self.slot)
        if info.plugin != sql.PLUGIN or info.database != self.params.dbname:
            raise ConfigError(
                [
                    FieldError(
                        "slot.name",
                        f"{self.where}: replication slot {self.slot!r} belongs to plugin {info.plugin!r} "
                        f"on database {info.database!r}; it needs pgoutput on {self.params.dbname!r} "
                        "(choose another slot.name)",
                    )
                ]
            )
        return info

    # ---- positions -------------------------------------------------------------------------------
    def earliest_positions(self) -> dict[str, Position]:
        """Where the slot is: ``(confirmed + 1, 0)``; nothing before the slot exists."""
        out = {p: self._snap().first(p, "") for p in self._snap().partitions()}
        if not self._stream():
            return out
        info = self._guarded(sql.slot_info, self.slot)
        if info is None:
            return out  # latest_positions creates it (or names the data loss)
        return {**out, **{p: Position((info.confirmed_flush + 1, 0)) for p in self._stream()}}

    def _advance(self, positions: Mapping[str, Position]) -> None:
        if not positions:
            return
        target = _done(min(positions.values()))
        if target is not None:
            self._guarded(sql.advance, self.slot, target)

    def latest_positions(self, committed: Mapping[str, Position]) -> dict[str, Position]:
        """The snapshot's next chunks while it runs (the log held at its start), then the log's next
        batch; the slot exists before any chunk is read (connectors.cdc.snapshot says why)."""
        shots = {p: committed[p] for p in self._snap().partitions() if p in committed}
        if not self._stream():
            return self._snap().latest(shots, "")
        mine = {p: committed[p] for p in self._stream() if p in committed}
        self._known = dict(mine)
        info = self._slot(mine or shots)
        if not snap.finished(self._snap().tables, shots):
            earliest = Position((info.confirmed_flush + 1, 0))
            held = {p: max(mine.get(p, earliest), earliest) for p in self._stream()}
            return {**self._snap().latest(shots, ""), **held}
        current = self._snap().current(shots, "")
        if self._ondemand is not None and not self._behind:
            self._ondemand.read_chunks(current)  # before the log end is pinned (connectors.cdc.ondemand)
        return {**current, **self._log_positions(mine, mine or shots, current)}

    def _log_positions(
        self, mine: dict[str, Position], guard: dict[str, Position], current: dict[str, Position]
    ) -> dict[str, Position]:
        """The log's next batch; ``guard``: committed positions a missing slot would lose; the
        on-demand snapshot positions it moves (``current``: every snapshot partition's)."""
        try:
            self._advance(mine)
            info = self._slot(guard)
            earliest = Position((info.confirmed_flush + 1, 0))
            upto = self._guarded(sql.flush_lsn)
            rows = self._guarded(sql.peek, self.slot, self.publication, upto, self.max_records)
        except sql.SlotMissing:
            self._slot_lost(mine or {p: Position((0, 0)) for p in self._stream()})
            return {}
        changes, end = self._decode(rows)
        self._behind = len(rows) >= self.max_records
        if end is not None:
            self._cache, self._idle_upto = (end, changes), None
        else:
            end = self._keepalive(info.confirmed_flush, upto)
        out = {}
        for p in self._stream():
            base = max(mine.get(p, earliest), earliest)
            out[p] = max(base, Position((end + 1, 0))) if end is not None else base
        if self._ondemand is not None:
            starts = {p: max(mine.get(p, earliest), earliest) for p in self._stream()}
            moved = self._ondemand.moves(
                current, changes, starts, self._tables(), self.signal_table, self.where, not self._behind
            )
            out.update(moved)
        return out

    def _changed_since(self, table: str, log: str) -> set[str]:
        """A re-read's reconciliation: ``table``'s changes from ``log`` (the slot is not past it)."""
        start = Position(tuple(int(p) for p in log.split(":")))
        upto = self._guarded(sql.flush_lsn)
        rows = self._guarded(sql.peek, self.slot, self.publication, upto, None)
        return od.changed_keys(self._decode(rows)[0], table, self._tables()[table], start)

    def _keepalive(self, confirmed: int, upto: int) -> int | None:
        """An end for a batch without records when this database is idle but the server is not.

        WAL is shared by every database of a server: while the captured tables do not change, no
        commit of ours moves the slot, and it holds back (and every peek re-decodes) all the WAL the
        other databases write. When two polls in a row found nothing, no transaction of ours
        committed before the first poll's flushed LSN (any commit started before it is flushed by
        the second), so an empty batch may end there; committing it moves the slot like any other.
        Only once the slot lags by KEEPALIVE_LAG bytes, so an idle server makes no batches.
        """
        previous, self._idle_upto = self._idle_upto, upto
        if previous is None or previous - confirmed < KEEPALIVE_LAG:
            return None
        self._cache = (previous, [])
        return previous

    def backlog(self, partition: str, start: Position, latest: Position) -> int | None:
        return None  # counted by the bounded peek in latest_positions

    def batch_end(self, partition: str, start: Position, latest: Position, budget: int | None) -> Position:
        """Always ``latest``: the batch limit was applied by the peek, and every table must end at the
        same transaction boundary for the slot to advance past it."""
        return latest

    def committed(self, plan: BatchPlan) -> None:
        """After the runtime committed ``plan``: let the slot go of what every table has committed."""
        ranges = [r for r in plan.ranges if not snap.is_snapshot(r.partition)]
        if not self._known and not ranges:
            return
        known = {**self._known, **{r.partition: r.end for r in ranges}}
        self._known = known
        if self._stream() and set(self._stream()) <= set(known):
            self._advance(known)

    # ---- reading ---------------------------------------------------------------------------------
    def _decode(self, rows: Sequence[tuple[int, bytes]]) -> tuple[list[Change], int | None]:
        decoder = ChangeDecoder(
            {**self._tables(), **self._signal_keys},
            where=self.where,
            server=self.prefix,
            db=self.params.dbname,
            tombstones=bool(self.config.get("tombstones.on.delete", True)),
        )
        changes: list[Change] = []
        end: int | None = None
        for lsn, data in rows:
            done = decoder.feed(lsn, data)
            if data[:1] == b"C":
                end = decoder.last_end_lsn
            changes.extend(done)
        return changes, end

    def _changes_upto(self, end: int, start: Position) -> list[Change]:
        if self._cache is not None and self._cache[0] == end:
            return self._cache[1]
        try:
            rows = self._guarded(sql.peek, self.slot, self.publication, end, None)
        except sql.SlotMissing:
            self._slot_lost({"": start})
            return []
        changes = [c for c in self._decode(rows)[0] if c.position[0] <= end]
        self._cache = (end, changes)
        return changes

    def _emitted(self, r: PartitionRange) -> list[Change]:
        """The changes of a log range ``read`` makes records of."""
        end, skip = int(r.end.key[0]) - 1, operations.skipped(self.config)
        return [
            c
            for c in self._changes_upto(end, r.start)
            if c.partition == r.partition
            and r.start.key <= c.position < r.end.key
            and operations.emitted(c.record, skip)
        ]

    def holds_records(self, r: PartitionRange) -> bool:
        """KnowsEmptyRanges: a log range holds records only when its table changed in it (a
        snapshot chunk is read to find out)."""
        return not r.is_empty and (snap.is_snapshot(r.partition) or bool(self._emitted(r)))

    def read(self, spark: SparkSession, ranges: Sequence[PartitionRange]) -> DataFrame:
        """Records of ``ranges`` (the runtime reads one table per call: ``topic_of``)."""
        frames = []
        for r in ranges:
            if r.is_empty:
                continue
            if snap.is_snapshot(r.partition):
                shot = self._snapshot_frame(spark, r)
                if shot is not None:
                    frames.append(shot)
                continue
            wanted = self._emitted(r)
            if not wanted:
                continue
            wanted = with_offsets(wanted, int(r.start.key[0]))
            shape = wanted[-1].shape
            frames.append(
                record_frame(
                    spark,
                    [c.record for c in wanted],
                    columns=shape.columns,
                    key_columns=shape.keys,
                    source_fields=SOURCE_FIELDS,
                    topic=self.topic_of(r.partition),
                    partition=r.partition,
                )
            )
        return union_frames(spark, frames)

    def _snapshot_frame(self, spark: SparkSession, r: PartitionRange) -> DataFrame | None:
        schema, _, table = snap.table_of(r.partition).partition(".")
        source = snapshot_source(self.prefix, self.params.dbname, schema, table)
        snapshots = self._snap()  # first: a re-run reads before any planning made the on-demand reader
        topic = self.topic_of(r.partition)
        ondemand, changed = self._ondemand, self._changed_since
        return od.snapshot_frame(spark, r, snapshots, ondemand, changed, source, SOURCE_FIELDS, topic)

    def topic_of(self, partition: str) -> str:
        return debezium_topic(self.prefix, *snap.table_of(partition).split(".", 1))

    def topics(self) -> list[str]:
        return sorted({self.topic_of(p) for p in self.partitions()})

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None


class PostgresCdcConnector(SourceConnector):
    """Debezium's PostgreSQL connector keys (connectors.cdc.postgres.config); one task. ``start``
    checks the server and the tables up front (wal_level, REPLICATION privilege, tables that exist
    and have primary keys, topic names)."""

    plugin_name = "postgres-cdc"
    task_class = PostgresCdcTask
    config_def = ConfigDef(FIELDS)

    def start(self, config: Mapping[str, Any]) -> None:
        errors = start_problems(config, str(config.get("name") or self.plugin_name))
        if errors:
            raise ConfigError(errors)

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        return [dict(config)]  # one replication slot, one reader
