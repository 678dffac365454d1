"""mysql-cdc: every INSERT, UPDATE and DELETE of MySQL/MariaDB tables, from the binary log read
over the replication protocol, as Debezium change events.

One task (the binlog is one stream); one partition per captured table (``db.table``), each routed
to its topic ``<topic.prefix>.<db>.<table>`` (connectors.cdc.topics). Positions are
``(file index, position, seq)`` (connectors.cdc.mysql.changes); every table's range in a batch ends
at the same commit point, so the whole batch is one stretch of the binlog. With GTIDs a position
also carries the GTID set reached, which finds it again on another server (connectors.cdc.mysql.failover).
What both CDC sources share (partitions, topics, snapshots, signals, ``read``) is
connectors.cdc.log_source; this module is the binlog's part: reading it, its positions, and where
capture starts.

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

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from sluice.connectors.cdc import ondemand as od
from sluice.connectors.cdc import signals
from sluice.connectors.cdc import snapshot as snap
from sluice.connectors.cdc.log_source import Keys, LogBatch, LogCdcConnector, LogCdcTask
from sluice.connectors.cdc.mysql import binlog as sql
from sluice.connectors.cdc.mysql import snapshot as mysnap
from sluice.connectors.cdc.mysql.changes import (
    SOURCE_FIELDS,
    Change,
    RowDecoder,
    file_index,
    file_name,
    scan,
    snapshot_source,
    with_offsets,
)
from sluice.connectors.cdc.mysql.checks import params, start_problems
from sluice.connectors.cdc.mysql.config import (
    FIELDS,
    select_tables,
    server_id,
    table_problems,
)
from sluice.connectors.cdc.mysql.failover import GTIDS, Gtids, Server
from sluice.connectors.cdc.mysql.gtid import GtidSet
from sluice.connectors.cdc.mysql.truncate import TruncateDecoder, decoding
from sluice.connectors.cdc.read_ahead import ReadAhead
from sluice.connectors.config import ConfigDef, ConfigError, FieldError
from sluice.connectors.data_loss import DataLossError
from sluice.connectors.jdbc.urls import Dialect
from sluice.connectors.model import DataLossPolicy, PartitionRange
from sluice.connectors.positions import Position

log = logging.getLogger(__name__)
FIRST_EVENT = 4  # a binlog file's first event follows its 4-byte magic number
#: How often a busy task's read ahead reads on as the binlog grows (connectors.cdc.read_ahead): the
#: next planning then reads inline only the last fifth of a second of changes.
FOLLOW_S = 0.2


@dataclass(frozen=True)
class Ahead:
    """A read ahead: its changes, where it ended, and the server it read (a failover in between
    makes it another server's positions, so it is not taken)."""

    changes: list[Change]
    end: Position
    server: Server


def _point(position: Position) -> tuple[int, int]:
    return int(position.key[0]), int(position.key[1])


class MySqlCdcTask(LogCdcTask[Change]):
    """Reads the binlog's changes of its tables; see the module docstring."""

    source_fields: ClassVar[Sequence[tuple[str, str]]] = SOURCE_FIELDS
    dialect: ClassVar[Dialect] = Dialect.MYSQL

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        super().__init__(config, task_id)
        self.params = params(config)
        self.replica_id = server_id(config, self.name)
        self._committed: dict[str, Position] = {}
        self._origin: Position | None = None
        self._base = ""
        self._listed: list[str] = []  # the binlog files the current planning saw
        self._cache: tuple[Position, Position, list[Change], bool] | None = None  # (from, to, _, foreign)
        skip = DataLossPolicy(config.get("data.loss", "fail")) is DataLossPolicy.SKIP
        sources = (config.get("gtid.source.includes") or [], config.get("gtid.source.excludes") or [])
        self._gtids = Gtids(self._guarded, self.where, skip, *sources)
        #: the binlog after the last planned batch, read while that batch runs (connectors.cdc.read_ahead)
        self.ahead: ReadAhead[Position, Ahead] | None = ReadAhead(self.where, FOLLOW_S)
        self._reader: MySqlCdcTask | None = None  # the read-ahead's own task: its own connections

    # ---- connection and tables -------------------------------------------------------------------
    def _connect(self) -> Any:
        return sql.connect(self.params, self.where)

    def read_chunk(self, conn: Any, query: snap.ChunkQuery) -> snap.Rows:
        """``mysnap.read_chunk``: the columns over ``conn``, the rows over a compiled reader."""
        return mysnap.read_chunk(conn, self.params.reads(), query, self.where)

    def _captured_tables(self) -> tuple[Keys, Keys]:
        keys = self._guarded(sql.list_tables)
        selected = [t for t in select_tables(self.config, list(keys)) if t != self.signal_table]
        problems = table_problems(self.where, selected, keys)
        if self.signal_table and not keys.get(self.signal_table):
            problems.append(signals.unusable(self.where, self.signal_table, "it has no primary key"))
        if problems:
            raise ConfigError(problems)
        signal = {self.signal_table: keys[self.signal_table]} if self.signal_table else {}
        return {t: keys[t] for t in selected}, signal

    def _snapshot_source(self, table: str) -> Mapping[str, Any]:
        db, _, name = table.partition(".")
        return snapshot_source(self.prefix, db, name)

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

    def _log_earliest(self) -> dict[str, Position]:
        """The oldest retained binlog event for tables with committed positions (a position below it
        was purged: data loss); for new tables, where this task started capturing."""
        first = Position((file_index(self._logs()[0]), FIRST_EVENT, 0))
        if self._origin is None:
            self._origin = self._stamp(self._end())
        return {p: first if p in self._committed else self._origin for p in self._stream()}

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

    def _held(self, mine: Mapping[str, Position], shots: Mapping[str, Position]) -> dict[str, Position]:
        """Committed positions, else capture's start (the binlog end at the first planning, or the
        snapshot's ``origin``); the binlog files are listed for this planning first."""
        self._listed = self._logs()
        self._origin_text()
        assert self._origin is not None
        return {p: mine.get(p, self._origin) for p in self._stream()}

    def _log_batch(
        self, mine: Mapping[str, Position], held: Mapping[str, Position], shots: Mapping[str, Position]
    ) -> LogBatch:
        """From the lowest start (a purged one is data loss) to the binlog end pinned now, stopping
        after the commit that reaches ``batch.max.records``; every table ends at that commit."""
        logs = self._listed
        first = Position((file_index(logs[0]), FIRST_EVENT, 0))
        begin = min(held.values())
        if self._purged(begin, logs):
            begin = max(begin, first)
        begin = self._gtids.stamp(begin, self._base, logs)
        # taken (its following stopped) before the end is pinned: it never reads past ``stop``
        ahead = self.ahead.take(begin) if self.ahead is not None else None
        stop = self._end()
        changes, end = self._read_batch(begin, stop, ahead)
        self._behind = end < stop
        self._cache = (begin, end, changes, False)
        self._read_ahead(end, follow=bool(changes))
        return LogBatch({p: max(start, end) for p, start in held.items()}, changes, dict(held))

    def _read_batch(
        self, begin: Position, stop: Position, ahead: Ahead | None
    ) -> tuple[list[Change], Position]:
        """The batch from ``begin`` towards ``stop``: what was read ahead from ``begin`` (on this
        server), continued to ``stop`` when it ended short of the record limit; else read now.
        Either way the same changes: reads start and end at commit points, and a read continued
        from one carries its GTID set on (``_scan``)."""
        if ahead is None or ahead.server != self._gtids.server() or ahead.end > stop:
            return self._scan(begin, stop, self.max_records)
        changes, end = ahead.changes, ahead.end
        if len(changes) >= self.max_records or end >= stop:
            return changes, end
        more, end = self._scan(end, stop, self.max_records - len(changes))
        return changes + more, end

    def _read_ahead(self, begin: Position, follow: bool) -> None:
        """Start reading the binlog from ``begin`` (the batch just planned ends there) to its end
        now, and on as it grows when ``follow``, on the read-ahead's own task (its own connections:
        nothing is shared across threads)."""
        if self.ahead is None:
            return
        if self._reader is None:
            self._reader = type(self)(self.config, self.task_id)
            self._reader.ahead = None  # it reads for this task only
        reader, limit = self._reader, self.max_records

        def read(before: Ahead | None) -> Ahead:
            """From ``begin`` to the log's end now, or on from where ``before`` ended (the
            ReadAhead follows the log until the next planning takes what it read)."""
            if before is None:
                changes, end = reader._scan(begin, reader._end(), limit)
                return Ahead(changes, end, reader._gtids.server())
            room = None if limit is None else limit - len(before.changes)
            if (room is not None and room <= 0) or before.server != reader._gtids.server():
                return before
            more, end = reader._scan(before.end, reader._end(), room)
            return Ahead(before.changes + more, end, before.server) if more or end != before.end else before

        self.ahead.start(begin, read, follow)

    def _changed_since(self, table: str, log: str) -> set[str]:
        """From ``log`` to the binlog end now."""
        if not self._base:
            self._logs()
        start = Position(tuple(int(p) for p in log.split(":")))
        changes, _ = self._scan(start, self._end(), None)
        return od.changed_keys(changes, table, self._tables()[table], start)

    # ---- reading ---------------------------------------------------------------------------------
    def _scan(
        self, begin: Position, stop: Position, max_records: int | None, upto: GtidSet | None = None
    ) -> tuple[list[Change], Position]:
        if begin >= stop:
            return [], begin
        if self.ahead is not None:
            self.ahead.wait()  # one binlog reader per replica id: the server drops an older one
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
        """The changes of a log range in binlog order: what ``read`` makes its table of."""
        changes = self._changes(r.start, r.end)
        foreign = self._cache is not None and self._cache[3]  # re-read elsewhere: other positions
        inside = [c for c in changes if foreign or r.start.key <= c.position < r.end.key]
        return [c for c in inside if c.partition == r.partition]

    def _with_offsets(self, changes: list[Change], r: PartitionRange) -> list[Change]:
        """Their order within the range (connectors.cdc.mysql.changes.with_offsets)."""
        return with_offsets(changes)

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.wait()
        if self._reader is not None:
            self._reader.close()
        self._gtids.forget_server()
        super().close()


class MySqlCdcConnector(LogCdcConnector):
    """Debezium's MySQL connector keys (connectors.cdc.mysql.config); one task. ``start`` checks the
    server and the tables up front (binary log on in ROW format with full row images, replication
    privileges, a replica id that is not the server's, tables that exist and have primary keys,
    topic names)."""

    plugin_name = "mysql-cdc"
    task_class = MySqlCdcTask
    config_def = ConfigDef(FIELDS)

    def server_problems(self, config: Mapping[str, Any], name: str) -> list[FieldError]:
        return start_problems(config, name)
