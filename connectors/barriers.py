"""Barriers: records ordered against every key of their topic, when a topic's keys spread over queues.

Messages are sharded to queues by record key, so per-key order holds in one queue and a table
spreads over the topic's queues and the sink's tasks. A few records are ordered against *all* keys
of their table — a truncate event: every row before it is gone, every row after it stays. Sent to
one queue, a sink could apply it in between other queues' rows. So the source runner sends such a
record to **every** queue of its topic, as copies marked ``sluice.barrier = "<i>/<n>"`` (copy *i*
of *n*, the topic's queue count) and listing the queues sent to (``sluice.barrier.queues``), each
in order with its queue's keys.

What a sink then does with the copies:
- one that merely delivers records (file, dummy) gets copy ``0/n`` only: the record once, as before;
- one that acts on the barrier (jdbc-sink's ``truncate.enabled``) gets every copy and applies
  :func:`cut_at_barriers`: the first copy met, in whichever queue, applies the barrier (the table is
  emptied); a queue's rows before its own copy of an applied barrier are left out, since they come
  before the barrier in source order; its rows after its copy are written. Once every queue has
  passed its copy, the barrier is retired. The state in between (:class:`Pending`) is committed with
  the sink's positions, so it is exact across batches, tasks and crashes.

This module is pure: the sink reads the copies and the pending state, and writes back the result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

BARRIER_HEADER: Final = "sluice.barrier"
#: The queues a barrier's copies went to (comma-separated keys): exactly the queues that owe it, so a
#: queue added to the topic later never waits for a copy it will not get.
BARRIER_QUEUES_HEADER: Final = "sluice.barrier.queues"
#: The value a source sets on a record that is a barrier; the runner replaces it by ``<i>/<n>``.
BARRIER_MARK: Final = "true"


@dataclass(frozen=True, order=True)
class BarrierId:
    """A barrier's source position: its source partition and offset (the same in every copy)."""

    partition: str
    offset: int


@dataclass(frozen=True)
class Copy:
    """A barrier copy met in a batch: the queue holding it, its offset there, and the queues its
    copies went to (only its own for a record marked before barriers were sent to every queue)."""

    queue: str
    offset: int
    barrier: BarrierId
    queues: frozenset[str]


@dataclass(frozen=True)
class Pending:
    """An applied barrier that some queues have not passed yet."""

    barrier: BarrierId
    #: the queues its copies went to: each owes it until it passes its copy
    queues: frozenset[str]
    passed: frozenset[str]


@dataclass(frozen=True)
class TopicBarriers:
    """The barrier state of one scope (a topic, or a source partition: jdbc-sink keys it by table),
    as committed with the sink's positions."""

    pending: tuple[Pending, ...] = ()
    #: per source partition, the newest barrier applied: an older or equal copy met again (a
    #: duplicate delivery) is not applied a second time
    last: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "pending": [
                {
                    "partition": p.barrier.partition,
                    "offset": p.barrier.offset,
                    "queues": sorted(p.queues),
                    "passed": sorted(p.passed),
                }
                for p in self.pending
            ],
            "last": dict(sorted(self.last.items())),
        }

    @staticmethod
    def from_json(doc: Mapping[str, object]) -> TopicBarriers:
        pending = doc.get("pending") or []
        last = doc.get("last") or {}
        assert isinstance(pending, list) and isinstance(last, dict)
        return TopicBarriers(
            tuple(
                Pending(
                    BarrierId(str(p["partition"]), int(p["offset"])),
                    frozenset(str(q) for q in p["queues"]),
                    frozenset(str(q) for q in p["passed"]),
                )
                for p in pending
            ),
            {str(k): int(v) for k, v in last.items()},
        )


@dataclass(frozen=True)
class Cut:
    """What a batch does at one scope's barriers.

    ``keep_after``: per queue of the batch, rows at offsets above this are written (-1: all of
    them; ``None``: none — the queue still owes an applied barrier its copy). ``apply``: the batch
    applies a new barrier (the target is emptied before its rows are written). ``state``: what to
    commit with the positions."""

    keep_after: Mapping[str, int | None]
    apply: bool
    state: TopicBarriers


def _owes(p: Pending, queue: str) -> bool:
    return queue in p.queues and queue not in p.passed


def cut_at_barriers(queues: Iterable[str], copies: Sequence[Copy], state: TopicBarriers) -> Cut:
    """Apply a batch's barrier copies to one scope's state (see the module docstring).

    ``queues``: the queues the batch holds rows of; ``copies``: the barrier copies among them.
    Every queue gets a queue's copies in source order, so a queue that holds a copy of a barrier
    has passed every older one. A queue owes a barrier until it passes its copy: its rows before
    that copy are left out, and so are all its rows in the batch when the copy is not in it yet.
    """
    known = {p.barrier: p for p in state.pending}
    last = dict(state.last)
    new: dict[BarrierId, Pending] = {}
    for c in sorted(copies, key=lambda c: (c.barrier, c.queue)):
        if c.barrier in known or c.barrier in new:
            continue
        if c.barrier.offset <= last.get(c.barrier.partition, -1):
            continue  # retired, or older than one applied: a duplicate delivery
        new[c.barrier] = Pending(c.barrier, c.queues, frozenset())
        last[c.barrier.partition] = c.barrier.offset
    barriers = sorted([*known.values(), *new.values()], key=lambda p: p.barrier)
    keep_after: dict[str, int | None] = {}
    for queue in queues:
        owed = [p for p in barriers if _owes(p, queue)]
        if not owed:
            keep_after[queue] = -1
            continue
        newest = owed[-1].barrier
        here = [c.offset for c in copies if c.queue == queue and c.barrier == newest]
        keep_after[queue] = min(here) if here else None
    passed: dict[BarrierId, set[str]] = {p.barrier: set(p.passed) for p in barriers}
    for c in copies:
        if c.barrier in passed:
            passed[c.barrier].add(c.queue)
    pending = tuple(
        Pending(p.barrier, p.queues, frozenset(passed[p.barrier]))
        for p in barriers
        if not p.queues <= passed[p.barrier]
    )
    return Cut(keep_after, bool(new), TopicBarriers(pending, last))
