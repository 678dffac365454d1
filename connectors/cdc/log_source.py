"""What every log-based change-capture source shares: mysql-cdc (binlog) and postgres-cdc (pgoutput).

Both sources have one shape (connectors.cdc.mysql.source, connectors.cdc.postgres.source): one
task reads one log; each captured table is a log partition routed to its Debezium topic, and has a
snapshot partition (connectors.cdc.snapshot) for the initial snapshot and the on-demand ones that
signals start (connectors.cdc.signals, connectors.cdc.ondemand); every table's range in a batch
ends at the same log point, so the batch limit is applied by the planning read, not by
``batch_end``. That shape — partitions and topics, the snapshot machinery, the order of a
planning (the log held at capture's start while the initial snapshot runs; on-demand chunks read
before the log end is pinned, then reconciled with the log read), ``read``, ``holds_records`` and
``skipped.operations``, connection handling — lives here once, so a fix to it reaches both.

What differs per database stays in its module, behind the template methods below: how the log is
read (binlog events over the replication protocol vs a replication slot's peek), what a position
is and where capture starts (file index and offset with GTID sets, relocated after a failover, vs
LSNs with a slot that is advanced after a commit), the catalog and chunk queries, and config.
"""

from __future__ import annotations

import contextlib
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from sluice.connectors import backfills
from sluice.connectors.api import SendOrder, SourceConnector, SourceTask
from sluice.connectors.backfills import Backfill
from sluice.connectors.cdc import ondemand as od
from sluice.connectors.cdc import operations, signals
from sluice.connectors.cdc import snapshot as snap
from sluice.connectors.cdc.envelope import change_table
from sluice.connectors.cdc.topics import debezium_topic
from sluice.connectors.config import ConfigError, FieldError
from sluice.connectors.jdbc.ddl import quote
from sluice.connectors.jdbc.types import MappedColumn
from sluice.connectors.jdbc.urls import Dialect
from sluice.connectors.model import PartitionRange
from sluice.connectors.positions import Position
from sluice.connectors.source_reads import SourceRead

if TYPE_CHECKING:
    import pyarrow as pa

Keys = dict[str, tuple[str, ...]]  # table -> its primary-key columns


class Shape(Protocol):
    """A table as the log last described it (each source's ``TableShape``)."""

    @property
    def columns(self) -> tuple[MappedColumn, ...]: ...

    @property
    def keys(self) -> tuple[str, ...]: ...


class ShapedChange(od.LogChange, Protocol):
    """A decoded change with the shape its record was built from (each source's ``Change``)."""

    @property
    def shape(self) -> Shape: ...


C = TypeVar("C", bound=ShapedChange)


@dataclass(frozen=True)
class LogBatch:
    """A planning's read of the log: each log partition's end, every change read (signal rows
    too), and where each table's range starts (the on-demand reconciliation's ``B``)."""

    ends: dict[str, Position]
    changes: Sequence[od.LogChange]
    starts: dict[str, Position]


class LogCdcTask(SourceTask, Generic[C]):
    """One log, one partition and one snapshot partition per captured table; see the module
    docstring. Subclasses implement the abstract methods (the log and its positions)."""

    position_unit: ClassVar[str] = "records"
    #: The envelope's ``source`` block fields (each source's ``SOURCE_FIELDS``).
    source_fields: ClassVar[Sequence[tuple[str, str]]]
    #: The SQL dialect of the database (quoting a column in a backfill's range).
    dialect: ClassVar[Dialect]
    #: Errors that say nothing about the connection (a missing slot): raised without closing it.
    keeps_connection: ClassVar[tuple[type[Exception], ...]] = ()

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        super().__init__(config, task_id)
        self.where = f"connector {self.name!r}"
        self.prefix = str(config["topic.prefix"])
        self.max_records = int(config.get("batch.max.records") or 10_000)
        self._conn: Any = None
        self._keys: Keys | None = None
        self.mode = snap.snapshot_mode(config)
        self._snapshots: snap.TableSnapshots | None = None
        self.signal_table = signals.signal_table(config)
        self._signal_keys: Keys = {}
        self._ondemand: od.OnDemand | None = None
        self._behind = False  # the last log read stopped at batch.max.records before the log end
        self._requests: Sequence[Backfill] = ()

    # ---- template methods: what each database does its own way ----------------------------------
    @abstractmethod
    def _connect(self) -> Any:
        """A new session with the database (its driver, its session settings)."""

    @abstractmethod
    def _captured_tables(self) -> tuple[Keys, Keys]:
        """The captured tables' primary keys and the signal table's (``{}`` without one); raises
        ConfigError naming every problem. Catalogs differ (PostgreSQL also checks replica
        identity and makes the publication match)."""

    @abstractmethod
    def read_chunk(self, conn: Any, query: snap.ChunkQuery) -> snap.Rows:
        """The rows of ``query`` over ``conn``, a session of ``_connect``: the SQL dialect and the
        driver differ."""

    def _read_chunk(self, query: snap.ChunkQuery, *, apart: bool = False) -> snap.Rows:
        """The chunk query over the task's connection, or (``apart``) over one of its own, for a
        chunk read ahead on another thread (the task's connection is not shared across threads)."""
        if not apart:
            return self._guarded(self.read_chunk, query)
        conn = self._connect()
        try:
            return self.read_chunk(conn, query)
        finally:
            conn.close()

    def _chunk_query(self, keys: Keys, *, apart: bool = False) -> snap.Fetch:
        """``_read_chunk`` as a snapshot's ``Fetch`` of the tables of ``keys``."""
        return lambda t, after, upto, limit, condition: self._read_chunk(
            snap.ChunkQuery(t, tuple(keys[t]), after, upto, limit, condition), apart=apart
        )

    @abstractmethod
    def _snapshot_source(self, table: str) -> Mapping[str, Any]:
        """The ``source`` block of ``table``'s snapshot records (database, or database and schema)."""

    @abstractmethod
    def _log_earliest(self) -> dict[str, Position]:
        """``earliest_positions`` of the log partitions: what each log still retains."""

    @abstractmethod
    def _held(self, mine: Mapping[str, Position], shots: Mapping[str, Position]) -> dict[str, Position]:
        """Each log partition's start now (``mine``: the committed ones; ``shots``: the snapshot
        partitions'), where the log is held while the initial snapshot runs. Pins capture's start
        first — it must be fixed before any chunk is read (connectors.cdc.snapshot)."""

    @abstractmethod
    def _log_batch(
        self, mine: Mapping[str, Position], held: Mapping[str, Position], shots: Mapping[str, Position]
    ) -> LogBatch | None:
        """The log's next batch from ``held`` (``_held``'s answer): its end pinned now, at most
        ``batch.max.records`` records of whole transactions; sets ``_behind`` when it stopped
        short of the log end. None: the log is gone and the loss was allowed (no log positions)."""

    @abstractmethod
    def _changed_since(self, table: str, log: str) -> set[str]:
        """A re-read chunk's reconciliation: key texts of ``table``'s changes from ``log`` (a
        chunk position's meta ``log``) to a log end pinned now (connectors.cdc.ondemand)."""

    @abstractmethod
    def changes_of(self, r: PartitionRange) -> list[C]:
        """The changes of a log range in log order: what ``read`` makes its table of."""

    @abstractmethod
    def _with_offsets(self, changes: list[C], r: PartitionRange) -> list[C]:
        """``changes`` (of ``r``) with their records' offsets: each source numbers them its way."""

    def _origin_text(self) -> str:
        """Capture's start as snapshot positions record it (meta ``origin``); "" for a source that
        keeps it elsewhere (PostgreSQL: the slot)."""
        return ""

    # ---- connection and tables -------------------------------------------------------------------
    def _db(self) -> Any:
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def _guarded(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(self._db(), *args)
        except self.keeps_connection:
            raise
        except Exception:
            self.close()  # a broken connection is rebuilt by the next call
            raise

    def _tables(self) -> Keys:
        """Captured tables and their primary keys, resolved once per task (tables created later
        are picked up when the task restarts)."""
        if self._keys is None:
            self._keys, self._signal_keys = self._captured_tables()
        return self._keys

    def _stream(self) -> list[str]:
        """The log's partitions (one per table; none under ``snapshot.mode=initial_only``)."""
        return [] if self.mode == "initial_only" else list(self._tables())

    def _snap(self) -> snap.TableSnapshots:
        if self._snapshots is None:
            keys = self._tables()
            tables = [] if self.mode == "never" else list(keys)
            size = int(self.config.get("snapshot.chunk.size") or snap.CHUNK_SIZE)
            fetch = self._chunk_query(keys)
            idle = self._rereadable(keys)
            apart = self._chunk_query(keys, apart=True)
            self._snapshots = snap.TableSnapshots(tables, size, fetch, idle, fetch_apart=apart)
            self._ondemand = od.OnDemand(size, fetch) if idle else None
        return self._snapshots

    def partitions(self) -> list[str]:
        return self._stream() + self._snap().partitions()

    # ---- positions -------------------------------------------------------------------------------
    def earliest_positions(self) -> dict[str, Position]:
        """Snapshot partitions at their first chunk; log partitions where the log starts
        (``_log_earliest``)."""
        shots = {p: self._snap().first(p, self._origin_text()) for p in self._snap().partitions()}
        if not self._stream():
            return shots
        return {**shots, **self._log_earliest()}

    def latest_positions(self, committed: Mapping[str, Position]) -> dict[str, Position]:
        """The snapshot's next chunks while it runs (the log held at capture's start, fixed before
        any chunk is read: connectors.cdc.snapshot says why), then the log's next batch, with the
        on-demand snapshot's chunks read before the log end is pinned (connectors.cdc.ondemand)."""
        shots = {p: committed[p] for p in self._snap().partitions() if p in committed}
        if not self._stream():
            return self._snap().latest(shots, "")
        mine = {p: committed[p] for p in self._stream() if p in committed}
        held = self._held(mine, shots)
        origin = self._origin_text()
        if not snap.finished(self._snap().tables, shots):
            return {**self._snap().latest(shots, origin), **held}
        current = self._snap().current(shots, origin)
        if self._ondemand is not None and not self._behind:
            self._ondemand.read_chunks(current)  # before the log end is pinned (connectors.cdc.ondemand)
        batch = self._log_batch(mine, held, shots)
        if batch is None:
            return current
        out = {**current, **batch.ends}
        if self._ondemand is not None:
            moved = self._ondemand.moves(
                current,
                batch.changes,
                batch.starts,
                self._tables(),
                self.signal_table,
                self.where,
                not self._behind,
            )
            out.update(moved)
            out.update(self._apply_requests(current, moved))
        return out

    # ---- backfills (connectors.backfills) ----------------------------------------------------------
    def _rereadable(self, keys: Keys) -> list[str]:
        """The streamed tables that may be re-read, so have a snapshot partition even when the
        initial snapshot is not taken: all with a signal table, else those a backfill request named
        (a connector without either keeps one partition per table)."""
        if not self._stream():
            return []
        if self.signal_table:
            return list(keys)
        return [t for t in keys if backfills.newest(self._requests, t) is not None]

    def take_backfills(self, requests: Sequence[Backfill]) -> None:
        """TakesBackfills: applied by the next planning (``_requested``). A request naming a table
        that had no snapshot partition gives it one (the partitions are planned again)."""
        self._requests = requests
        known, keys = self._snapshots, self._keys
        if (
            known is not None
            and keys is not None
            and set(self._rereadable(keys)) - set(known.partitions_tables())
        ):
            self._snapshots = None

    def _apply_requests(
        self, current: Mapping[str, Position], moved: Mapping[str, Position]
    ) -> dict[str, Position]:
        """The snapshot positions the backfill requests move, from where this planning left them. A
        table a request acts on drops the chunk just planned for its running generation (it is
        replaced or stopped before it is read); a generation a signal row opened stays."""
        assert self._ondemand is not None
        now = {**current, **moved}
        found = self._requested(now)
        acted = {snap.partition_of(t) for signal in found for t in signal.tables}

        def base(p: str) -> Position:
            if p in acted and snap.Chunk.of(now[p]).generation == snap.Chunk.of(current[p]).generation:
                return current[p]
            return now[p]

        return self._ondemand.apply({p: base(p) for p in now}, found)

    def _requested(self, positions: Mapping[str, Position]) -> list[signals.Signal]:
        """The backfill requests as the signals they amount to now: open a filtered generation of a
        table whose newest request is not applied yet, stop one whose request was cancelled."""
        out = []
        for table in self._tables():
            position = positions.get(snap.partition_of(table))
            if position is None:
                continue
            step = backfills.step(self._requests, table, position)
            request = step.request
            if request is None:
                continue
            action = signals.EXECUTE if step.action is backfills.Action.OPEN else signals.STOP
            condition = ((table, request.condition),) if request.condition else ()
            out.append(
                signals.Signal(request.signal, action, (table,), request.requested_ms, condition, request.id)
            )
        return out

    def backfill_tables(self) -> list[str]:
        return self._stream()

    def backfill_range(self, table: str, column: str, low: str | None, high: str | None) -> str:
        """``--from/--to`` on ``column``, or on the table's primary key when it is one column."""
        if not column:
            keys = self._tables().get(table, ())
            if len(keys) != 1:
                raise ValueError(
                    f"{self.where} table {table!r}: its primary key is ({', '.join(keys)}), not one "
                    "column: name the column to filter on (--column) or give --where"
                )
            column = keys[0]
        return backfills.range_condition(
            quote(self.dialect, column), low, high, self.dialect is Dialect.MYSQL
        )

    def backfill_problem(self, table: str, condition: str) -> str | None:
        """A table that is not streamed, or a condition its database refuses (probed with a read
        of no rows, after a plain one succeeded: a failing connection is not blamed on it)."""
        if table not in self._stream():
            streamed = ", ".join(self._stream()) or "none: snapshot.mode=initial_only streams nothing"
            return f"{self.where}: {table!r} is not a captured table it streams (it streams {streamed})"
        probe = snap.ChunkQuery(table, tuple(self._tables()[table]), limit=0)
        self._read_chunk(probe)
        if not condition:
            return None
        try:
            self._read_chunk(replace(probe, condition=condition))
        except Exception as exc:  # the database's own words on the condition
            self.close()
            return f"{self.where} table {table!r}: the condition {condition!r} cannot be used: {exc}"
        return None

    def backlog(self, partition: str, start: Position, latest: Position) -> int | None:
        return None  # counted by the bounded log read in latest_positions

    def batch_end(self, partition: str, start: Position, latest: Position, budget: int | None) -> Position:
        """Always ``latest``: the batch limit was applied by the planning read, and every table ends
        at the same log point (a slot can only advance past a point every table reached)."""
        return latest

    # ---- reading ---------------------------------------------------------------------------------
    def _emitted(self, r: PartitionRange) -> list[C]:
        """The changes of a log range ``read`` makes records of (``skipped.operations`` left out)."""
        skipped = operations.skipped(self.config)
        return [c for c in self.changes_of(r) if operations.emitted(c.record, skipped)]

    def holds_records(self, r: PartitionRange) -> bool:
        """KnowsEmptyRanges: a log range holds records only when its table changed in it (a
        snapshot chunk is read to find out)."""
        return not r.is_empty and (snap.is_snapshot(r.partition) or bool(self._emitted(r)))

    def send_order(self, ranges: Sequence[PartitionRange]) -> SendOrder:
        """KnowsSendOrder: a log range's table is built in log order; a snapshot chunk holds each
        row of its table once, so its keys are unique and its splits are sent in parallel."""
        return SendOrder.ANY if all(snap.is_snapshot(r.partition) for r in ranges) else SendOrder.AS_READ

    def read(self, ranges: Sequence[PartitionRange]) -> SourceRead:
        """Records of ``ranges``, one Arrow table per range that has any (the runtime reads one
        table per call: ``topic_of``)."""
        tables = (self._range_table(r) for r in ranges if not r.is_empty)
        return SourceRead(tables=tuple(t for t in tables if t is not None))

    def _range_table(self, r: PartitionRange) -> pa.Table | None:
        """The records of one non-empty range (None: it has none)."""
        if snap.is_snapshot(r.partition):
            return self._snapshot_table(r)
        wanted = self._emitted(r)
        if not wanted:
            return None
        wanted = self._with_offsets(wanted, r)
        shape = wanted[-1].shape
        return change_table(
            [c.record for c in wanted],
            columns=shape.columns,
            key_columns=shape.keys,
            source_fields=self.source_fields,
            topic=self.topic_of(r.partition),
            partition=r.partition,
        )

    def _snapshot_table(self, r: PartitionRange) -> pa.Table | None:
        source = self._snapshot_source(snap.table_of(r.partition))
        snapshots = self._snap()  # first: a re-run reads before any planning made the on-demand reader
        topic = self.topic_of(r.partition)
        ondemand, changed = self._ondemand, self._changed_since
        return od.snapshot_table(r, snapshots, ondemand, changed, source, self.source_fields, topic)

    def topic_of(self, partition: str) -> str:
        return debezium_topic(self.prefix, *snap.table_of(partition).split(".", 1))

    def topics(self) -> list[str]:
        return sorted({self.topic_of(p) for p in self.partitions()})

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None


class LogCdcConnector(SourceConnector):
    """A log-based CDC connector: one task (one log, one reader); ``start`` checks the server and
    the tables up front with the source's ``server_problems``."""

    @abstractmethod
    def server_problems(self, config: Mapping[str, Any], name: str) -> list[FieldError]:
        """Every problem of the server and the tables for connector ``name``: checks differ."""

    def start(self, config: Mapping[str, Any]) -> None:
        errors = self.server_problems(config, str(config.get("name") or self.plugin_name))
        if errors:
            raise ConfigError(errors)

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        return [dict(config)]  # one log stream, one reader
