"""The offset store: committed positions and the batch ledger in PostgreSQL.

It is the truth the micro-batch protocol (docs/design.md) restarts from:

1. ``pending_plan(connector, task)``: a plan recorded but never committed is re-run identically.
2. Otherwise the planner reads ``committed_positions`` and builds batch ``last_batch_id + 1``.
3. ``record_plan(plan)`` writes it PLANNED *before* any record is read.
4. The task reads exactly the plan's ranges and writes them to the target.
5. ``commit(plan)`` moves the positions to ``plan.end_positions()`` and marks the batch COMMITTED,
   in one transaction.

Delivery guarantees per path:

* **Exactly once** — the sink's target is this PostgreSQL database: the sink opens
  ``transaction()`` (or its own engine.begin() on the same database), writes the batch's rows and
  calls ``commit(plan, connection=conn)`` on that connection. Data, positions and ledger status
  become visible together or not at all, so a crash anywhere leaves either the whole batch or
  nothing, and the re-run of the pending plan writes it once.
* **Exactly once, by idempotence** — a target keyed by batch id or record position (upsert on a
  key, a file named after the batch): the write is repeated on re-run but converges to one copy;
  the commit runs in the store's own transaction afterwards.
* **At least once** — any other target: a crash between the target's write and ``commit`` re-runs
  the same plan, so that batch's records are delivered twice. Because a pending plan is replayed
  with the same ranges, duplicates are confined to that one batch.

Whatever the caller does, the store never lets a stored position move backwards through
``commit`` (checked under row locks and again by a guarded upsert) and never commits a batch twice;
only the admin ``set_positions`` may rewind.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, delete, func, select, text, update
from sqlalchemy.engine import URL, make_url

from sluice.activities.doorbells import CHANNEL as DOORBELL_CHANNEL
from sluice.activities.doorbells import doorbell_key
from sluice.activities.nudges import CHANNEL, nudge_key
from sluice.activities.store import backfills, rows
from sluice.activities.store.errors import (
    BatchAlreadyCommittedError,
    PlanConflictError,
    PlanNotRecordedError,
    PositionRegressionError,
    batch_ref,
)
from sluice.activities.store.ledger import (
    BatchRecord,
    ranges_to_json,
    record_from_row,
    same_ranges,
)
from sluice.activities.store.schema import (
    COMMITTED,
    PLANNED,
    advisory_lock_key,
    check_identifier,
    store_tables,
)
from sluice.activities.store.schema import migrate as run_migrations
from sluice.connectors.backfills import Backfill
from sluice.connectors.model import BatchPlan
from sluice.connectors.positions import PartitionKey, Position, as_position

ADMIN_TASK = -1
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


class OffsetStore:
    """Committed positions and the batch ledger of every connector, in one PostgreSQL schema."""

    def __init__(self, database_url: str, *, schema: str = "sluice", engine: Engine | None = None) -> None:
        self.schema = check_identifier(schema, "offset store schema")
        self._owns_engine = engine is None
        self._engine = engine if engine is not None else create_engine(database_url, pool_pre_ping=True)
        self._t = store_tables(schema)

    def __repr__(self) -> str:
        url = self._engine.url.render_as_string(hide_password=True)
        return f"OffsetStore({url!r}, schema={self.schema!r})"

    @property
    def engine(self) -> Engine:
        return self._engine

    def dispose(self) -> None:
        """Close pooled connections, if this store created its engine."""
        if self._owns_engine:
            self._engine.dispose()

    def migrate(self) -> None:
        """Create or upgrade the store's tables; safe to call from every worker at start."""
        with self._engine.begin() as conn:
            run_migrations(conn, self.schema)

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A transaction on the store's database, for writing data and ``commit``-ing together."""
        with self._engine.begin() as conn:
            yield conn

    def same_database(self, database_url: str) -> bool:
        """Whether ``database_url`` names this store's database (host, port, database).

        Compared by URL, without connecting (a sink checks this while being built, when the
        database may be briefly down); loopback spellings count as one host.
        """

        def where(url: URL) -> tuple[str, int, str | None]:
            host = (url.host or "localhost").lower()
            return ("localhost" if host in _LOOPBACK else host, url.port or 5432, url.database)

        return where(make_url(database_url)) == where(self._engine.url)

    def committer(self) -> StorePositionCommitter:
        """The narrow interface a transactional sink gets (connectors.api.PositionCommitter)."""
        return StorePositionCommitter(self)

    # ---- positions -------------------------------------------------------------------------

    def committed_positions(self, connector: str, task_id: int | None = None) -> dict[PartitionKey, Position]:
        """Next position per partition, keyed exactly like ``BatchPlan.end_positions()``.

        With ``task_id`` only the positions last committed by that task are returned; a planner
        whose partition assignment may have changed should read all of them and pick its own.
        """
        with self._engine.connect() as conn:
            return rows.read_positions(conn, self._t, connector, task_id=task_id)

    def set_positions(
        self,
        connector: str,
        positions: Mapping[PartitionKey | str, Position | int],
        *,
        clear: Iterable[PartitionKey] = (),
    ) -> None:
        """Admin: overwrite positions (forwards or backwards), like Kafka Connect's alterOffsets.

        Run it with the connector stopped. Plans recorded but not committed are discarded in the
        same transaction: their ranges start from positions that no longer hold, and re-running
        them would undo the change. Keys are ``PartitionKey``s or their text form
        (``topic/broker-a:0`` for a sink's queue, the partition name for a source). Keys in
        ``clear`` lose their position (read from the start again), in the same transaction.
        """
        cleared = list(clear)
        if not positions and not cleared:
            return
        typed: dict[PartitionKey, Position] = {}
        for key, pos in positions.items():
            pkey = key if isinstance(key, PartitionKey) else PartitionKey.parse(key)
            try:
                typed[pkey] = as_position(pos)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"connector {connector!r}: position of {str(pkey)!r}: {exc}") from None
        with self._engine.begin() as conn:
            kind = rows.registered_kind(conn, self._t, connector) or rows.key_kind(typed)
            if kind == "sink" and not all(k.topic for k in typed):
                bad = next(str(k) for k in typed if not k.topic)
                raise ValueError(
                    f"connector {connector!r} is a sink: position key {bad!r} must be "
                    "'<topic>/<broker>:<queue_id>'"
                )
            if typed:
                rows.register(conn, self._t, connector, kind)
            if cleared:
                rows.delete_positions(conn, self._t, connector, cleared)
            for pkey, pos in typed.items():
                rows.upsert_position(conn, self._t, connector, pkey, pos, ADMIN_TASK, None, guarded=False)
            lg = self._t.batch_ledger
            conn.execute(delete(lg).where(lg.c.connector == connector, lg.c.status == PLANNED))

    def reset_positions(self, connector: str) -> None:
        """Admin: forget every position (and uncommitted plan), like Kafka Connect's offset reset;
        the connector reads from the start when it runs again. The registry and ledger stay."""
        with self._engine.begin() as conn:
            rows.delete_positions(conn, self._t, connector, None)
            lg = self._t.batch_ledger
            conn.execute(delete(lg).where(lg.c.connector == connector, lg.c.status == PLANNED))

    def move_positions(
        self, connector: str, task_id: int, positions: Mapping[PartitionKey, Position]
    ) -> None:
        """Store positions the planner moved (relocation, a data-loss skip) before it records a plan.

        Unlike ``set_positions`` this is the task's own move: no ledger row is touched and the
        registry is left as it is. It may move backwards (a replaced file starts again at 0).
        """
        if not positions:
            return
        with self._engine.begin() as conn:
            for key, pos in positions.items():
                rows.upsert_position(conn, self._t, connector, key, pos, task_id, None, guarded=False)

    # ---- ledger ----------------------------------------------------------------------------

    def last_batch_id(self, connector: str, task_id: int) -> int:
        """The highest batch id recorded for the task, committed or not; -1 when none."""
        lg = self._t.batch_ledger
        with self._engine.connect() as conn:
            return int(
                conn.execute(
                    select(func.coalesce(func.max(lg.c.batch_id), -1)).where(
                        lg.c.connector == connector, lg.c.task_id == task_id
                    )
                ).scalar_one()
            )

    def pending_plan(self, connector: str, task_id: int) -> BatchPlan | None:
        """The last batch recorded but not committed, to be re-run with exactly the same ranges."""
        lg = self._t.batch_ledger
        q = (
            select(lg)
            .where(lg.c.connector == connector, lg.c.task_id == task_id, lg.c.status == PLANNED)
            .order_by(lg.c.batch_id.desc())
            .limit(1)
        )
        with self._engine.connect() as conn:
            row = conn.execute(q).mappings().first()
        return record_from_row(row).plan if row else None

    def record_plan(self, plan: BatchPlan) -> BatchPlan:
        """Record ``plan`` as PLANNED before it runs; return the stored plan.

        Re-recording the same (connector, task, batch id) with the same ranges is a no-op that
        counts an attempt and returns the stored plan (its ``sink_state`` is the one captured the
        first time). Different ranges, a batch id not above the last one, or a new batch while
        another is still pending raise :class:`PlanConflictError`.
        """
        kind = rows.plan_kind(plan)
        lg = self._t.batch_ledger
        ref = batch_ref(plan.connector, plan.task_id, plan.batch_id)
        with self._engine.begin() as conn:
            self._lock_task(conn, plan.connector, plan.task_id)
            registered = rows.registered_kind(conn, self._t, plan.connector)
            if kind is not None and registered is not None and registered != kind:
                raise PlanConflictError(f"{ref}: a {kind} plan for a connector registered as {registered}")
            row = conn.execute(select(lg).where(*self._ledger_key(plan)).with_for_update()).mappings().first()
            if row is not None:
                stored = record_from_row(row)
                if not same_ranges(stored.ranges, plan.ranges):
                    raise PlanConflictError(
                        f"{ref} was recorded with ranges {rows.fmt_ranges(stored.ranges)}, now offered with "
                        f"{rows.fmt_ranges(plan.ranges)}: a recorded batch must be re-run identically"
                    )
                if stored.status == PLANNED:
                    conn.execute(update(lg).where(*self._ledger_key(plan)).values(attempts=lg.c.attempts + 1))
                return stored.plan
            last, pending = conn.execute(
                select(
                    func.coalesce(func.max(lg.c.batch_id), -1),
                    func.min(lg.c.batch_id).filter(lg.c.status == PLANNED),
                ).where(lg.c.connector == plan.connector, lg.c.task_id == plan.task_id)
            ).one()
            if pending is not None:
                raise PlanConflictError(
                    f"{ref}: batch {pending} of the same task is recorded but not committed; "
                    "re-run it (pending_plan) before planning a new batch"
                )
            if plan.batch_id <= last:
                raise PlanConflictError(f"{ref}: batch ids must increase, the last recorded is {last}")
            if kind is not None:
                rows.register(conn, self._t, plan.connector, kind)
            conn.execute(
                lg.insert().values(
                    connector=plan.connector,
                    task_id=plan.task_id,
                    batch_id=plan.batch_id,
                    ranges=ranges_to_json(plan.ranges),
                    sink_state=dict(plan.sink_state),
                    status=PLANNED,
                )
            )
        return BatchPlan(plan.connector, plan.task_id, plan.batch_id, plan.ranges, dict(plan.sink_state))

    def restate_plan(self, plan: BatchPlan, sink_state: dict[str, str]) -> BatchPlan:
        """Replace a still PLANNED plan's ``sink_state`` (a sink reconfigured since it was recorded)."""
        lg = self._t.batch_ledger
        with self._engine.begin() as conn:
            changed = conn.execute(
                update(lg)
                .where(*self._ledger_key(plan), lg.c.status == PLANNED)
                .values(sink_state=dict(sink_state))
            ).rowcount
        if changed != 1:
            ref = batch_ref(plan.connector, plan.task_id, plan.batch_id)
            raise PlanConflictError(f"{ref} is not a recorded, uncommitted plan: its state cannot change")
        return replace(plan, sink_state=dict(sink_state))

    def commit(
        self, plan: BatchPlan, *, connection: Connection | None = None, rings: Collection[str] = ()
    ) -> None:
        """Move positions to ``plan.end_positions()`` and mark the batch COMMITTED, atomically.

        With ``connection`` the work joins the caller's open transaction (nothing is committed
        here: the caller's ``with engine.begin()`` block commits data and positions together, or
        rolls both back). Without it the store uses a transaction of its own.
        ``rings``: topics the batch wrote, whose sinks on every worker of this store wake when the
        commit is in (activities.doorbells; PostgreSQL delivers a NOTIFY only at its commit).
        """
        if connection is not None:
            self._commit(connection, plan, rings)
            return
        with self._engine.begin() as conn:
            self._commit(conn, plan, rings)

    def _commit(self, conn: Connection, plan: BatchPlan, rings: Collection[str] = ()) -> None:
        lg = self._t.batch_ledger
        ref = batch_ref(plan.connector, plan.task_id, plan.batch_id)
        row = conn.execute(select(lg).where(*self._ledger_key(plan)).with_for_update()).mappings().first()
        if row is None:
            raise PlanNotRecordedError(f"{ref} was never recorded: record_plan() must run before the batch")
        stored = record_from_row(row)
        if stored.status == COMMITTED:
            raise BatchAlreadyCommittedError(f"{ref} is already committed (at {stored.committed_at})")
        if not same_ranges(stored.ranges, plan.ranges):
            offered, recorded = rows.fmt_ranges(plan.ranges), rows.fmt_ranges(stored.ranges)
            raise PlanConflictError(f"{ref}: committing ranges {offered} but {recorded} were recorded")
        self._check_not_backwards(conn, plan, ref)
        for r in plan.ranges:
            ok = rows.upsert_position(
                conn, self._t, plan.connector, r.key, r.end, plan.task_id, plan.batch_id, guarded=True
            )
            if not ok:  # a concurrent writer got past the check above
                raise PositionRegressionError(f"{ref}: position of {r.key} moved past {r.end} concurrently")
        conn.execute(
            update(lg)
            .where(*self._ledger_key(plan), lg.c.status == PLANNED)
            .values(status=COMMITTED, committed_at=func.now())
        )
        if rings:
            conn.execute(
                text("SELECT pg_notify(:channel, key) FROM unnest(CAST(:keys AS text[])) AS key"),
                {"channel": DOORBELL_CHANNEL, "keys": sorted(doorbell_key(self.schema, t) for t in rings)},
            )

    def _check_not_backwards(self, conn: Connection, plan: BatchPlan, ref: str) -> None:
        stored = rows.read_positions(
            conn, self._t, plan.connector, lock=True, keys=[r.key for r in plan.ranges]
        )
        regressions = [
            f"{r.key}: stored {stored[r.key]} > batch end {r.end}"
            for r in plan.ranges
            if r.key in stored and stored[r.key] > r.end
        ]
        if regressions:
            raise PositionRegressionError(
                f"{ref} would move positions backwards ({'; '.join(regressions)}); refusing to commit"
            )

    def batches(self, connector: str, task_id: int | None = None, limit: int = 100) -> list[BatchRecord]:
        """Newest batches first, for status pages and inspection."""
        lg = self._t.batch_ledger
        q = select(lg).where(lg.c.connector == connector)
        if task_id is not None:
            q = q.where(lg.c.task_id == task_id)
        q = q.order_by(lg.c.batch_id.desc(), lg.c.task_id).limit(limit)
        with self._engine.connect() as conn:
            return [record_from_row(row) for row in conn.execute(q).mappings()]

    def nudge(self, connector: str) -> None:
        """Tell every worker of this store to hurry the connector's task heartbeats, so that a
        cancel its workflow is sending reaches idle tasks within a second (activities.nudges)."""
        with self._engine.begin() as conn:
            conn.execute(
                text("SELECT pg_notify(:channel, :key)"),
                {"channel": CHANNEL, "key": nudge_key(self.schema, connector)},
            )

    def prune_ledger(self, connector: str, keep_last: int = 1000) -> int:
        """Delete committed ledger rows beyond the newest ``keep_last`` per task; return how many.

        Pending rows are never pruned, and ``keep_last >= 1`` keeps each task's last batch id so
        batch numbering continues after a prune.
        """
        if keep_last < 1:
            raise ValueError(f"connector {connector!r}: keep_last must be >= 1, got {keep_last}")
        sql = text(
            f'DELETE FROM "{self.schema}".batch_ledger AS l USING ('
            "  SELECT task_id, batch_id,"
            "    row_number() OVER (PARTITION BY task_id ORDER BY batch_id DESC) AS rn"
            f'  FROM "{self.schema}".batch_ledger WHERE connector = :c'
            ") AS r "
            "WHERE l.connector = :c AND l.task_id = r.task_id AND l.batch_id = r.batch_id "
            f"AND r.rn > :keep AND l.status = '{COMMITTED}'"
        )
        with self._engine.begin() as conn:
            return int(conn.execute(sql, {"c": connector, "keep": keep_last}).rowcount)

    # ---- backfill requests (connectors.backfills) -----------------------------------------

    def add_backfill(self, connector: str, tables: list[str], condition: str) -> Backfill:
        with self._engine.begin() as conn:
            return backfills.add(conn, self._t, connector, tables, condition)

    def backfills(self, connector: str) -> list[Backfill]:
        with self._engine.connect() as conn:
            return backfills.listed(conn, self._t, connector)

    def cancel_backfills(self, connector: str, request: int | None = None) -> list[int]:
        with self._engine.begin() as conn:
            return backfills.cancel(conn, self._t, connector, request)

    def delete_connector(self, connector: str) -> None:
        """Remove the connector's offsets, positions, ledger and backfill requests; mark it deleted
        in the registry."""
        t = self._t
        with self._engine.begin() as conn:
            backfills.forget(conn, t, connector)
            for table in (t.positions, t.batch_ledger):
                conn.execute(delete(table).where(table.c.connector == connector))
            conn.execute(
                update(t.connector_registry)
                .where(t.connector_registry.c.name == connector)
                .values(deleted_at=func.now())
            )

    def connectors(self, *, include_deleted: bool = False) -> dict[str, str]:
        """Registered connector names and their kind ('source' or 'sink')."""
        reg = self._t.connector_registry
        q = select(reg.c.name, reg.c.kind).order_by(reg.c.name)
        if not include_deleted:
            q = q.where(reg.c.deleted_at.is_(None))
        with self._engine.connect() as conn:
            return {row.name: row.kind for row in conn.execute(q)}

    # ---- helpers ---------------------------------------------------------------------------

    def _ledger_key(self, plan: BatchPlan) -> tuple[Any, ...]:
        lg = self._t.batch_ledger
        return (
            lg.c.connector == plan.connector,
            lg.c.task_id == plan.task_id,
            lg.c.batch_id == plan.batch_id,
        )

    def _lock_task(self, conn: Connection, connector: str, task_id: int) -> None:
        key = advisory_lock_key(f"{self.schema}/{connector}/{task_id}")
        conn.execute(select(func.pg_advisory_xact_lock(key)))


class StorePositionCommitter:
    """Commits plans on a sink's own connection; all a transactional sink may do with the store."""

    def __init__(self, store: OffsetStore) -> None:
        self._store = store

    def same_database(self, database_url: str) -> bool:
        return self._store.same_database(database_url)

    def commit(self, plan: BatchPlan, connection: Any) -> None:
        self._store.commit(plan, connection=connection)


__all__ = ["OffsetStore", "StorePositionCommitter"]
