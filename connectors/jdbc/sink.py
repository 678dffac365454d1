"""``jdbc-sink``: RocketMQ topics into MySQL/MariaDB or PostgreSQL tables, exactly once.

Kafka Connect JDBC sink keys (``sluice.connectors.jdbc.sink_config``); the dialect comes from
``connection.url``. Each micro-batch is written per target table (``table.name.format``, default
``${topic}``) through the dialect's bulk path, chosen by measurement — COPY + merge
(``write_postgres``: Arrow -> CSV -> COPY measured at 761k rows/s against 443k for Spark JDBC
batches), LOAD DATA LOCAL + merge (``write_mysql``: 1.7-1.8x PyMySQL's multi-row INSERT in
``bench/mysql_write_bench.py``) — and its positions commit with it. Which guarantee applies when:

* **Target = the offset store's PostgreSQL database**: the rows and Sluice's positions commit in one
  transaction (``PositionCommitter.commit(plan, connection)``).
* **Any other database** (MariaDB, another PostgreSQL database): the rows and a row of the target's
  ``sluice_sink_batches`` ledger commit in one transaction, the store's positions right after; a
  re-run after a crash between the two sees the ledger row and writes nothing again
  (``sluice.connectors.jdbc.ledger``).

Both are exactly once, for every ``insert.mode`` and ``pk.mode`` (a keyless ``insert`` too: the
ledger, not a key, stops the re-run). The choice is made by ``bind_positions`` from the URLs.

TRUNCATE (Debezium JDBC sink's ``truncate.enabled``, default false): a truncate event reaches the
sink as ``ExtractNewRecordState`` with ``drop.truncates=false`` passes it on — null key and value,
header ``__op=t``. Such a record is never written as a row. With ``truncate.enabled`` it empties
its table *in order*. A table's records spread over its topic's queues by key, so the truncate
comes as a copy per queue (``sluice.connectors.barriers``): the table is emptied at the first copy
met (PostgreSQL ``TRUNCATE``; MariaDB ``DELETE``, as its TRUNCATE would commit on its own) in the
batch's transaction, and each queue's rows before its own copy are left out — so the table ends as
if every record had been applied one by one, committed with the positions and the barrier state
(``barrier_state``). Without it the record is ignored, as Debezium's sink does.

Lifecycle (as the runtime drives it):

1. Build the task (``open_sink_task``); the runtime calls ``bind_positions(committer)``.
2. ``prepare(plan)`` returns ``{"jdbc.nonce": <random>}``, recorded with the plan (ledger identity).
3. ``write(records, plan)`` writes *and commits* positions; the runtime does not.
   A batch the target refuses row-wise raises ``RejectedRecordsError`` naming every refused record
   (found by bisection, ``sluice.connectors.jdbc.badrows``) after rolling everything back.
4. ``close()`` disposes the connection pool.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from sqlalchemy import Connection, Engine, create_engine

from sluice.connectors.api import (
    Delivery,
    PlannedWrite,
    Rejected,
    RejectedRecordsError,
    SinkConnector,
    SinkTask,
    StagedRowsRefused,
    TaskStager,
)
from sluice.connectors.barriers import (
    BARRIER_HEADER,
    BARRIER_MARK,
    BARRIER_QUEUES_HEADER,
    BarrierId,
    Copy,
    cut_at_barriers,
)
from sluice.connectors.config import ConfigDef, ConfigError, FieldError
from sluice.connectors.converters import (
    KEY_SCHEMA_HEADER,
    OFFSET_PROPERTY,
    PARTITION_PROPERTY,
    VALUE_SCHEMA_HEADER,
)
from sluice.connectors.jdbc import badrows, barrier_state, ledger, staging
from sluice.connectors.jdbc import write_mysql as my
from sluice.connectors.jdbc import write_postgres as pg
from sluice.connectors.jdbc.ddl import UnsupportedTypeError, add_columns_sql, create_table_sql
from sluice.connectors.jdbc.shape import KeySpec, KeySpecError, shape, wire
from sluice.connectors.jdbc.sink_config import cross_field_errors, fields
from sluice.connectors.jdbc.staging import StagedTable
from sluice.connectors.jdbc.urls import Dialect, dialect_of, engine_url
from sluice.connectors.jdbc.writes import OP_COLUMN, ORD_COLUMN, POSITION_COLUMNS, TableWrite, unique_keys
from sluice.connectors.model import BatchPlan
from sluice.connectors.records import OP_HEADER, OP_TRUNCATE, position
from sluice.connectors.spark_schema import own_struct

if TYPE_CHECKING:
    import pyarrow as pa

    from sluice.connectors.api import PositionCommitter


log = logging.getLogger(__name__)


class JdbcSinkError(RuntimeError):
    """Writing a batch failed; names connector, task, batch and table (never the URL's password)."""


class JdbcAuthError(PermissionError):
    """The database refused the credentials (retried a few times, then a configuration error)."""


@dataclass
class Part:
    """One table's share of a batch, ready to apply."""

    write: TableWrite
    fields: pa.Schema  # the typed columns (shape.Shaped.fields)
    rows: pa.Table  # write.columns, ORD_COLUMN, OP_COLUMN
    positions: pa.Table  # POSITION_COLUMNS, same row order


class JdbcSinkTask(SinkTask):
    """Writes a batch per table with the dialect's bulk path; commits positions with the data."""

    delivery: ClassVar[Delivery] = Delivery.EXACTLY_ONCE
    #: Values of keys a task config may lack (one built by hand rather than by validation).
    defaults: ClassVar[Mapping[str, Any]] = {"pk.mode": "none"}

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        super().__init__({**self.defaults, **{k: v for k, v in config.items() if v is not None}}, task_id)
        errors = cross_field_errors(self.config, f"connector {self.name!r}")
        if errors:
            raise ConfigError(errors)
        c = self.config
        self._url = engine_url(str(c["connection.url"]), c.get("connection.user") or None,
                               c.get("connection.password") or None)  # fmt: skip
        self.dialect = dialect_of(self._url)
        self._mode = str(c.get("insert.mode") or "insert")
        self._spec = KeySpec(
            str(c.get("pk.mode") or "none"),
            tuple(str(k) for k in c.get("pk.fields") or []),
            bool(c.get("delete.enabled", False)),
        )
        self._auto_create = bool(c.get("auto.create", False))
        self._auto_evolve = bool(c.get("auto.evolve", False))
        self._format = str(c.get("table.name.format") or "${topic}")
        self._schema = str(c.get("schema") or "")
        self._whitelist = [str(f) for f in c.get("fields.whitelist") or []]
        self._chunk = int(c.get("batch.size") or 50_000)
        self._truncates = bool(c.get("truncate.enabled", False))
        self._barrier_table = False  # created (when missing) by this task's first batch
        self._committer: PositionCommitter | None = None
        self._own_ledger = True
        self._engine: Engine | None = None

    # ---- wiring -----------------------------------------------------------------------------

    def bind_positions(self, committer: PositionCommitter) -> None:
        """Positions commit in the data transaction when the store lives in the target database;
        otherwise through the target's own ledger (see the module docstring)."""
        same = self.dialect is Dialect.POSTGRESQL and committer.same_database(
            self._url.render_as_string(hide_password=False)
        )
        self._committer, self._own_ledger = committer, not same

    def _positions(self) -> PositionCommitter:
        if self._committer is None:
            raise JdbcSinkError(
                f"connector {self.name!r} task {self.task_id}: no position committer bound "
                "(the runtime calls bind_positions before the first write)"
            )
        return self._committer

    def _get_engine(self) -> Engine:
        if self._engine is None:
            args: dict[str, Any] = dict(my.CONNECT_ARGS) if self.dialect is Dialect.MYSQL else {}
            self._engine = create_engine(
                self._url, pool_pre_ping=True, pool_size=1, max_overflow=1, connect_args=args
            )
        return self._engine

    def table_for(self, topic: str) -> tuple[str, str]:
        """(schema, table) for a topic; a dot in the formatted name separates a schema."""
        name = self._format.replace("${topic}", topic)
        schema, _, table = name.rpartition(".")
        schema = schema or self._schema or ("public" if self.dialect is Dialect.POSTGRESQL else "")
        return schema, table

    def _where(self, plan: BatchPlan, table: str = "") -> str:
        where = f"connector {self.name!r} task {self.task_id} batch {plan.batch_id}"
        return f"{where} table {table!r}" if table else where

    def prepare(self, plan: BatchPlan) -> dict[str, str]:
        return {ledger.NONCE_KEY: uuid.uuid4().hex}

    # ---- rows --------------------------------------------------------------------------------

    def _parts(self, records: pa.Table, plan: BatchPlan) -> list[Part]:
        """Each table's rows (``records`` without truncate markers: ``_cut``)."""
        # pyarrow: config validation imports this module (the jdbc-sink class)
        import pyarrow as pa
        import pyarrow.compute as pc

        # The records' topics, not the plan's: a transform (RegexRouter) may have renamed them. When
        # the batch's topics carry different schemas, each record names its own (VALUE_SCHEMA_HEADER).
        headers = records.column("headers")
        for column, header in (("_own", VALUE_SCHEMA_HEADER), ("_own_key", KEY_SCHEMA_HEADER)):
            records = records.append_column(column, pc.map_lookup(headers, pa.scalar(header), "first"))
        seen = records.group_by(["topic", "_own", "_own_key"]).aggregate([]).to_pylist()
        tables: dict[tuple[str, str], list[str]] = {}
        own_schema: dict[tuple[str, str], str] = {}
        own_key: dict[tuple[str, str], str] = {}
        for row in sorted(seen, key=lambda r: (str(r["topic"]), str(r["_own"]), str(r["_own_key"]))):
            if not row["topic"]:
                continue
            key = self.table_for(row["topic"])
            if row["topic"] not in tables.setdefault(key, []):
                tables[key].append(row["topic"])
            if row["_own"] is not None:
                own_schema.setdefault(key, row["_own"])
            if row["_own_key"] is not None:
                own_key.setdefault(key, row["_own_key"])
        parts: list[Part] = []
        for (schema, table), topics in tables.items():
            target = f"{schema}.{table}" if schema else table
            subset = records.filter(pc.is_in(records.column("topic"), pa.array(topics, pa.string())))
            if (schema, table) in own_schema:
                subset = own_struct(subset, "value", own_schema[(schema, table)])
            if (schema, table) in own_key:
                subset = own_struct(subset, "key", own_key[(schema, table)])
            try:
                shaped = shape(subset, self._spec)
            except KeySpecError as exc:
                raise ConfigError([FieldError("pk.fields", f"{self._where(plan, target)}: {exc}")]) from None
            names = [f for f in shaped.fields.names
                     if not self._whitelist or f in self._whitelist or f in shaped.pk]  # fmt: skip
            arrow = wire(self.dialect, shaped, names)
            if arrow.num_rows == 0:
                continue
            ordinal = pa.array(range(arrow.num_rows), type=pa.int64())
            rows = arrow.select([*names, OP_COLUMN]).add_column(len(names), ORD_COLUMN, ordinal)
            write = TableWrite(schema, table, tuple(names), shaped.pk, self._mode, self._spec.deletes)
            parts.append(Part(write, shaped.fields, rows, arrow.select(list(POSITION_COLUMNS))))
        return parts

    @staticmethod
    def _markers(records: pa.Table) -> pa.ChunkedArray:
        """Which records are truncate markers (null value, header ``__op=t``)."""
        # pyarrow: config validation imports this module (the jdbc-sink class)
        import pyarrow as pa
        import pyarrow.compute as pc

        op = pc.map_lookup(records.column("headers"), pa.scalar(OP_HEADER), "first")
        return pc.fill_null(pc.and_(pc.is_null(records.column("value")), pc.equal(op, OP_TRUNCATE)), False)

    def orders_barriers(self) -> bool:
        """With ``truncate.enabled`` a truncate's copies, one per queue, order the rows around it
        (connectors.barriers); without it a truncate is ignored, so one copy is as good as all."""
        return self._truncates

    def _cut(
        self, conn: Connection, records: pa.Table, marker: pa.ChunkedArray, plan: BatchPlan
    ) -> tuple[pa.Table, list[tuple[str, str]], dict[str, barrier_state.Stored]]:
        """With ``truncate.enabled``: the rows to write, the tables to empty before them, and the
        barrier state to commit (in ``conn``'s transaction, which this locks the state rows of).

        Each truncate marker is a barrier copy (``cut_at_barriers``): a queue's rows before its
        copy of an applied truncate are left out, and the table is emptied once, at the first copy
        met in any queue. Markers never become rows."""
        # pyarrow: config validation imports this module (the jdbc-sink class)
        import pyarrow as pa
        import pyarrow.compute as pc

        # A barrier orders the rows of its source partition (its table): the scope of each record.
        headers = records.column("headers")
        scope = pc.coalesce(
            pc.map_lookup(headers, pa.scalar(PARTITION_PROPERTY), "first"), records.column("topic")
        )
        marked = records.filter(marker).append_column("_scope", scope.filter(marker))
        found = {
            name: pc.map_lookup(marked.column("headers"), pa.scalar(header), "first").to_pylist()
            for name, header in (
                ("label", BARRIER_HEADER),
                ("queues", BARRIER_QUEUES_HEADER),
                ("at", OFFSET_PROPERTY),
            )
        }
        columns = ("_scope", "topic", "partition", "offset")
        copies: dict[str, list[Copy]] = {}
        tables: dict[str, set[tuple[str, str]]] = {}
        for i, (p, t, q, o) in enumerate(zip(*(marked.column(c).to_pylist() for c in columns), strict=True)):
            tables.setdefault(p, set()).add(self.table_for(t))
            label, sent_to, at = found["label"][i], found["queues"][i], found["at"][i]
            if not label or label == BARRIER_MARK or not sent_to:  # sent to its queue only
                copies.setdefault(p, []).append(Copy(q, o, BarrierId(f"queue {q}", o), frozenset([q])))
                continue
            try:
                barrier = BarrierId(p, int(at))
            except (TypeError, ValueError):
                raise JdbcSinkError(
                    f"{self._where(plan)}: truncate at topic {t!r} queue {q!r} offset {o} has no source "
                    f"offset ({OFFSET_PROPERTY}={at!r}); it cannot be ordered against the other queues"
                ) from None
            copies.setdefault(p, []).append(Copy(q, o, barrier, frozenset(sent_to.split(","))))
        # the queues and first offsets of each scope's records
        firsts = (
            pa.table({"s": scope, "q": records.column("partition"), "o": records.column("offset")})
            .group_by(["s", "q"])
            .aggregate([("o", "min"), ("o", "max")])
            .to_pylist()
        )
        queues: dict[str, dict[str, tuple[int, int]]] = {}
        for row in firsts:
            queues.setdefault(row["s"], {})[row["q"]] = (row["o_min"], row["o_max"])
        states = barrier_state.load(conn, self.dialect, self.name, plan, queues)
        keep = pc.invert(marker)
        emptied: set[tuple[str, str]] = set()
        out: dict[str, barrier_state.Stored] = {}
        partition, offset = records.column("partition"), records.column("offset")
        for p, spans in sorted(queues.items()):
            cut = cut_at_barriers(sorted(spans), copies.get(p, []), states[p].barriers)
            if cut.apply:
                emptied |= tables.get(p, set())
            here = pc.equal(scope, p)
            for q, after in cut.keep_after.items():
                if after == -1:
                    continue
                in_queue = pc.and_(here, pc.equal(partition, q))
                dropped = in_queue if after is None else pc.and_(in_queue, pc.less_equal(offset, after))
                keep = pc.and_(keep, pc.invert(pc.fill_null(dropped, False)))
            out[p] = states[p].after(cut.state, plan, spans)
        return records.filter(keep), sorted(emptied), out

    # ---- the batch ---------------------------------------------------------------------------

    def write(self, records: pa.Table, plan: BatchPlan) -> None:
        """Write the batch's rows and commit ``plan`` with them (see the module docstring)."""
        # pyarrow: config validation imports this module (the jdbc-sink class)
        import pyarrow.compute as pc

        committer = self._positions()
        nonce = plan.sink_state.get(ledger.NONCE_KEY, "")
        engine = self._get_engine()
        parts: list[Part] = []
        types: dict[str, dict[str, str]] = {}
        try:
            if self._written_before(plan, nonce):
                return
            marker = self._markers(records)
            unmarked = records.filter(pc.invert(marker))
            if self.dialect is Dialect.MYSQL:  # DDL commits implicitly in MySQL: before the data
                parts = self._parts(unmarked, plan)
                with engine.begin() as conn:
                    for p in parts:
                        types[p.write.target] = self._ensure_table(conn, p.write, p.fields, plan)
            if self._truncates and not self._barrier_table:
                with engine.begin() as conn:
                    barrier_state.ensure(conn, self.dialect)
                self._barrier_table = True
            with engine.begin() as conn:
                rows, emptied, barriers = (
                    self._cut(conn, records, marker, plan) if self._truncates else (unmarked, [], {})
                )
                if not parts or rows.num_rows != unmarked.num_rows:  # (a barrier left rows out)
                    parts = self._parts(rows, plan)
                for schema, table in emptied:  # a truncate goes before the rows that follow it
                    (pg if self.dialect is Dialect.POSTGRESQL else my).empty_table(conn, schema, table)
                barrier_state.save(conn, self.name, barriers)
                for p in parts:
                    if self.dialect is Dialect.POSTGRESQL:
                        types[p.write.target] = self._ensure_table(conn, p.write, p.fields, plan)
                    self._apply(conn, p, types[p.write.target])
                self._commit_in(conn, plan, nonce)
            if self._own_ledger:
                committer.commit(plan, None)
        except Exception as exc:
            if not badrows.is_database_error(exc):
                raise
            raise self._failure(exc, plan, parts, types) from None

    # ---- a batch staged by the Spark tasks (StagesOnExecutors) ------------------------------

    def stager(self, plan: BatchPlan) -> TaskStager | None:
        """A Spark batch is staged by its tasks (connectors.jdbc.staging), but for batches that
        order truncates (``truncate.enabled``: a barrier orders rows across the batch's queues,
        ``_cut``), written from the driver."""
        if self._truncates:
            return None
        # What an earlier batch's tasks staged and no merge took (a crash, or a batch the runtime
        # then wrote another way) goes first.
        with self._get_engine().begin() as conn:
            staging.prepare(conn, self.dialect, staging.staging_prefix(self.name, self.task_id))
        return TaskStager(type(self), dict(self.config), self.task_id, plan)

    def stage(self, records: pa.Table, plan: BatchPlan, partition: int) -> list[StagedTable]:
        """Where a Spark task runs: COPY this partition's rows, per table, into staging tables
        (``records`` are checked records, as ``write`` gets them)."""
        import pyarrow.compute as pc

        parts = self._parts(records.filter(pc.invert(self._markers(records))), plan)
        prefix = staging.staging_prefix(self.name, self.task_id)
        pid, host = staging.process()
        staged: list[StagedTable] = []
        try:
            with self._get_engine().begin() as conn:
                for index, p in enumerate(parts):
                    name = staging.staging_name(prefix, plan.batch_id, partition, index)
                    rows = staging.ordered(p.rows, partition)
                    staging.stage_rows(conn, self.dialect, name, rows, self._chunk)
                    unique = unique_keys(p.rows, p.write.pk)
                    fields = p.fields.serialize().to_pybytes()
                    staged.append(StagedTable(p.write, name, fields, p.rows.num_rows, unique, pid, host))
        except Exception as exc:
            if not badrows.is_database_error(exc):
                raise
            raise JdbcSinkError(self._refused(plan, exc, "staging: ")) from None
        return staged

    def write_staged(self, shares: Sequence[list[StagedTable]], plan: BatchPlan) -> None:
        """Merge every partition's staging tables into their targets and commit ``plan`` with
        them, then drop the staging tables (connectors.jdbc.staging)."""
        committer = self._positions()
        nonce = plan.sink_state.get(ledger.NONCE_KEY, "")
        staged = [t for share in shares for t in share]
        prefix = staging.staging_prefix(self.name, self.task_id)
        engine = self._get_engine()
        try:
            if self._written_before(plan, nonce):
                self._drop_stage(plan)
                return
            merges = self._staged_merges(staged)
            types: dict[str, dict[str, str]] = {}
            if self.dialect is Dialect.MYSQL:  # DDL commits implicitly in MySQL: before the data
                with engine.begin() as conn:
                    for write, fields, _, _ in merges:
                        types[write.target] = self._ensure_table(conn, write, fields, plan)
            with engine.begin() as conn:
                for write, fields, tables, unique in merges:
                    if self.dialect is Dialect.POSTGRESQL:
                        types[write.target] = self._ensure_table(conn, write, fields, plan)
                    union = staging.staged_union(self.dialect, tables, write.columns, types[write.target])
                    if self.dialect is Dialect.POSTGRESQL:
                        pg.merge(conn, write, union, unique=unique)
                    else:
                        my.merge(conn, write, union, types[write.target], unique=unique)
                if self.dialect is Dialect.POSTGRESQL:  # gone with the commit
                    staging.drop_batch(conn, self.dialect, prefix, plan.batch_id)
                self._commit_in(conn, plan, nonce)
            if self._own_ledger:
                committer.commit(plan, None)
        except Exception as exc:
            if not badrows.is_database_error(exc):
                raise
            try:  # nothing of the batch committed: its stage goes too (else the next batch's prepare)
                self._drop_stage(plan)
            except Exception as unreachable:  # the database's own failure is the one to report
                if not badrows.is_database_error(unreachable):
                    raise
            if badrows.is_row_error(exc):
                raise StagedRowsRefused(self._refused(plan, exc)) from None
            raise self._failure(exc, plan, [], {}) from None  # as write's: refused credentials too
        if self.dialect is Dialect.MYSQL:
            self._drop_stage(plan)
        stagers = ", ".join(sorted({f"{t.host}:{t.pid}" for t in staged}))
        rows = sum(t.rows for t in staged)
        log.info("%s: %d row(s) staged by process(es) %s, merged", self._where(plan), rows, stagers)

    def _staged_merges(
        self, staged: Sequence[StagedTable]
    ) -> list[tuple[TableWrite, pa.Schema, list[StagedTable], bool]]:
        """Per target table: its write over every column staged for it, the typed columns, its
        staging tables, and whether no key repeats (one partition staged it, none repeated)."""
        import pyarrow as pa

        by_target: dict[str, list[StagedTable]] = {}
        for t in staged:
            by_target.setdefault(t.write.target, []).append(t)
        merges = []
        for tables in by_target.values():
            fields = _merged_fields([pa.ipc.read_schema(pa.py_buffer(t.fields)) for t in tables])
            columns = tuple(dict.fromkeys(c for t in tables for c in t.write.columns))
            unique = len(tables) == 1 and tables[0].unique
            merges.append((replace(tables[0].write, columns=columns), fields, tables, unique))
        return merges

    def _drop_stage(self, plan: BatchPlan) -> None:
        with self._get_engine().begin() as conn:
            staging.drop_batch(
                conn, self.dialect, staging.staging_prefix(self.name, self.task_id), plan.batch_id
            )

    def _written_before(self, plan: BatchPlan, nonce: str) -> bool:
        """With the target's own ledger: whether a run of ``plan`` that crashed before the store's
        commit committed its rows there; its positions then commit now, and nothing is written."""
        if not self._own_ledger:
            return False
        with self._get_engine().begin() as conn:
            ledger.ensure(conn, self.dialect)
            applied = ledger.already_applied(conn, plan, nonce)
        if applied:
            self._positions().commit(plan, None)
        return applied

    def _commit_in(self, conn: Connection, plan: BatchPlan, nonce: str) -> None:
        """In the batch's data transaction: the ledger row, or the positions themselves."""
        if self._own_ledger:
            ledger.record(conn, plan, nonce)
        else:
            self._positions().commit(plan, conn)

    def _apply(self, conn: Connection, p: Part, types: dict[str, str]) -> None:
        if self.dialect is Dialect.POSTGRESQL:
            pg.apply(conn, p.write, p.rows, chunk_rows=self._chunk)
        else:
            my.apply(conn, p.write, p.rows, types, chunk_rows=self._chunk)

    def _slice_applier(self, p: Part, types: dict[str, str]) -> Callable[[Connection, pa.Table], None]:
        """Applies a slice of ``p``'s rows (bisection of refused rows)."""

        def apply(conn: Connection, rows: pa.Table) -> None:
            self._apply(conn, Part(p.write, p.fields, rows, p.positions), types)

        return apply

    def _refused(self, plan: BatchPlan, exc: BaseException, what: str = "") -> str:
        """What a database error of ``plan``'s batch says, after where it happened (and ``what``)."""
        orig = badrows.driver_error(exc)
        return f"{self._where(plan)}: {what}{type(orig).__name__}: {str(orig).strip()}"

    def _failure(
        self, exc: Exception, plan: BatchPlan, parts: list[Part], types: dict[str, dict[str, str]]
    ) -> Exception:
        orig = badrows.driver_error(exc)
        if badrows.is_auth_error(exc):
            user = f"user {self._url.username!r}" if self._url.username else "no user (set connection.user)"
            return JdbcAuthError(
                f"connector {self.name!r}: the database refused the credentials of {user} "
                f"({self._url.host}:{self._url.port or ''}/{self._url.database}): {type(orig).__name__}"
            )
        if not badrows.is_row_error(exc) or not parts:
            return JdbcSinkError(self._refused(plan, exc))
        rejected: list[Rejected] = []
        lines: list[str] = []
        for p in parts:
            t = types.get(p.write.target, {})
            bad = badrows.find_bad_rows(self._get_engine(), self._slice_applier(p, t), p.rows)
            for b in bad:
                topic, partition, offset = (p.positions.column(i)[b.index].as_py() for i in range(3))
                column = f" column {b.column!r}" if b.column else ""
                text = f"table {p.write.target!r}{column}: {b.reason}"
                rejected.append(Rejected(topic, partition, int(offset), text))
                lines.append(f"{position(topic, partition, int(offset))}: {text}")
        if not rejected:
            return JdbcSinkError(self._refused(plan, exc))
        more = f" (and {len(lines) - 3} more)" if len(lines) > 3 else ""
        return RejectedRecordsError(
            f"connector {self.name!r}: the target refused {len(rejected)} record(s), nothing of batch "
            f"{plan.batch_id} was committed: {'; '.join(lines[:3])}{more}",
            rejected,
        )

    def planned_writes(self, records: pa.Table) -> list[PlannedWrite]:
        """DescribesWrites: per target table, the DDL ``_ensure_table`` would run and the rows it
        would write (by the same ``_parts``), read from the target without changing it."""
        import pyarrow.compute as pc

        plan = BatchPlan(self.name, self.task_id, 0, ())
        mod = pg if self.dialect is Dialect.POSTGRESQL else my
        out = []
        with self._get_engine().connect() as conn:
            for p in self._parts(records.filter(pc.invert(self._markers(records))), plan):
                w = p.write
                ddl = self._ddl(mod.table_columns(conn, w.schema, w.table), w, p.fields, plan)
                deletes = pc.sum(pc.equal(p.rows.column(OP_COLUMN), "d")).as_py() or 0
                keyed = f" keyed by ({', '.join(w.pk)})" if w.pk else ""
                writes = f"{w.mode} {p.rows.num_rows - deletes} row(s) ({', '.join(w.columns)}){keyed}"
                out.append(
                    PlannedWrite(
                        w.target, tuple(ddl), writes + (f"; delete {deletes} row(s)" if deletes else "")
                    )
                )
        return out

    def _ensure_table(
        self, conn: Connection, w: TableWrite, fields: pa.Schema, plan: BatchPlan
    ) -> dict[str, str]:
        """The table's column types, after creating it (auto.create) or adding columns (auto.evolve)."""
        mod = pg if self.dialect is Dialect.POSTGRESQL else my
        existing = mod.table_columns(conn, w.schema, w.table)
        ddl = self._ddl(existing, w, fields, plan)
        if not ddl:
            return existing or {}
        if self.dialect is Dialect.POSTGRESQL:  # another task may be changing it: look again, locked
            pg.lock_table_name(conn, w.schema, w.table)
            ddl = self._ddl(mod.table_columns(conn, w.schema, w.table), w, fields, plan)
        for sql in ddl:
            mod.run(conn, sql)
        return mod.table_columns(conn, w.schema, w.table) or {}

    def _ddl(
        self, existing: Mapping[str, str] | None, w: TableWrite, fields: pa.Schema, plan: BatchPlan
    ) -> list[str]:
        """The DDL a write of ``fields`` into ``w``'s table needs (``existing``: its columns, None
        when it does not exist): a CREATE (auto.create), ADD COLUMNs (auto.evolve), or none;
        ConfigError where the config does not allow the one needed."""
        owner = f"connector {self.name!r}"
        typed = [f for f in fields if f.name in w.columns]
        try:
            if existing is None:
                if not self._auto_create:
                    why = "the table does not exist (set auto.create=true to create it)"
                    raise ConfigError([FieldError("auto.create", f"{self._where(plan, w.target)}: {why}")])
                return [create_table_sql(self.dialect, w.schema, w.table, typed, w.pk, owner)]
            missing = [f for f in typed if f.name not in existing]
            if missing and not self._auto_evolve:
                names = [f.name for f in missing]
                why = f"the table has no column(s) {names} (set auto.evolve=true to add them)"
                raise ConfigError([FieldError("auto.evolve", f"{self._where(plan, w.target)}: {why}")])
            return add_columns_sql(self.dialect, w.schema, w.table, missing, owner) if missing else []
        except UnsupportedTypeError as exc:
            raise ConfigError([FieldError("auto.create", f"{self._where(plan, w.target)}: {exc}")]) from None

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


def _merged_fields(schemas: Sequence[pa.Schema]) -> pa.Schema:
    """The typed columns of a table's staged partitions, each once, in the order first met."""
    import pyarrow as pa

    seen: dict[str, pa.Field] = {}
    for schema in schemas:
        for f in schema:
            seen.setdefault(f.name, f)
    return pa.schema(list(seen.values()))


class JdbcSinkConnector(SinkConnector):
    """Copies RocketMQ topics into MySQL/MariaDB or PostgreSQL tables, exactly once."""

    plugin_name: ClassVar[str] = "jdbc-sink"
    config_def: ClassVar[ConfigDef] = fields()
    task_class: ClassVar[type[SinkTask]] = JdbcSinkTask

    def validate(self, raw_config: Mapping[str, Any]) -> list[FieldError]:
        errors = super().validate(raw_config)
        if not errors:
            name = str(raw_config.get("name") or self.plugin_name)
            errors.extend(cross_field_errors(self.parse(raw_config), f"connector {name!r}"))
        return errors

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        """``tasks.max`` tasks of one config, as Kafka Connect's JDBC sink runs: the topics' queues
        are shared out by task id (activities.sink_runner.assigned). A key always goes to one queue,
        so each row is written by one task, in order; truncate barriers are ordered across the
        tasks in the target's transaction (jdbc.barrier_state). A task beyond the queues idles."""
        return [dict(config) for _ in range(max_tasks)]
