"""Table-driven tests of the pure planner (admission, splitting, plans, start policies)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from sluice.activities.heartbeat import idle_beat_s, next_wake_s
from sluice.activities.runner import aligned_wait_s, idle_wait_s
from sluice.connectors.model import PartitionRange
from sluice.connectors.planning import (
    AtTimestamp,
    Earliest,
    Latest,
    PlanningError,
    SpecificPositions,
    StartPolicy,
    admit,
    linger_s,
    natural_key,
    pack_splits,
    ramped_budget,
    resolve_start,
    split_ranges,
)
from sluice.connectors.positions import Position


@dataclass(frozen=True)
class AdmitCase:
    name: str
    committed: dict[str, int]
    latest: dict[str, int]
    max_span: int | None
    expected: dict[str, int]


ADMIT_CASES = [
    AdmitCase("unlimited takes everything", {"a": 0, "b": 5}, {"a": 10, "b": 7}, None, {"a": 10, "b": 7}),
    AdmitCase(
        "budget above backlog takes everything", {"a": 0, "b": 0}, {"a": 3, "b": 4}, 100, {"a": 3, "b": 4}
    ),
    AdmitCase("budget equal to backlog", {"a": 0, "b": 0}, {"a": 3, "b": 4}, 7, {"a": 3, "b": 4}),
    AdmitCase("even split", {"a": 0, "b": 0}, {"a": 100, "b": 100}, 10, {"a": 5, "b": 5}),
    AdmitCase(
        "small partition not starved by a big one",
        {"small": 0, "big": 0},
        {"small": 3, "big": 1_000_000},
        100,
        {"small": 3, "big": 97},
    ),
    AdmitCase(
        "leftover of small partitions split among the larger ones",
        {"a": 0, "b": 0, "c": 0, "d": 0},
        {"a": 1, "b": 2, "c": 50, "d": 60},
        23,
        {"a": 1, "b": 2, "c": 10, "d": 10},
    ),
    AdmitCase(
        "remainder goes to the largest backlog first",
        {"a": 0, "b": 0, "c": 0},
        {"a": 10, "b": 30, "c": 20},
        11,
        {"a": 3, "b": 4, "c": 4},
    ),
    AdmitCase(
        "remainder ties broken by natural partition order",
        {"q:2": 0, "q:10": 0, "q:1": 0},
        {"q:2": 9, "q:10": 9, "q:1": 9},
        2,
        {"q:1": 1, "q:2": 1, "q:10": 0},
    ),
    AdmitCase(
        "budget smaller than partition count",
        {"a": 0, "b": 0, "c": 0, "d": 0},
        {"a": 5, "b": 5, "c": 5, "d": 5},
        3,
        {"a": 1, "b": 1, "c": 1, "d": 0},
    ),
    AdmitCase(
        "budget smaller than partition count rotates to the largest backlog",
        {"a": 1, "b": 1, "c": 1, "d": 0},
        {"a": 5, "b": 5, "c": 5, "d": 5},
        1,
        {"a": 1, "b": 1, "c": 1, "d": 1},
    ),
    AdmitCase("zero budget admits nothing", {"a": 4, "b": 2}, {"a": 10, "b": 9}, 0, {"a": 4, "b": 2}),
    AdmitCase("nothing new", {"a": 4}, {"a": 4}, 10, {"a": 4}),
    AdmitCase("no partitions", {}, {}, 10, {}),
    AdmitCase(
        "positions are offsets, not counts",
        {"a": 1000, "b": 2000},
        {"a": 1010, "b": 2500},
        30,
        {"a": 1010, "b": 2020},
    ),
]


@pytest.mark.parametrize("case", ADMIT_CASES, ids=lambda c: c.name)
def test_admit(case: AdmitCase) -> None:
    got = admit(case.committed, case.latest, case.max_span)
    assert got == case.expected
    if case.max_span is not None:
        assert sum(got[k] - case.committed[k] for k in got) <= case.max_span


@dataclass(frozen=True)
class AdmitErrorCase:
    name: str
    committed: dict[str, int]
    latest: dict[str, int]
    max_span: int | None
    message: str


ADMIT_ERRORS = [
    AdmitErrorCase(
        "missing partition", {"a": 0}, {"a": 5, "broker-a:3": 2}, 10, "'broker-a:3' has no committed"
    ),
    AdmitErrorCase(
        "vanished partition", {"a": 0, "gone": 4}, {"a": 5}, 10, "'gone' has a committed position 4"
    ),
    AdmitErrorCase("latest below committed", {"a": 9}, {"a": 5}, None, "'a': latest position 5 is below"),
    AdmitErrorCase("negative budget", {"a": 0}, {"a": 5}, -1, "max_span must be >= 0"),
]


@pytest.mark.parametrize("case", ADMIT_ERRORS, ids=lambda c: c.name)
def test_admit_errors(case: AdmitErrorCase) -> None:
    with pytest.raises(PlanningError, match=case.message):
        admit(case.committed, case.latest, case.max_span)


def test_admit_repeated_batches_drain_every_partition_fairly() -> None:
    """Regression-style: with a budget below the partition count, every partition still progresses."""
    committed = {f"broker-a:{i}": 0 for i in range(4)}
    latest = {k: 3 for k in committed}
    seen_progress: set[str] = set()
    for _ in range(12):
        ends = admit(committed, latest, 1)
        seen_progress |= {k for k in ends if ends[k] > committed[k]}
        committed = ends
    assert committed == latest
    assert seen_progress == set(latest)


def R(p: str, s: int, e: int, t: str = "") -> PartitionRange:
    return PartitionRange(partition=p, start=s, end=e, topic=t)


SPLIT_CASES = [
    ("fits in one split", [R("a", 0, 10)], 10, [R("a", 0, 10)]),
    ("even pieces", [R("a", 0, 10)], 5, [R("a", 0, 5), R("a", 5, 10)]),
    ("no tiny trailing piece", [R("a", 0, 11)], 5, [R("a", 0, 4), R("a", 4, 8), R("a", 8, 11)]),
    ("empty range dropped", [R("a", 3, 3), R("b", 0, 2, "T")], 5, [R("b", 0, 2, "T")]),
    (
        "offsets preserved with topic",
        [R("q:1", 100, 103, "T")],
        1,
        [R("q:1", 100, 101, "T"), R("q:1", 101, 102, "T"), R("q:1", 102, 103, "T")],
    ),
    (
        "several ranges keep order",
        [R("b", 0, 4), R("a", 0, 2)],
        2,
        [R("b", 0, 2), R("b", 2, 4), R("a", 0, 2)],
    ),
    ("nothing", [], 3, []),
]


@pytest.mark.parametrize(
    ("name", "ranges", "max_per_split", "expected"), SPLIT_CASES, ids=[c[0] for c in SPLIT_CASES]
)
def test_split_ranges(
    name: str, ranges: list[PartitionRange], max_per_split: int, expected: list[PartitionRange]
) -> None:
    got = split_ranges(ranges, max_per_split)
    assert got == expected
    assert all(r.size <= max_per_split for r in got)


def test_split_ranges_rejects_non_positive_size() -> None:
    with pytest.raises(PlanningError, match="max_per_split"):
        split_ranges([R("a", 0, 1)], 0)


EARLIEST = {"a": 2, "b": 0}
LATEST = {"a": 10, "b": 4}

RESOLVE_CASES: list[tuple[str, StartPolicy, dict[str, int]]] = [
    ("earliest", Earliest(), {"a": 2, "b": 0}),
    ("latest", Latest(), {"a": 10, "b": 4}),
    ("specific with earliest default", SpecificPositions({"a": 7}), {"a": 7, "b": 0}),
    ("specific with latest default", SpecificPositions({"b": 1}, default="latest"), {"a": 10, "b": 1}),
    ("specific below earliest kept for the data-loss check", SpecificPositions({"a": 0}), {"a": 0, "b": 0}),
    ("specific at latest", SpecificPositions({"a": 10, "b": 4}), {"a": 10, "b": 4}),
]


@pytest.mark.parametrize(("name", "policy", "expected"), RESOLVE_CASES, ids=[c[0] for c in RESOLVE_CASES])
def test_resolve_start(name: str, policy: StartPolicy, expected: dict[str, int]) -> None:
    assert resolve_start(policy, EARLIEST, LATEST) == {k: Position((v,)) for k, v in expected.items()}


def test_resolve_start_for_new_partitions_only() -> None:
    assert resolve_start(Latest(), EARLIEST, LATEST, partitions=["b"]) == {"b": Position((4,))}


def test_resolve_start_with_composite_positions() -> None:
    earliest = {"t": Position(("2024-01-01", 0))}
    latest = {"t": Position(("2024-03-01", 77))}
    at = Position(("2024-02-01", 5))
    assert resolve_start(SpecificPositions({"t": at}), earliest, latest) == {"t": at}
    with pytest.raises(PlanningError, match="beyond the latest"):
        resolve_start(SpecificPositions({"t": Position(("2025-01-01", 0))}), earliest, latest)


RESOLVE_ERRORS: list[tuple[str, StartPolicy, list[str] | None, str]] = [
    ("beyond latest", SpecificPositions({"a": 11}), None, "position 11 of partition 'a' is beyond"),
    ("negative", SpecificPositions({"b": -1}), None, "negative"),
    ("unknown partition", Earliest(), ["zz"], "'zz' is unknown"),
    (
        "timestamp needs the source",
        AtTimestamp(1_700_000_000_000),
        None,
        "timestamp must be resolved by the source",
    ),
]


@pytest.mark.parametrize(
    ("name", "policy", "partitions", "message"), RESOLVE_ERRORS, ids=[c[0] for c in RESOLVE_ERRORS]
)
def test_resolve_start_errors(
    name: str, policy: StartPolicy, partitions: list[str] | None, message: str
) -> None:
    with pytest.raises(PlanningError, match=message):
        resolve_start(policy, EARLIEST, LATEST, partitions=partitions)


def test_natural_key_orders_queue_numbers() -> None:
    keys = ["broker-a:10", "broker-b:0", "broker-a:2", "broker-a:1"]
    assert sorted(keys, key=natural_key) == ["broker-a:1", "broker-a:2", "broker-a:10", "broker-b:0"]


# --- a task's first batch is small ------------------------------------------------------------

RAMP_CASES = [
    # configured, unit, batches planned before, budget of the next batch
    pytest.param(100_000, "records", 0, 1_000, id="first batch of records is small"),
    pytest.param(100_000, "records", 1, 100_000, id="then the configured size"),
    pytest.param(100_000, "records", 500, 100_000, id="and it stays there"),
    pytest.param(300, "records", 0, 300, id="a batch size below the first step is kept"),
    pytest.param(32 * 1024, "bytes", 0, 32 * 1024, id="small byte batches are kept"),
    pytest.param(16 * 1024 * 1024, "bytes", 0, 256 * 1024, id="first batch of bytes is 256 KiB"),
    pytest.param(16 * 1024 * 1024, "bytes", 1, 16 * 1024 * 1024, id="then bytes are full size too"),
    pytest.param(None, "records", 0, 1_000, id="no limit still starts small"),
    pytest.param(None, "records", 1, None, id="and then has none"),
    pytest.param(0, "records", 0, 0, id="zero stays zero"),
]


@pytest.mark.parametrize(("configured", "unit", "planned", "budget"), RAMP_CASES)
def test_ramped_budget(configured: int | None, unit: str, planned: int, budget: int | None) -> None:
    assert ramped_budget(configured, unit, planned) == budget


LINGER_CASES = [
    # records planned, the batch's budget, batch.linger.ms, seconds the sink waits first
    pytest.param(10, 10_000, 0, 0.0, id="no linger by default: a batch runs at once"),
    pytest.param(10, 10_000, 250, 0.25, id="a small batch waits for more"),
    pytest.param(9_999, 10_000, 250, 0.25, id="one short of full still waits"),
    pytest.param(10_000, 10_000, 250, 0.0, id="a full batch runs at once"),
    pytest.param(1_000, 1_000, 250, 0.0, id="a full first (ramped) batch runs at once"),
    pytest.param(10, None, 250, 0.25, id="with no budget every batch waits"),
]


@pytest.mark.parametrize(("planned", "budget", "linger_ms", "wait_s"), LINGER_CASES)
def test_linger_s(planned: int, budget: int | None, linger_ms: int, wait_s: float) -> None:
    assert linger_s(planned, budget, linger_ms) == wait_s


PACK_CASES = [
    # (what, split sizes, min per task, max tasks, expected tasks as split indices)
    ("a small batch over four queues: one task", [400, 380, 370, 350], 20_000, 2, [[0, 1, 2, 3]]),
    ("large enough for two tasks", [30_000, 30_000, 30_000, 30_000], 20_000, 2, [[0, 2], [1, 3]]),
    ("no more tasks than allowed", [50_000] * 4, 20_000, 1, [[0, 1, 2, 3]]),
    ("no more tasks than splits", [90_000], 20_000, 4, [[0]]),
    ("largest first to the emptiest", [10, 60_000, 20_000, 30_000], 20_000, 2, [[1], [0, 2, 3]]),
    ("nothing", [], 20_000, 2, []),
]


@pytest.mark.parametrize(
    ("what", "sizes", "least", "most", "expected"), PACK_CASES, ids=[c[0] for c in PACK_CASES]
)
def test_pack_splits(what: str, sizes: list[int], least: int, most: int, expected: list[list[int]]) -> None:
    got = pack_splits(sizes, least, most)
    assert got == expected
    assert sorted(i for task in got for i in task) == list(range(len(sizes)))  # every split, once


def test_pack_splits_rejects_non_positive_limits() -> None:
    with pytest.raises(PlanningError, match="min_per_task"):
        pack_splits([1], 0, 1)


@pytest.mark.parametrize(
    ("interval_s", "idle_max_s", "empty_polls", "wait_s"),
    [
        (1.0, 0.0, 1, 1.0),  # no back-off: the interval, however long the quiet
        (1.0, 0.0, 50, 1.0),
        (1.0, 0.5, 9, 1.0),  # a maximum below the interval is no back-off either
        (1.0, 30.0, 1, 1.0),  # the first empty poll waits the interval
        (1.0, 30.0, 2, 2.0),
        (1.0, 30.0, 5, 16.0),
        (1.0, 30.0, 6, 30.0),  # doubled up to the maximum
        (1.0, 30.0, 10_000, 30.0),  # and no overflow after a very long quiet
        (0.2, 3.0, 4, 1.6),
        (0.0, 3.0, 3, 0.0),  # poll.interval.ms=0 polls back to back
    ],
)
def test_idle_wait_doubles_from_the_poll_interval_up_to_poll_idle_max(
    interval_s: float, idle_max_s: float, empty_polls: int, wait_s: float
) -> None:
    assert idle_wait_s(interval_s, idle_max_s, empty_polls) == pytest.approx(wait_s)


@pytest.mark.parametrize(
    ("wait_s", "now_s", "aligned_s"),
    [
        (5.0, 1000.0, 5.0),  # on a multiple: a whole wait
        (5.0, 1000.004, 4.996),  # just after one (a wake-up's own delay): to the next multiple
        (5.0, 1003.0, 2.0),  # after a batch: shorter, never longer
        (5.0, 1004.95, 5.05),  # a hair before a multiple: the next one, not a second poll at once
        (5.0, 1004.89, 0.11),  # past the slack (2 % of the wait): this one
        (1.0, 7.25, 0.75),
        (0.0, 1003.0, 0.0),  # poll.interval.ms=0 polls back to back
    ],
)
def test_idle_waits_end_on_multiples_of_the_wait(wait_s: float, now_s: float, aligned_s: float) -> None:
    """Idle tasks waiting as long wake together, so their polls run one after another on warm caches."""
    assert aligned_wait_s(wait_s, now_s) == pytest.approx(aligned_s)


def test_tasks_waiting_as_long_wake_at_the_same_moment() -> None:
    wakes = {round(now + aligned_wait_s(5.0, now), 6) for now in (100.2, 101.7, 103.9, 104.5)}
    assert wakes == {105.0}


@pytest.mark.parametrize(
    ("interval_s", "timeout_s", "beat_s"),
    [
        (1.0, 300.0, 120.0),  # the defaults (a 5-minute backstop): an idle task beats every 2 minutes
        (1.0, 60.0, 24.0),
        (1.0, 10.0, 4.0),
        (1.0, 2.0, 1.0),  # never more often than a working task
        (1.0, 0.0, 1.0),  # no heartbeat timeout: the interval
    ],
)
def test_an_idle_task_beats_at_a_share_of_the_heartbeat_timeout(
    interval_s: float, timeout_s: float, beat_s: float
) -> None:
    assert idle_beat_s(interval_s, timeout_s) == pytest.approx(beat_s)


@pytest.mark.parametrize(
    ("busy", "since_beat_s", "wake_s"),
    [
        (True, 0.0, 1.0),  # working (or hurried): a look, and a beat, every second
        (True, 300.0, 1.0),
        (False, 0.0, 1.0),  # idle, just beaten: look for the cancel the beat's answer may carry
        (False, 1.0, 60.0),  # idle: look for a worker shutdown every minute (the worker wakes it) ...
        (False, 100.0, 20.0),  # ... or at the next beat, if sooner
        (False, 119.5, 1.0),  # never sooner than a working task
    ],
)
def test_an_idle_heartbeat_thread_wakes_for_its_beats_and_a_shutdown_check_only(
    busy: bool, since_beat_s: float, wake_s: float
) -> None:
    assert next_wake_s(busy, since_beat_s, 1.0, 120.0) == pytest.approx(wake_s)
