"""mysql-cdc: every INSERT, UPDATE and DELETE of MySQL/MariaDB tables, from the binary log read
over the replication protocol, as Debezium change events.

One task (the binlog is one stream); one partition per captured table (``db.table``), each routed
to its topic ``<topic.prefix>.<db>.<table>`` (connectors.cdc.topics). Positions are
``(file index, position, seq)`` (connectors.cdc.mysql.changes); every table's range in a batch ends
at the same commit point, so the whole batch is one stretch of the binlog. With GTIDs a position
also carries the GTID set reached, which finds it again on another server (connectors.cdc.mysql.failover).

Exactly once into RocketMQ, per batch:
  1. Planning (``latest_positions``) pins the server's binlog end (``SHOW MASTER STATUS``) and reads
     from the committed start towards it, whole transactions only, stopping after the commit that
     brings the batch to ``batch.max.records``: the batch ends at that commit point ``E``; every
     table's latest position is ``E``.
  2. ``read`` returns the records in ``[start, end)``: from that planning read, or after a crash by
     reading the binlog again from ``start`` up to ``end`` — the same events, so the same records.
Nothing on the server must be released after a commit (the server keeps binlog files by age, not
for a reader), so there is no CommitListener here; a committed position whose file the server has
purged is data loss (``data.loss``), named with file and position.

Where capture starts: a table without a committed position starts at the binlog end the task saw
at its first planning ("from the connector's start on", as Debezium). Under ``snapshot.mode=initial``
that start is kept in the snapshot partitions' positions (meta ``origin``, ``file:position``) so
a restarted task resumes the log exactly there after the snapshot (connectors.cdc.snapshot).
With ``signal.data.collection``, signal rows in the binlog re-snapshot tables while streaming goes
on (connectors.cdc.signals, connectors.cdc.ondemand).
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
from connectors.cdc.mysql import binlog as sql
from connectors.cdc.mysql import snapshot as mysnap
from connectors.cdc.mysql.changes import (
    SOURCE_FIELDS,
    Change,
    RowDecoder,
    file_index,
    file_name,
    scan,
    snapshot_source,
    with_offsets,
)
from connectors.cdc.mysql.checks import params, start_problems
from connectors.cdc.mysql.config import (
    FIELDS,
    select_tables,
    server_id,
    table_problems,
)
from connectors.cdc.mysql.failover import GTIDS, Gtids
from connectors.cdc.mysql.gtid import GtidSet
from connectors.cdc.mysql.truncate import TruncateDecoder, decoding
from connectors.cdc.topics import debezium_topic
from connectors.config import ConfigDef, ConfigError
from connectors.data_loss import DataLossError
from connectors.model import DataLossPolicy, PartitionRange
from connectors.positions import Position

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
FIRST_EVENT = 4  # a binlog file's first event follows its 4-byte magic number


def _point(position: Position) -> tuple[int, int]:
    return int(position.key[0]), int(position.key[1])


class MySqlCdcTask(SourceTask):
    """Reads the binlog's changes of its tables; see the module docstring."""

    position_unit: ClassVar[str] = "records"

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        super().__init__(config, task_id)
        self.where = f"connector {self.name!r}"
        self.params = params(config)
        self.replica_id = server_id(config, self.name)
        self.prefix = str(config["topic.prefix"])
        self.max_records = int(config.get("batch.max.records") or 10_000)
        self._conn: Any = None
        self._keys: dict[str, tuple[str, ...]] | None = None
        self._committed: dict[str, Position] = {}
        self._origin: Position | None = None
        self._base = ""
        self._cache: tuple[Position, Position, list[Change], bool] | None = None  # (from, to, _, foreign)
        self.mode = snap.snapshot_mode(config)
        self._snapshots: snap.TableSnapshots | None = None
        self.signal_table = signals.signal_table(config)
        self._signal_keys: dict[str, tuple[str, ...]] = {}
        self._ondemand: od.OnDemand | None = None
        self._behind = False  # the last log read stopped at batch.max.records before the log end
        skip = DataLossPolicy(config.get("data.loss", "fail")) is DataLossPolicy.SKIP
        sources = (config.get("gtid.source.includes") or [], config.get("gtid.source.excludes") or [])
        self._gtids = Gtids(self._guarded, self.where, skip, *sources)

    # ---- connection and tables -------------------------------------------------------------------
    def _db(self) -> Any:
        if self._conn is None:
            self._conn = sql.connect(self.params, self.where)
        return self._conn

    def _guarded(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(self._db(), *args)
        except Exception:
            self.close()  # a broken connection is rebuilt by the next call
            raise

    def _tables(self) -> dict[str, tuple[str, ...]]:
        """Captured tables and their primary keys, resolved once per task (tables created later
        are picked up when the task restarts)."""
        if self._keys is None:
            keys = self._guarded(sql.list_tables)
            selected = [t for t in select_tables(self.config, list(keys)) if t != self.signal_table]
            problems = table_problems(self.where, selected, keys)
            if self.signal_table and not keys.get(self.signal_table):
                problems.append(signals.unusable(self.where, self.signal_table, "it has no primary key"))
            if problems:
                raise ConfigError(problems)
            self._keys = {t: keys[t] for t in selected}
            if self.signal_table:
                self._signal_keys = {self.signal_table: keys[self.signal_table]}
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
                mysnap.read_chunk, t, keys[t], after, upto, limit, self.where
            )
            idle = list(keys) if self.signal_table and self._stream() else []
            self._snapshots = snap.TableSnapshots(tables, size, fetch, idle)
            self._ondemand = od.OnDemand(size, fetch) if idle else None
        return self._snapshots

    def partitions(self) -> list[str]:
        return self._stream() + self._snap().partitions()

    def _origin_text(self) -> str:
        if not self._stream():
            return ""
        if self._origin is None:
            self._origin = self._stamp(self._end())
        return f"{self._origin.key[0]}:{self._origin.key[1]}"

    def _logs(self) -> list[str]:
        logs = self._guarded(sql.binary_logs)
        if not logs:
            raise LookupError(f"{self.where}: the server lists no binary log files (is log_bin on?)")
        self._base = logs[0].rpartition(".")[0]
        return list(logs)

    def _end(self) -> Position:
        name, pos = self._guarded(sql.binlog_end)
        self._base = name.rpartition(".")[0]
        return Position((file_index(name), pos, 0))

    def _stamp(self, pos: Position) -> Position:
        """``pos`` with the GTID set reached there (connectors.cdc.mysql.failover)."""
        return self._gtids.stamp(pos, self._base, self._logs())

    # ---- positions -------------------------------------------------------------------------------
    def relocate(self, committed: Mapping[str, Position]) -> dict[str, Position]:
        """First at each planning: positions of another server (failover) or a purged file are found
        again by their GTID sets, others get theirs (connectors.cdc.mysql.failover); and
        ``earliest_positions`` learns which tables have committed positions (retention-checked)."""
        moved = dict(committed)
        mine = [p for p in self._stream() if p in committed]
        if mine:
            logs = self._logs()
            for p in mine:
                foreign = self._gtids.foreign(committed[p], self._base, logs)
                moved[p] = self._gtids.relocate(committed[p], logs) if foreign else self._stamp(committed[p])
        self._committed = {p: moved[p] for p in mine}
        origin = snap.origin_of(committed)
        if origin:  # where a snapshot started capture: the log resumes there, in any task
            index, _, pos = origin.partition(":")
            self._origin = self._stamp(Position((int(index), int(pos), 0))) if self._stream() else None
        return moved

    def earliest_positions(self) -> dict[str, Position]:
        """The oldest retained binlog event for tables with committed positions (a position below it
        was purged: data loss); for new tables, where this task started capturing."""
        shots = {p: self._snap().first(p, self._origin_text()) for p in self._snap().partitions()}
        if not self._stream():
            return shots
        first = Position((file_index(self._logs()[0]), FIRST_EVENT, 0))
        if self._origin is None:
            self._origin = self._stamp(self._end())
        return {**shots, **{p: first if p in self._committed else self._origin for p in self._stream()}}

    def _purged(self, start: Position, logs: Sequence[str]) -> bool:
        name = file_name(self._base, int(start.key[0]))
        if name in logs:
            return False
        error = DataLossError(
            f"{self.where} binary log",
            f"changes from position {start} (file {name!r} position {start.key[1]})",
            f"are gone: the server purged that file (its oldest binlog file is {logs[0]!r}); keep binlog "
            "files longer (binlog_expire_logs_seconds / expire_logs_days) than a connector may be stopped",
        )
        if DataLossPolicy(self.config.get("data.loss", "fail")) is DataLossPolicy.FAIL:
            raise error
        log.warning("%s; data.loss=skip: continuing at the oldest binlog file", error)
        return True

    def latest_positions(self, committed: Mapping[str, Position]) -> dict[str, Position]:
        """The snapshot's next chunks while it runs (the log held at its start, fixed before any
        chunk is read: connectors.cdc.snapshot says why), then the log's next batch."""
        shots = {p: committed[p] for p in self._snap().partitions() if p in committed}
        if not self._stream():
            return self._snap().latest(shots, "")
        mine = {p: committed[p] for p in self._stream() if p in committed}
        logs = self._logs()
        first = Position((file_index(logs[0]), FIRST_EVENT, 0))
        origin = self._origin_text()
        assert self._origin is not None
        starts = {p: mine.get(p, self._origin) for p in self._stream()}
        if not snap.finished(self._snap().tables, shots):
            return {**self._snap().latest(shots, origin), **starts}
        if not starts:
            return shots
        begin = min(starts.values())
        if self._purged(begin, logs):
            begin = max(begin, first)
        begin = self._gtids.stamp(begin, self._base, logs)
        current = self._snap().current(shots, origin)
        if self._ondemand is not None and not self._behind:
            self._ondemand.read_chunks(current)  # before the log end is pinned (connectors.cdc.ondemand)
        stop = self._end()
        changes, end = self._scan(begin, stop, self.max_records)
        self._behind = end < stop
        self._cache = (begin, end, changes, False)
        out = {**current, **{p: max(start, end) for p, start in starts.items()}}
        if self._ondemand is not None:
            moved = self._ondemand.moves(
                current, changes, starts, self._tables(), self.signal_table, self.where, not self._behind
            )
            out.update(moved)
        return out

    def _changed_since(self, table: str, log: str) -> set[str]:
        """A re-read's reconciliation: ``table``'s changes from ``log`` to the log end now."""
        if not self._base:
            self._logs()
        start = Position(tuple(int(p) for p in log.split(":")))
        changes, _ = self._scan(start, self._end(), None)
        return od.changed_keys(changes, table, self._tables()[table], start)

    def backlog(self, partition: str, start: Position, latest: Position) -> int | None:
        return None  # counted by the bounded read in latest_positions

    def batch_end(self, partition: str, start: Position, latest: Position, budget: int | None) -> Position:
        """Always ``latest``: the batch limit was applied by the planning read, and every table ends
        at the same commit point."""
        return latest

    # ---- reading ---------------------------------------------------------------------------------
    def _scan(
        self, begin: Position, stop: Position, max_records: int | None, upto: GtidSet | None = None
    ) -> tuple[list[Change], Position]:
        if begin >= stop:
            return [], begin
        decoder = RowDecoder(
            {**self._tables(), **self._signal_keys},
            where=self.where,
            server=self.prefix,
            tombstones=bool(self.config.get("tombstones.on.delete", True)),
            column_names=lambda db, table: self._guarded(sql.column_names, db, table),
        )
        schemas = sorted({p.partition(".")[0] for p in self._stream() + list(self._signal_keys)})
        stream = sql.events(
            self.params, self.replica_id, file_name(self._base, int(begin.key[0])), int(begin.key[1]), schemas
        )
        try:
            truncates = TruncateDecoder(
                self._tables(), lambda t: self._guarded(mysnap.columns, t, self.where), server=self.prefix
            )
            gtids = self._gtids.start_set(begin)
            window = scan(stream, _point(stop), max_records, decoding(decoder.decode, truncates), gtids, upto)
        finally:
            stream.close()
        end = self._gtids.at((*window.end, 0), window.gtids) if window.end is not None else begin
        return window.changes, max(end, begin)

    def _changes(self, start: Position, end: Position) -> list[Change]:
        """The changes of the transactions in ``[start, end)``; a range planned on another server (a
        failover before its batch committed) is re-read by its GTID sets: the same transactions."""
        cached = self._cache
        if cached is not None and cached[0].key <= start.key and cached[1] == end:
            return cached[2]
        logs = self._logs()
        if self._gtids.foreign(start, self._base, logs) and end.get(GTIDS):
            upto = GtidSet.parse(end.get(GTIDS))
            changes, reached = self._scan(self._gtids.relocate(start, logs), self._end(), None, upto)
            if not GtidSet.parse(reached.get(GTIDS)).covers(upto):  # not replicated yet: retried
                raise RuntimeError(f"{self.where}: {self._gtids.server().identity} lacks GTIDs {upto} yet")
            self._cache = (start, end, changes, True)
            return changes
        changes, reached = self._scan(start, end, None)
        if reached.key != end.key:
            raise RuntimeError(
                f"{self.where}: re-reading the binlog from {start} ended at {reached}, not {end}"
            )
        self._cache = (start, end, changes, False)
        return changes

    def changes_of(self, r: PartitionRange) -> list[Change]:
        """The changes of a log range in binlog order: what ``read`` makes its frame of."""
        changes = self._changes(r.start, r.end)
        foreign = self._cache is not None and self._cache[3]  # re-read elsewhere: other positions
        inside = [c for c in changes if foreign or r.start.key <= c.position < r.end.key]
        return [c for c in inside if c.partition == r.partition]

    def _emitted(self, r: PartitionRange) -> list[Change]:
        skipped = operations.skipped(self.config)
        return [c for c in self.changes_of(r) if operations.emitted(c.record, skipped)]

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
            wanted = with_offsets(wanted)
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
        db, _, table = snap.table_of(r.partition).partition(".")
        source = snapshot_source(self.prefix, db, table)
        snapshots = self._snap()  # first: a re-run reads before any planning made the on-demand reader
        topic = self.topic_of(r.partition)
        ondemand, changed = self._ondemand, self._changed_since
        return od.snapshot_frame(spark, r, snapshots, ondemand, changed, source, SOURCE_FIELDS, topic)

    def topic_of(self, partition: str) -> str:
        return debezium_topic(self.prefix, *snap.table_of(partition).split(".", 1))

    def topics(self) -> list[str]:
        return sorted({self.topic_of(p) for p in self.partitions()})

    def close(self) -> None:
        self._gtids.forget_server()
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None


class MySqlCdcConnector(SourceConnector):
    """Debezium's MySQL connector keys (connectors.cdc.mysql.config); one task. ``start`` checks the
    server and the tables up front (binary log on in ROW format with full row images, replication
    privileges, a replica id that is not the server's, tables that exist and have primary keys,
    topic names)."""

    plugin_name = "mysql-cdc"
    task_class = MySqlCdcTask
    config_def = ConfigDef(FIELDS)

    def start(self, config: Mapping[str, Any]) -> None:
        errors = start_problems(config, str(config.get("name") or self.plugin_name))
        if errors:
            raise ConfigError(errors)

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        return [dict(config)]  # one binlog stream, one reader
