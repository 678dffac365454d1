"""What the source and sink runners share, and the shape the task activity drives."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from sluice.activities.metrics import TaskMeters
from sluice.connectors.api import CommitListener, RestatesPlans, TakesBackfills
from sluice.connectors.model import BatchPlan, DataLossPolicy
from sluice.connectors.planner import PlanRequest, PositionView, plan_next
from sluice.connectors.positions import PartitionKey, Position

if TYPE_CHECKING:
    from sluice.activities.context import RuntimeContext
    from sluice.connectors.api import SinkTask, SourceTask
    from sluice.connectors.converters import Converter
    from sluice.connectors.transforms import Transform


UNNAMED_TASK = "-"

log = logging.getLogger(__name__)


@dataclass
class OwnPositions:
    """What one task attempt knows of its positions and ledger without asking the store again.

    Within an attempt, every write to the task's own positions and ledger rows is the task's: it
    records a plan, runs it and commits it before planning again (any error ends the attempt), and
    offsets change by hand only while the connector is STOPPED, which ends the attempt too. So once
    the store has been read with no plan pending, what it holds for the task is this record plus
    the task's own moves and commits, and an idle task plans without a store round trip (three
    reads a poll was most of a hundred idle connectors' cost, docs/scaling.md).

    It holds while the task's partitions stay the ones it was read for: a new file, or a topic
    that starts matching ``topics.regex`` (its queues are dealt to the tasks again), makes the
    next planning read the store, because another task may have committed positions there.
    """

    partitions: frozenset[PartitionKey] | None = None  # None: nothing known, read the store
    next_batch_id: int = 0
    committed: dict[PartitionKey, Position] = field(default_factory=dict)

    def load(self, partitions: frozenset[PartitionKey], next_batch_id: int,
             committed: dict[PartitionKey, Position]) -> None:  # fmt: skip
        self.partitions, self.next_batch_id, self.committed = partitions, next_batch_id, dict(committed)

    def moved(self, positions: Mapping[PartitionKey, Position]) -> None:
        self.committed.update(positions)

    def committed_batch(self, plan: BatchPlan) -> None:
        """``plan`` ran and committed (its positions and ledger row are in the store now)."""
        if self.partitions is None:  # a re-run read no positions: the next planning reads them
            return
        self.committed.update(plan.end_positions())
        self.next_batch_id = plan.batch_id + 1

    def forget(self) -> None:
        self.partitions = None


@dataclass(frozen=True)
class TaskSetup:
    """One task's resolved pieces: built once per activity attempt from its (secret-resolved) config."""

    ctx: RuntimeContext
    connector: str
    config: Mapping[str, Any]
    converter: Converter
    chain: list[Transform] = field(default_factory=list)
    # The last planning's backlog per partition (PlanDecision.backlog), for the lag in status.
    backlog: dict[str, int | None] = field(default_factory=dict)
    # The task's Prometheus series (the task activity's; a standalone runner's stay unscraped).
    meters: TaskMeters = field(default_factory=lambda: TaskMeters(UNNAMED_TASK, -1, "source"))
    # This attempt's own record of its positions (OwnPositions): planning reads the store once.
    positions: OwnPositions = field(default_factory=OwnPositions)

    @property
    def data_loss(self) -> DataLossPolicy:
        return DataLossPolicy(self.config.get("data.loss", "fail"))

    @property
    def poll_interval_s(self) -> float:
        return int(self.config.get("poll.interval.ms", 1000)) / 1000

    def idle_wait_s(self, empty_polls: int) -> float:
        """How long to wait after ``empty_polls`` empty polls in a row (1 for the first)."""
        idle_max_s = int(self.config.get("poll.idle.max.ms", 0)) / 1000
        return idle_wait_s(self.poll_interval_s, idle_max_s, empty_polls)


#: The share of an idle wait by which an aligned one may be longer (``aligned_wait_s``).
ALIGN_SLACK = 0.02


def idle_wait_s(interval_s: float, idle_max_s: float, empty_polls: int) -> float:
    """``poll.interval.ms`` after the first empty poll, doubling after each further one up to
    ``poll.idle.max.ms`` (when that is above the interval; 0 keeps the interval).

    Each poll of an idle task plans from the offset store (three reads) and asks its source or
    broker: about 6 ms of a worker's Python a second per connector at the 1 s default, so a
    hundred idle connectors on one worker took most of a core (docs/scaling.md). Backing off
    trades that for the first record after a quiet spell waiting up to ``poll.idle.max.ms``; a
    poll that finds data starts the count again."""
    if idle_max_s <= interval_s:
        return interval_s
    return min(interval_s * 2 ** min(max(empty_polls - 1, 0), 30), idle_max_s)


def aligned_wait_s(wait_s: float, now_s: float) -> float:
    """How long to wait so the wait ends on the next multiple of ``wait_s`` of the machine's
    monotonic clock (``now_s``): one whole ``wait_s`` from a wake-up that was itself aligned, less
    after a batch, and never more than ``wait_s`` by over ALIGN_SLACK of it (a wake-up a hair before
    its multiple waits for the next one instead of polling twice).

    Why: idle tasks waiting the same time then wake together and poll one after another, and a poll
    that follows another runs on warm caches. Measured on this machine's dummy source: about 80 µs
    of Python after another poll, 380-450 µs alone (its code and objects evicted by the seconds in
    between), and the alone kind was all of a hundred idle connectors' cost (docs/scaling.md). It is
    a timer's slack, as the kernel's timer coalescing: the first wait after a batch may be
    shorter, so ``poll.idle.max.ms`` still bounds the latency."""
    if wait_s <= 0:
        return 0.0
    left = wait_s - now_s % wait_s
    return left + wait_s if left < ALIGN_SLACK * wait_s else left


def next_plan(
    setup: TaskSetup,
    task_id: int,
    view: PositionView,
    max_units: int | None,
    backfills: TakesBackfills | None = None,
) -> tuple[BatchPlan | None, bool]:
    """The batch a task runs next and whether it is a re-run (plan_next over the store's state).

    A source task that ``TakesBackfills`` is handed its connector's backfill requests first (one
    indexed read of the store), so the planning applies a new one in the batch it plans.

    Positions the planner moved (a rotated file followed, a data-loss skip) are stored before the
    caller records the new plan, so the commit that follows never moves a position backwards.
    The store is read only when the attempt's own record (OwnPositions) does not cover the task's
    partitions; the runner reports each commit to it (``setup.positions.committed_batch``).
    """
    if backfills is not None:
        backfills.take_backfills(setup.ctx.store.backfills(setup.connector))
    known = setup.positions
    decision = None
    if known.partitions is not None:
        request = _request(setup, task_id, known.next_batch_id, known.committed, None, max_units)
        decision = plan_next(request, view)
        if decision.partitions != known.partitions:
            known.forget()  # other partitions now: what another task committed there counts
            decision = None
    if decision is None:
        store = setup.ctx.store
        pending = store.pending_plan(setup.connector, task_id)
        next_batch_id = store.last_batch_id(setup.connector, task_id) + 1
        committed = {} if pending else store.committed_positions(setup.connector)
        decision = plan_next(_request(setup, task_id, next_batch_id, committed, pending, max_units), view)
        if not decision.rerun:
            known.load(decision.partitions, next_batch_id, committed)
    setup.backlog.clear()
    setup.backlog.update(decision.backlog)
    if not decision.rerun and decision.moved:
        setup.ctx.store.move_positions(setup.connector, task_id, decision.moved)
        known.moved(decision.moved)
    return decision.plan, decision.rerun


def sink_plan(setup: TaskSetup, sink: SinkTask, plan: BatchPlan, rerun: bool) -> BatchPlan:
    """A planned batch of a sink task as it runs: a re-run with its recorded state (restated where
    the task's config changed it: RestatesPlans), or a new plan recorded with ``sink.prepare``'s
    state before anything is written."""
    if rerun:
        state = sink.restate(plan) if isinstance(sink, RestatesPlans) else None
        return plan if state is None else setup.ctx.store.restate_plan(plan, state)
    return setup.ctx.store.record_plan(replace(plan, sink_state=sink.prepare(plan)))


def tell_committed(setup: TaskSetup, source: SourceTask, plan: BatchPlan) -> None:
    """A CommitListener source hears that ``plan`` committed; its failure is logged, not raised:
    the batch is committed, and the task catches up at its next planning."""
    if isinstance(source, CommitListener):
        try:
            source.committed(plan)
        except Exception:
            log.warning("connector %s: after-commit step of batch %s failed", setup.connector,
                        plan.batch_id, exc_info=True)  # fmt: skip


def _request(
    setup: TaskSetup,
    task_id: int,
    next_batch_id: int,
    committed: Mapping[PartitionKey, Position],
    pending: BatchPlan | None,
    max_units: int | None,
) -> PlanRequest:
    return PlanRequest(
        connector=setup.connector,
        task_id=task_id,
        next_batch_id=next_batch_id,
        committed=committed,
        pending=pending,
        data_loss=setup.data_loss,
        max_units=max_units,
    )


class BatchRunner(Protocol):
    """A task's micro-batch loop body, run by the task activity until it is cancelled.

    1. ``ensure_topic`` once per attempt;
    2. ``next_plan``: the recorded, uncommitted plan to re-run, or a new recorded plan, or None;
    3. ``run``: execute exactly that plan and commit it; return the records it covered.
    4. ``close``: once, when the task ends, however it ends (closes the connector's task).

    ``waiting_for`` after each plan: a text for status when the task cannot read (a missing file).
    ``runs_on_spark``: whether its batches start Spark jobs (labelled per batch; a batch that
    starts none, a direct pipeline's, never waits for the worker's Spark session to start).
    """

    setup: TaskSetup
    runs_on_spark: bool

    def ensure_topic(self) -> None: ...

    def next_plan(self) -> tuple[BatchPlan | None, bool]: ...

    def run(self, plan: BatchPlan, rerun: bool) -> int: ...

    def close(self) -> None: ...

    def waiting_for(self) -> str:
        """What the task waits for, for status ("" when nothing: it is reading or idle)."""
        ...
