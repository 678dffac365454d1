"""The offset store against the real PostgreSQL of the local stack (a fresh schema per test)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

from sluice.activities.store import (
    BatchAlreadyCommittedError,
    OffsetStore,
    PlanConflictError,
    PlanNotRecordedError,
    PositionRegressionError,
)
from sluice.activities.store.schema import MIGRATIONS, current_version
from sluice.connectors.model import BatchPlan, PartitionRange, queue_partition
from sluice.deploy.local.config import StackConfig
from tests.store.helpers import offsets

LATEST = max(m.version for m in MIGRATIONS)


def sink_plan(batch_id: int, start: int, end: int, *, connector: str = "pg-sink", task: int = 0) -> BatchPlan:
    return BatchPlan(
        connector,
        task,
        batch_id,
        (
            PartitionRange(queue_partition("broker-a", 0), start, end, topic="orders"),
            PartitionRange(queue_partition("broker-a", 1), start, end + 5, topic="orders"),
        ),
    )


def source_plan(
    batch_id: int, start: int, end: int, *, connector: str = "file-src", task: int = 0
) -> BatchPlan:
    return BatchPlan(connector, task, batch_id, (PartitionRange("/data/a.csv", start, end),))


# ---- migrations -------------------------------------------------------------------------------


def test_migrate_is_idempotent(store: OffsetStore, pg_engine: Engine) -> None:
    store.migrate()
    store.migrate()
    with pg_engine.connect() as conn:
        versions = conn.execute(
            text(f'SELECT version FROM "{store.schema}".schema_version ORDER BY 1')
        ).scalars()
        assert list(versions) == [m.version for m in MIGRATIONS]
        assert current_version(conn, store.schema) == LATEST


@pytest.fixture
def unborn_schema(pg_engine: Engine) -> Iterator[str]:
    """A schema name that does not exist yet, so migrate() must create it (and race on it)."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    with pg_engine.begin() as conn:
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))


def test_concurrent_migrations_from_two_workers_both_succeed(
    stack_config: StackConfig, unborn_schema: str
) -> None:
    # Separate engines, like two worker processes starting at the same moment.
    engines = [create_engine(stack_config.database_url) for _ in range(4)]
    barrier = threading.Barrier(len(engines))
    errors: list[BaseException] = []

    def run(engine: Engine) -> None:
        try:
            barrier.wait()
            OffsetStore("", schema=unborn_schema, engine=engine).migrate()
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(e,)) for e in engines]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        with engines[0].connect() as conn:
            rows = conn.execute(
                text(f'SELECT version FROM "{unborn_schema}".schema_version ORDER BY 1')
            ).all()
        assert [r.version for r in rows] == [m.version for m in MIGRATIONS]
    finally:
        for e in engines:
            e.dispose()


def test_bad_schema_name_is_refused(stack_config: StackConfig) -> None:
    with pytest.raises(ValueError, match="offset store schema"):
        OffsetStore(stack_config.database_url, schema='x"; DROP TABLE y; --')


# ---- plan / commit ----------------------------------------------------------------------------


def test_record_pending_commit_cycle(store: OffsetStore) -> None:
    assert store.last_batch_id("pg-sink", 0) == -1
    assert store.pending_plan("pg-sink", 0) is None
    plan = sink_plan(0, 0, 10)

    assert store.record_plan(plan) == plan
    assert store.pending_plan("pg-sink", 0) == plan
    assert store.last_batch_id("pg-sink", 0) == 0
    assert store.committed_positions("pg-sink") == {}

    store.commit(plan)
    assert offsets(store.committed_positions("pg-sink")) == {"orders/broker-a:0": 10, "orders/broker-a:1": 15}
    assert store.committed_positions("pg-sink") == plan.end_positions()
    assert store.pending_plan("pg-sink", 0) is None
    [record] = store.batches("pg-sink")
    assert (record.status, record.ranges, record.attempts) == ("COMMITTED", plan.ranges, 1)
    assert record.committed_at is not None
    assert store.connectors() == {"pg-sink": "sink"}

    nxt = sink_plan(1, 10, 20)
    store.record_plan(nxt)
    store.commit(nxt)
    assert offsets(store.committed_positions("pg-sink")) == {"orders/broker-a:0": 20, "orders/broker-a:1": 25}
    assert [b.batch_id for b in store.batches("pg-sink")] == [1, 0]


def test_source_offsets_are_keyed_by_partition(store: OffsetStore) -> None:
    plan = source_plan(0, 0, 42)
    store.record_plan(plan)
    store.commit(plan)
    assert offsets(store.committed_positions("file-src")) == {"/data/a.csv": 42}
    assert offsets(store.committed_positions("file-src", task_id=0)) == {"/data/a.csv": 42}
    assert store.committed_positions("file-src", task_id=1) == {}
    assert store.connectors() == {"file-src": "source"}


def test_rerecording_the_same_plan_is_a_no_op_that_counts_attempts(store: OffsetStore) -> None:
    first = BatchPlan("pg-sink", 0, 0, sink_plan(0, 0, 10).ranges, {"rows_before": "7"})
    store.record_plan(first)
    again = BatchPlan("pg-sink", 0, 0, tuple(reversed(first.ranges)), {"rows_before": "9"})
    stored = store.record_plan(again)
    assert stored.sink_state == {"rows_before": "7"}  # captured the first time, kept for the re-run
    assert stored.ranges == first.ranges
    assert store.batches("pg-sink")[0].attempts == 2


def test_restating_a_pending_plan_replaces_its_state_for_every_later_rerun(store: OffsetStore) -> None:
    first = BatchPlan("pg-sink", 0, 0, sink_plan(0, 0, 10).ranges, {"file.path": "/a", "file.length": "70"})
    store.record_plan(first)
    restated = store.restate_plan(first, {"file.path": "/b", "file.length": "0"})
    assert restated.sink_state == {"file.path": "/b", "file.length": "0"}
    assert store.pending_plan("pg-sink", 0) == restated
    assert store.record_plan(first).sink_state == restated.sink_state  # a crash, then the re-run
    store.commit(first)
    with pytest.raises(PlanConflictError, match="task 0 batch 0 is not a recorded, uncommitted plan"):
        store.restate_plan(first, {"file.path": "/c", "file.length": "0"})
    assert store.batches("pg-sink")[0].plan.sink_state == restated.sink_state


def test_recording_different_ranges_for_a_batch_conflicts(store: OffsetStore) -> None:
    store.record_plan(sink_plan(0, 0, 10))
    with pytest.raises(
        PlanConflictError, match=r"connector 'pg-sink' task 0 batch 0 was recorded with ranges"
    ):
        store.record_plan(sink_plan(0, 0, 11))
    assert store.pending_plan("pg-sink", 0) == sink_plan(0, 0, 10)


def test_new_batch_while_one_is_pending_conflicts(store: OffsetStore) -> None:
    store.record_plan(sink_plan(0, 0, 10))
    with pytest.raises(PlanConflictError, match="batch 0 of the same task is recorded but not committed"):
        store.record_plan(sink_plan(1, 10, 20))


def test_batch_ids_must_increase_even_after_a_prune(store: OffsetStore) -> None:
    for plan in (sink_plan(0, 0, 10), sink_plan(1, 10, 20), sink_plan(2, 20, 30)):
        store.record_plan(plan)
        store.commit(plan)
    assert store.prune_ledger("pg-sink", keep_last=1) == 2
    with pytest.raises(PlanConflictError, match="batch ids must increase, the last recorded is 2"):
        store.record_plan(BatchPlan("pg-sink", 0, 1, (PartitionRange("broker-a:2", 0, 1, "orders"),)))


def test_commit_twice_is_refused(store: OffsetStore) -> None:
    plan = sink_plan(0, 0, 10)
    store.record_plan(plan)
    store.commit(plan)
    with pytest.raises(
        BatchAlreadyCommittedError, match="connector 'pg-sink' task 0 batch 0 is already committed"
    ):
        store.commit(plan)


def test_commit_without_record_is_refused(store: OffsetStore) -> None:
    with pytest.raises(PlanNotRecordedError, match="connector 'pg-sink' task 3 batch 5 was never recorded"):
        store.commit(sink_plan(5, 0, 10, task=3))
    assert store.committed_positions("pg-sink") == {}


def test_commit_with_other_ranges_than_recorded_is_refused(store: OffsetStore) -> None:
    store.record_plan(sink_plan(0, 0, 10))
    with pytest.raises(PlanConflictError, match="task 0 batch 0: committing ranges"):
        store.commit(sink_plan(0, 0, 12))
    assert store.committed_positions("pg-sink") == {}


def test_commit_never_moves_a_position_backwards(store: OffsetStore) -> None:
    store.set_positions("pg-sink", {"orders/broker-a:0": 100, "orders/broker-a:1": 3})
    plan = sink_plan(0, 50, 80)
    store.record_plan(plan)
    with pytest.raises(
        PositionRegressionError, match=r"task 0 batch 0 would move positions backwards"
    ) as err:
        store.commit(plan)
    assert "orders/broker-a:0: stored 100 > batch end 80" in str(err.value)
    # Nothing of the refused commit is visible: positions as before, batch still pending.
    assert offsets(store.committed_positions("pg-sink")) == {"orders/broker-a:0": 100, "orders/broker-a:1": 3}
    assert store.pending_plan("pg-sink", 0) == plan


def test_pending_plan_survives_a_crash(stack_config: StackConfig, store: OffsetStore) -> None:
    plan = BatchPlan("pg-sink", 2, 0, sink_plan(0, 0, 10).ranges, {"k": "v"})
    store.record_plan(plan)
    # The worker dies before committing; a new process builds a new store with a new engine.
    engine = create_engine(stack_config.database_url)
    try:
        restarted = OffsetStore(stack_config.database_url, schema=store.schema, engine=engine)
        restarted.migrate()
        pending = restarted.pending_plan("pg-sink", 2)
        assert pending == plan
        assert restarted.record_plan(pending) == plan  # re-run: identical, no conflict
        restarted.commit(pending)
        assert restarted.committed_positions("pg-sink", 2) == plan.end_positions()
    finally:
        engine.dispose()


# ---- the caller's transaction ----------------------------------------------------------------


def _make_data_table(engine: Engine, schema: str) -> None:
    with engine.begin() as conn:
        conn.execute(text(f'CREATE TABLE "{schema}".target (id int PRIMARY KEY, name text)'))


def test_commit_in_a_rolled_back_caller_transaction_leaves_nothing(
    store: OffsetStore, pg_engine: Engine
) -> None:
    _make_data_table(pg_engine, store.schema)
    plan = sink_plan(0, 0, 10)
    store.record_plan(plan)

    class Crash(Exception):
        pass

    with pytest.raises(Crash), store.transaction() as conn:
        conn.execute(text(f"INSERT INTO \"{store.schema}\".target VALUES (1, 'a'), (2, 'b')"))
        store.commit(plan, connection=conn)
        raise Crash  # the worker dies after commit() but before the transaction commits

    with pg_engine.connect() as conn:
        assert conn.execute(text(f'SELECT count(*) FROM "{store.schema}".target')).scalar_one() == 0
    assert store.committed_positions("pg-sink") == {}
    assert store.pending_plan("pg-sink", 0) == plan

    with store.transaction() as conn:
        conn.execute(text(f"INSERT INTO \"{store.schema}\".target VALUES (1, 'a'), (2, 'b')"))
        store.commit(plan, connection=conn)
    with pg_engine.connect() as conn:
        rows = conn.execute(text(f'SELECT id, name FROM "{store.schema}".target ORDER BY id')).all()
    assert [tuple(r) for r in rows] == [(1, "a"), (2, "b")]
    assert store.committed_positions("pg-sink") == plan.end_positions()


# ---- admin ------------------------------------------------------------------------------------


def test_set_positions_rewinds_and_discards_pending_plans(store: OffsetStore) -> None:
    plan = sink_plan(0, 0, 10)
    store.record_plan(plan)
    store.commit(plan)
    store.record_plan(sink_plan(1, 10, 20))
    store.set_positions("pg-sink", {"orders/broker-a:0": 2})
    assert offsets(store.committed_positions("pg-sink")) == {"orders/broker-a:0": 2, "orders/broker-a:1": 15}
    assert store.pending_plan("pg-sink", 0) is None
    assert store.last_batch_id("pg-sink", 0) == 0  # numbering continues after the committed batch


def test_set_positions_refuses_malformed_sink_keys(store: OffsetStore) -> None:
    store.set_positions("pg-sink", {"orders/broker-a:0": 1})
    with pytest.raises(ValueError, match=r"connector 'pg-sink' is a sink: position key 'broker-a:0'"):
        store.set_positions("pg-sink", {"broker-a:0": 1})
    with pytest.raises(ValueError, match=r"position of 'orders/broker-a:0': an offset position must be >= 0"):
        store.set_positions("pg-sink", {"orders/broker-a:0": -1})


def test_delete_connector_removes_offsets_positions_and_ledger(store: OffsetStore) -> None:
    for p in (sink_plan(0, 0, 10), source_plan(0, 0, 5)):
        store.record_plan(p)
        store.commit(p)
    store.record_plan(sink_plan(1, 10, 20))
    store.delete_connector("pg-sink")
    assert store.committed_positions("pg-sink") == {}
    assert store.batches("pg-sink") == []
    assert store.last_batch_id("pg-sink", 0) == -1
    assert store.connectors() == {"file-src": "source"}
    assert store.connectors(include_deleted=True) == {"file-src": "source", "pg-sink": "sink"}
    assert offsets(store.committed_positions("file-src")) == {"/data/a.csv": 5}
    store.record_plan(sink_plan(0, 0, 10))  # a re-created connector starts over
    assert store.connectors() == {"file-src": "source", "pg-sink": "sink"}


def test_prune_keeps_the_newest_committed_batches_per_task(store: OffsetStore) -> None:
    for task in (0, 1):
        for b in range(5):
            p = BatchPlan("pg-sink", task, b, (PartitionRange(f"broker-a:{task}", b, b + 1, "t"),))
            store.record_plan(p)
            if b < 4:
                store.commit(p)
    assert store.prune_ledger("pg-sink", keep_last=2) == 6  # per task: batches 0..2 committed and old
    for task in (0, 1):
        assert [(b.batch_id, b.status) for b in store.batches("pg-sink", task)] == [
            (4, "PLANNED"),
            (3, "COMMITTED"),
        ]
        assert store.last_batch_id("pg-sink", task) == 4
    with pytest.raises(ValueError, match="keep_last must be >= 1"):
        store.prune_ledger("pg-sink", keep_last=0)


@pytest.mark.parametrize(
    ("url", "same"),
    [
        ("postgresql://sluice@127.0.0.1:15432/sluice", True),
        ("postgresql+psycopg://other:pw@localhost:15432/sluice", True),
        ("postgresql://sluice@127.0.0.1:15432/other", False),
        ("postgresql://sluice@127.0.0.1:5432/sluice", False),
        ("postgresql://sluice@db.example:15432/sluice", False),
    ],
)
def test_same_database_compares_host_port_and_database(url: str, same: bool) -> None:
    store = OffsetStore("postgresql+psycopg://sluice@127.0.0.1:15432/sluice")
    assert store.same_database(url) is same
