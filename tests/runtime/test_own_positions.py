"""Planning from the attempt's own record of its positions (activities.runner.OwnPositions), against
the real offset store: an idle task plans without one store round trip, every batch still starts
where the last one committed, and a change of the task's partitions reads the store again (another
task's commits there count)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import pytest
from sqlalchemy import event

from sluice.activities.context import RuntimeContext
from sluice.activities.runner import TaskSetup, next_plan
from sluice.connectors.converters import converter_for
from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.planner import OffsetView
from sluice.connectors.positions import PartitionKey, Position
from sluice.deploy.local.config import StackConfig
from sluice.worker.settings import settings

CONNECTOR = "own-positions"


class Offsets(OffsetView):
    """A task's partitions as plain integer ends, changed by the test."""

    def __init__(self, ends: dict[str, int]) -> None:
        self.ends = ends

    def partitions(self) -> list[PartitionKey]:
        return [PartitionKey(p) for p in self.ends]

    def earliest(self) -> dict[PartitionKey, Position]:
        return {PartitionKey(p): Position((0,)) for p in self.ends}

    def latest(self, committed: Mapping[PartitionKey, Position]) -> dict[PartitionKey, Position]:
        return {PartitionKey(p): Position((end,)) for p, end in self.ends.items()}


@pytest.fixture
def ctx(stack_config: StackConfig, fresh_schema: str) -> Iterator[RuntimeContext]:
    runtime = dataclasses.replace(
        settings().runtime, database_url=stack_config.database_url, store_schema=fresh_schema
    )
    context = RuntimeContext(runtime)
    context.store.migrate()
    yield context
    context.close()


def setup_for(ctx: RuntimeContext) -> TaskSetup:
    """A fresh task attempt (its own record starts empty)."""
    return TaskSetup(ctx, CONNECTOR, {}, converter_for({}))


@contextmanager
def statements(ctx: RuntimeContext) -> Iterator[list[str]]:
    """Every SQL statement the store runs inside the block."""
    seen: list[str] = []

    def note(conn: object, cursor: object, sql: str, *args: object) -> None:
        seen.append(sql)

    event.listen(ctx.store.engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(ctx.store.engine, "before_cursor_execute", note)


def spans(plan: BatchPlan | None) -> dict[str, tuple[int, int]]:
    assert plan is not None
    return {r.partition: (int(r.start.key[0]), int(r.end.key[0])) for r in plan.ranges}


def run_and_commit(setup: TaskSetup, plan: BatchPlan | None) -> BatchPlan:
    """What a runner does with a plan: record it, (run it,) commit it, tell the task's record."""
    assert plan is not None
    stored = setup.ctx.store.record_plan(plan)
    setup.ctx.store.commit(stored)
    setup.positions.committed_batch(stored)
    return stored


def test_an_idle_task_plans_without_the_store_and_each_batch_starts_where_the_last_committed(
    ctx: RuntimeContext,
) -> None:
    setup, view = setup_for(ctx), Offsets({"a": 5, "b": 3})
    with statements(ctx) as first:
        plan, rerun = next_plan(setup, 0, view, None)
    assert first, "the first planning of an attempt reads the store"
    assert not rerun and plan is not None and plan.batch_id == 0
    assert spans(plan) == {"a": (0, 5), "b": (0, 3)}
    run_and_commit(setup, plan)

    with statements(ctx) as idle:
        for _ in range(5):
            assert next_plan(setup, 0, view, None) == (None, False)
    assert idle == []

    view.ends["a"] = 9
    with statements(ctx) as planning:
        plan, _ = next_plan(setup, 0, view, 2)
    assert planning == []
    assert plan is not None and plan.batch_id == 1 and spans(plan) == {"a": (5, 7)}
    run_and_commit(setup, plan)
    plan, _ = next_plan(setup, 0, view, None)
    assert plan is not None and plan.batch_id == 2 and spans(plan) == {"a": (7, 9)}
    run_and_commit(setup, plan)
    # What the store holds is what the record held: a new attempt plans the same (nothing).
    assert ctx.store.committed_positions(CONNECTOR) == {
        PartitionKey("a"): Position((9,)),
        PartitionKey("b"): Position((3,)),
    }
    assert next_plan(setup_for(ctx), 0, view, None) == (None, False)


def test_new_partitions_read_the_store_again(ctx: RuntimeContext) -> None:
    """Queues dealt again (a topic starts matching topics.regex): task 0 now reads ``c``, where
    task 1 committed up to 4; it starts there, not from the beginning."""
    mine, theirs = setup_for(ctx), setup_for(ctx)
    view = Offsets({"a": 2})
    run_and_commit(mine, next_plan(mine, 0, view, None)[0])
    other = BatchPlan(CONNECTOR, 1, 0, (PartitionRange("c", Position((0,)), Position((4,))),))
    run_and_commit(theirs, other)

    view.ends["c"] = 6
    with statements(ctx) as planning:
        plan, _ = next_plan(mine, 0, view, None)
    assert planning, "a partition the record does not cover is read from the store"
    assert plan is not None and plan.batch_id == 1 and spans(plan) == {"c": (4, 6)}


def test_a_pending_plan_is_rerun_and_the_store_read_after_it(ctx: RuntimeContext) -> None:
    """An attempt that died between recording and committing: the next attempt re-runs the plan
    as it was, then plans on from the store (a re-run reads no positions to remember)."""
    view = Offsets({"a": 4})
    died = setup_for(ctx)
    plan, _ = next_plan(died, 0, view, None)
    assert plan is not None
    ctx.store.record_plan(plan)  # ... and the worker is gone

    attempt = setup_for(ctx)
    again, rerun = next_plan(attempt, 0, view, None)
    assert rerun and again == plan
    run_and_commit(attempt, again)
    view.ends["a"] = 6
    with statements(ctx) as planning:
        plan, rerun = next_plan(attempt, 0, view, None)
    assert planning and not rerun
    assert plan is not None and plan.batch_id == 1 and spans(plan) == {"a": (4, 6)}
