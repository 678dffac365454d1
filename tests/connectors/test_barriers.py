"""Barrier copies cut a batch as applying every record in source order would (no services, no JVM).

Each case replays a source history — rows of keys spread over queues, with truncate barriers sent
to every queue — as batches that cut each queue at a different point, and checks that the rows
kept, in every batch, are exactly the rows a one-by-one replay leaves in the table."""

from __future__ import annotations

import pytest

from sluice.connectors.barriers import (
    BarrierId,
    Copy,
    Pending,
    TopicBarriers,
    cut_at_barriers,
)

# A source history: ("row", key) or ("truncate",). Key k goes to queue k % QUEUES.
QUEUES = 3


def _sent(history: list[tuple]) -> dict[str, list[tuple]]:
    """Each queue's messages: ("row", key, source offset) or ("copy", source offset, queues sent to)."""
    queues: dict[str, list[tuple]] = {f"q{i}": [] for i in range(QUEUES)}
    for offset, event in enumerate(history):
        if event[0] == "row":
            queues[f"q{event[1] % QUEUES}"].append(("row", event[1], offset))
        else:
            for q in queues.values():
                q.append(("copy", offset, frozenset(queues)))
    return queues


def _expected(history: list[tuple]) -> set[int]:
    """Source offsets of the rows a one-by-one replay leaves."""
    rows: set[int] = set()
    for offset, event in enumerate(history):
        if event[0] == "row":
            rows.add(offset)
        else:
            rows.clear()
    return rows


def _replay(history: list[tuple], cuts: list[dict[str, int]]) -> set[int]:
    """Run the queues in batches (``cuts``: per batch, how many messages each queue gives) and
    return the source offsets of the rows left in the table."""
    queues = _sent(history)
    read = dict.fromkeys(queues, 0)
    table: set[int] = set()
    state = TopicBarriers()
    for cut in [*cuts, {q: len(m) for q, m in queues.items()}]:
        batch = {q: list(enumerate(queues[q]))[read[q] : read[q] + cut.get(q, 0)] for q in queues}
        copies = [
            Copy(q, i, BarrierId("shop.items", m[1]), m[2])
            for q, ms in batch.items()
            for i, m in ms
            if m[0] == "copy"
        ]
        result = cut_at_barriers([q for q, ms in batch.items() if ms], copies, state)
        if result.apply:
            table.clear()
        for q, ms in batch.items():
            after = result.keep_after.get(q, -1)
            table |= {m[2] for i, m in ms if m[0] == "row" and after is not None and i > after}
            read[q] += len(ms)
        state = result.state
    assert state.pending == ()  # every queue passed every copy
    return table


HISTORIES = {
    "rows, truncate, rows": [
        ("row", 1),
        ("row", 2),
        ("row", 3),
        ("truncate",),
        ("row", 4),
        ("row", 5),
        ("row", 6),
    ],
    "two truncates": [("row", 1), ("truncate",), ("row", 2), ("row", 3), ("truncate",), ("row", 4)],
    "truncate first": [("truncate",), ("row", 1), ("row", 2)],
    "truncate last": [("row", 1), ("row", 2), ("truncate",)],
    "back to back": [("row", 1), ("truncate",), ("truncate",), ("row", 5)],
}
CUTS = {
    "all at once": [],
    "one queue ahead": [{"q0": 9}, {"q1": 9}],
    "one message each": [dict.fromkeys(("q0", "q1", "q2"), 1)] * 6,
    "lagging queue": [{"q0": 9, "q1": 9}, {"q0": 9, "q1": 9}, {"q2": 1}],
    "queue by queue, reversed": [{"q2": 9}, {"q1": 9}, {"q0": 9}],
}


@pytest.mark.parametrize("history", HISTORIES.values(), ids=HISTORIES.keys())
@pytest.mark.parametrize("cuts", CUTS.values(), ids=CUTS.keys())
def test_batches_cut_at_barriers_leave_what_a_one_by_one_replay_leaves(
    history: list[tuple], cuts: list
) -> None:
    assert _replay(history, cuts) == _expected(history)


def test_a_duplicate_copy_is_not_applied_again() -> None:
    b, both = BarrierId("shop.items", 7), frozenset({"q0", "q1"})
    first = cut_at_barriers(["q0"], [Copy("q0", 3, b, both)], TopicBarriers())
    assert first.apply and first.keep_after == {"q0": 3}
    # q0 meets its copy again (a re-sent message): rows around it are kept, nothing is emptied
    again = cut_at_barriers(["q0", "q1"], [Copy("q0", 5, b, both), Copy("q1", 2, b, both)], first.state)
    assert not again.apply and again.keep_after == {"q0": -1, "q1": 2}
    assert again.state.pending == ()
    # after it retired, a late duplicate changes nothing either
    late = cut_at_barriers(["q1"], [Copy("q1", 9, b, both)], again.state)
    assert not late.apply and late.keep_after == {"q1": -1} and late.state == again.state


def test_only_the_queues_a_barrier_went_to_owe_it() -> None:
    """A queue added to the topic after the truncate was sent holds only later rows; and a
    truncate marked before barriers were sent to every queue orders only its own queue."""
    b = BarrierId("shop.items", 4)
    spread = cut_at_barriers(["q0", "q4"], [Copy("q0", 4, b, frozenset({"q0", "q1"}))], TopicBarriers())
    assert spread.apply and spread.keep_after == {"q0": 4, "q4": -1}
    assert [sorted(p.queues - p.passed) for p in spread.state.pending] == [["q1"]]
    alone = cut_at_barriers(["q0", "q1"], [Copy("q0", 4, b, frozenset({"q0"}))], TopicBarriers())
    assert alone.apply and alone.keep_after == {"q0": 4, "q1": -1} and alone.state.pending == ()


def test_state_round_trips_through_json() -> None:
    pending = Pending(BarrierId("p", 3), frozenset({"b:0", "b:1", "b:2"}), frozenset({"b:1", "b:0"}))
    state = TopicBarriers((pending,), {"p": 3})
    assert TopicBarriers.from_json(state.to_json()) == state
