"""Table-driven tests of the one planner (connectors.planner.plan_next) over in-memory views.

The views stand in for a source task or the RocketMQ queues a sink reads: plain values, no I/O, so
every rule — start policies, data loss both ways, fairness, composite positions with gaps,
relocation, re-running a recorded plan — is one row here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from sluice.connectors import planner
from sluice.connectors.data_loss import DataLossError
from sluice.connectors.model import BatchPlan, DataLossPolicy, PartitionRange
from sluice.connectors.planner import OffsetView, PlanRequest, caught_up, plan_next
from sluice.connectors.planning import Latest, SpecificPositions, StartPolicy
from sluice.connectors.positions import PartitionKey, Position

FAIL, SKIP = DataLossPolicy.FAIL, DataLossPolicy.SKIP


def P(n: int, **meta: str) -> Position:
    return Position.of(n, **meta)


def K(name: str, topic: str = "") -> PartitionKey:
    return PartitionKey(name, topic)


@dataclass
class Offsets(OffsetView):
    """Integer offsets: a partition holds [earliest, latest)."""

    first: dict[PartitionKey, Position]
    last: dict[PartitionKey, Position]

    def partitions(self) -> list[PartitionKey]:
        return list(self.first)

    def earliest(self) -> dict[PartitionKey, Position]:
        return dict(self.first)

    def latest(self, committed: Mapping[PartitionKey, Position]) -> dict[PartitionKey, Position]:
        return dict(self.last)


@dataclass
class Keyset:
    """A table read by a composite key with gaps: a position is "after this key"; batch_end is
    ``WHERE key > start ORDER BY key LIMIT n`` (what a JDBC timestamp+incrementing source does)."""

    keys: list[tuple[str, int]]
    name: K = field(default_factory=lambda: K("orders"))  # type: ignore[valid-type]

    def partitions(self) -> list[PartitionKey]:
        return [self.name]

    def earliest(self) -> dict[PartitionKey, Position]:
        return {self.name: Position(("", 0))}

    def latest(self, committed: Mapping[PartitionKey, Position]) -> dict[PartitionKey, Position]:
        return {self.name: Position(self.keys[-1])}

    def backlog(self, key: PartitionKey, start: Position, latest: Position) -> int | None:
        return None  # a real database would have to count

    def batch_end(self, key: PartitionKey, start: Position, latest: Position, budget: int | None) -> Position:
        after = [k for k in self.keys if k > start.key]
        return Position(after[min(len(after), budget or len(after)) - 1]) if after else start


@dataclass
class Rotating(Offsets):
    """A view whose data moved: the committed position of ``frm`` now belongs to ``to``."""

    frm: PartitionKey = field(default_factory=lambda: K("app.log"))
    to: PartitionKey = field(default_factory=lambda: K("app.log.1"))

    def relocate(self, committed: Mapping[PartitionKey, Position]) -> dict[PartitionKey, Position]:
        out = dict(committed)
        if self.frm in out:
            out[self.to] = out.pop(self.frm)
        return out


def request(committed: Mapping[PartitionKey, Position], **kw: object) -> PlanRequest:
    return PlanRequest("c", 0, 7, committed, **kw)  # type: ignore[arg-type]


def ranges(*items: tuple[str, int, int]) -> tuple[PartitionRange, ...]:
    return tuple(PartitionRange(name, P(s), P(e)) for name, s, e in items)


@dataclass(frozen=True)
class Case:
    name: str
    view: Offsets
    committed: dict[PartitionKey, Position]
    expected: tuple[PartitionRange, ...]
    moved: dict[PartitionKey, Position] = field(default_factory=dict)
    policy: DataLossPolicy = FAIL
    start: StartPolicy | None = None
    limit: int | None = 10


def offsets(first: dict[str, int], last: dict[str, int]) -> Offsets:
    return Offsets({K(k): P(v) for k, v in first.items()}, {K(k): P(v) for k, v in last.items()})


CASES = [
    Case("new partitions start at earliest", offsets({"a": 2, "b": 0}, {"a": 5, "b": 3}), {},
         ranges(("a", 2, 5), ("b", 0, 3))),
    Case("start policy latest reads nothing yet", offsets({"a": 0}, {"a": 9}), {}, (), start=Latest()),
    Case("specific start", offsets({"a": 0}, {"a": 9}), {}, ranges(("a", 4, 9)),
         start=SpecificPositions({"a": 4})),
    Case("committed resumes", offsets({"a": 0}, {"a": 9}), {K("a"): P(6)}, ranges(("a", 6, 9))),
    Case("nothing new", offsets({"a": 0}, {"a": 9}), {K("a"): P(9)}, ()),
    Case("small partition not starved", offsets({"s": 0, "big": 0}, {"s": 3, "big": 1000}), {},
         ranges(("big", 0, 7), ("s", 0, 3))),
    Case("skip: retention moves the start forward", offsets({"a": 5}, {"a": 9}), {K("a"): P(2)},
         ranges(("a", 5, 9)), moved={K("a"): P(5)}, policy=SKIP),
    Case("skip: truncated source continues from its end", offsets({"a": 0}, {"a": 4}), {K("a"): P(8)},
         (), moved={K("a"): P(4)}, policy=SKIP),
    Case("skip: vanished partition is left alone", offsets({"a": 0, "gone": 0}, {"a": 4}), {K("gone"): P(3)},
         ranges(("a", 0, 4)), policy=SKIP),
    Case("a partition the task no longer owns is not planned", offsets({"a": 0}, {"a": 4}),
         {K("other-task"): P(3)}, ranges(("a", 0, 4))),
    Case("skip: replaced object starts again at its earliest",
         Offsets({K("f"): P(0, id="new")}, {K("f"): P(50, id="new")}), {K("f"): P(80, id="old")},
         (PartitionRange("f", P(0, id="new"), P(10, id="new")),), moved={K("f"): P(0, id="new")},
         policy=SKIP),
    Case("relocated position follows its data; the new file starts fresh",
         Rotating({K("app.log"): P(0), K("app.log.1"): P(0)}, {K("app.log"): P(4), K("app.log.1"): P(30)}),
         {K("app.log"): P(25)}, ranges(("app.log", 0, 4), ("app.log.1", 25, 30)),
         moved={K("app.log"): P(0), K("app.log.1"): P(25)}),
    Case("queues of a topic", Offsets({K("b:0", "T"): P(0)}, {K("b:0", "T"): P(3)}), {},
         (PartitionRange("b:0", P(0), P(3), "T"),)),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_plan_next(case: Case) -> None:
    kw: dict[str, object] = {"data_loss": case.policy, "max_units": case.limit}
    if case.start is not None:
        kw["start"] = case.start
    decision = plan_next(request(case.committed, **kw), case.view)
    assert not decision.rerun
    assert (decision.plan.ranges if decision.plan else ()) == case.expected
    assert dict(decision.moved) == case.moved
    if decision.plan:
        assert (decision.plan.connector, decision.plan.task_id, decision.plan.batch_id) == ("c", 0, 7)


FAILURES = [
    ("retention", offsets({"a": 5}, {"a": 9}), {K("a"): P(2)}, r"partition 'a': \[2, 5\) was removed"),
    ("truncated", offsets({"a": 0}, {"a": 4}), {K("a"): P(8)}, r"partition 'a': \[4, 8\) is missing"),
    ("vanished", offsets({"a": 0, "gone": 0}, {"a": 4}), {K("gone"): P(3)}, "partition 'gone'.*vanished"),
    ("replaced", Offsets({K("f"): P(0, id="new")}, {K("f"): P(90, id="new")}), {K("f"): P(80, id="old")},
     "partition 'f'.*another object now"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "view", "committed", "message"), FAILURES, ids=[f[0] for f in FAILURES])
def test_data_loss_fails_by_default(
    name: str, view: Offsets, committed: dict[PartitionKey, Position], message: str
) -> None:
    with pytest.raises(DataLossError, match=f"connector 'c' {message}"):
        plan_next(request(committed), view)


AB = offsets({"a": 0, "b": 0}, {"a": 9, "b": 5})
CAUGHT_UP = [
    ("every partition at its latest", AB, {K("a"): P(9), K("b"): P(5)}, True),
    ("no partitions", offsets({}, {}), {}, True),
    ("one partition behind", AB, {K("a"): P(9), K("b"): P(4)}, False),
    ("a new partition", AB, {K("a"): P(9)}, False),
    ("a vanished partition", offsets({"a": 0, "gone": 0}, {"a": 9}), {K("a"): P(9), K("gone"): P(3)}, False),
    ("truncated below the committed", offsets({"a": 0}, {"a": 4}), {K("a"): P(8)}, False),
    ("retention past the committed", offsets({"a": 12}, {"a": 9}), {K("a"): P(9)}, False),
    ("the same offset of a replaced object", Offsets({K("f"): P(0, id="new")}, {K("f"): P(80, id="new")}),
     {K("f"): P(80, id="old")}, False),
    ("positions of another shape", Offsets({K("a"): Position(("", 0))}, {K("a"): P(9)}),
     {K("a"): P(9)}, False),
]  # fmt: skip


@pytest.mark.parametrize(("name", "view", "committed", "expected"), CAUGHT_UP, ids=[c[0] for c in CAUGHT_UP])
def test_caught_up(name: str, view: Offsets, committed: dict[PartitionKey, Position], expected: bool) -> None:
    """The idle shortcut: only when the full steps could plan, move and report nothing."""
    assert caught_up(view.partitions(), committed, view.earliest(), view.latest(committed)) is expected


@pytest.mark.parametrize(
    ("view", "committed"),
    [
        (offsets({"a": 0, "b": 2}, {"a": 9, "b": 2}), {K("a"): P(9), K("b"): P(2), K("other-task"): P(4)}),
        (offsets({}, {}), {}),
        (Keyset([("2024-01-01", 1)]), {K("orders"): Position(("2024-01-01", 1))}),
        (Rotating({K("app.log"): P(0), K("app.log.1"): P(0)}, {K("app.log"): P(0), K("app.log.1"): P(25)}),
         {K("app.log"): P(25)}),
    ],
)  # fmt: skip
def test_the_idle_shortcut_decides_as_the_full_steps_do(
    view: Offsets, committed: dict[PartitionKey, Position], monkeypatch: pytest.MonkeyPatch
) -> None:
    shortcut = plan_next(request(committed), view)
    monkeypatch.setattr(planner, "caught_up", lambda *_: False)
    assert plan_next(request(committed), view) == shortcut
    assert shortcut.plan is None


def test_recorded_plan_is_rerun_unchanged() -> None:
    pending = BatchPlan("c", 0, 6, ranges(("a", 1, 4)), {"file.length": "12"})
    decision = plan_next(request({K("a"): P(1)}, pending=pending), offsets({"a": 0}, {"a": 99}))
    assert decision.rerun and decision.plan is pending and not decision.moved


def test_composite_keys_with_gaps_hold_the_limit() -> None:
    """timestamp+incrementing: 3 records per batch, whatever the gaps in ids and timestamps."""
    view = Keyset(
        [("2024-01-01", 1), ("2024-01-01", 7), ("2024-01-03", 2), ("2024-02-01", 100), ("2024-02-01", 101)]
    )
    start = Position(("", 0))
    seen = []
    committed: dict[PartitionKey, Position] = {}
    for _ in range(3):
        plan = plan_next(request(committed, max_units=3), view).plan  # type: ignore[arg-type]
        if plan is None:
            break
        (r,) = plan.ranges
        assert r.start == committed.get(view.name, start)
        seen.append(r.end.key)
        committed = dict(plan.end_positions())
    assert seen == [("2024-01-03", 2), ("2024-02-01", 101)]
