"""Consumer offsets translated from the source cluster to the target cluster, as pure rules.

The replicator records, as it commits each batch, an *offset sync* per source queue and target
queue it sends to (``OffsetSync``): every message of source queue ``partition`` at or after
``source_offset`` lands in ``target_queue`` at or after ``target_offset``, and every earlier one
before it (the target queue's end was read before the batch was sent, after the previous batch
committed). A group's committed source offset ``c`` (the next message it would consume) then
translates, per target queue, to the first target offset after every copy of a message below
``c``: found by scanning the target queue from the latest sync at or below ``c``, reading only
the copies' ``sluice.partition`` and ``sluice.offset`` properties (``first_after``). When several
source queues feed one target queue (topics merged by ``dest.topic``, or queue counts that differ),
the target queue's offset is the least of theirs: nothing below it is unconsumed, so a consumer
moved to the target cluster loses nothing and sees again at most what it consumed since the last
checkpoint.

MirrorMaker 2 translates to at most one past its latest sync and may re-deliver more; the scan
here makes the translation exact for a queue fed by one source queue (the default: queue i to
queue i).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class OffsetSync:
    """Copies of ``partition``'s messages from ``source_offset`` on are at or after
    ``target_offset`` in ``target_queue`` (a queue key, ``broker:queue``, of the target topic)."""

    partition: str
    source_offset: int
    target_topic: str
    target_queue: str
    target_offset: int


@dataclass(frozen=True)
class Copy:
    """One replicated message as the target queue holds it: its target offset and the source
    queue and offset it was copied from (None: not a replicator's copy)."""

    target_offset: int
    partition: str | None
    source_offset: int | None


class SyncIndex:
    """The offset syncs read so far, by source queue and target queue, in source-offset order."""

    def __init__(self) -> None:
        self._syncs: dict[tuple[str, str, str], list[tuple[int, int]]] = {}

    def add(self, syncs: Iterable[OffsetSync]) -> None:
        for s in syncs:
            points = self._syncs.setdefault((s.partition, s.target_topic, s.target_queue), [])
            point = (s.source_offset, s.target_offset)
            if not points or point > points[-1]:
                points.append(point)
            elif point not in points:
                bisect.insort(points, point)

    def feeds(self, target_topic: str) -> dict[str, list[str]]:
        """Each target queue of ``target_topic`` and the source queues synced into it."""
        out: dict[str, list[str]] = {}
        for partition, topic, queue in self._syncs:
            if topic == target_topic:
                out.setdefault(queue, []).append(partition)
        return out

    def scan_start(self, partition: str, target_topic: str, target_queue: str, committed: int) -> int | None:
        """Where a scan for ``committed`` starts: the target offset of the latest sync at or below
        it, or of the earliest sync when it is below every one (what came before the replicator
        started was never copied). None: nothing of ``partition`` was synced to that queue."""
        points = self._syncs.get((partition, target_topic, target_queue))
        if not points:
            return None
        i = bisect.bisect_right(points, (committed, float("inf"))) - 1
        return points[max(i, 0)][1]


def first_after(copies: Iterable[Copy], partition: str, committed: int, end: int) -> int:
    """The target offset of the first copy of ``partition`` at or above ``committed``, from copies
    read lazily in target order from a scan start (``SyncIndex.scan_start``) to ``end`` (the
    queue's end when the scan began); ``end`` when there is none yet (later copies land after it).
    Any later offset could pass over a copy not consumed yet; an earlier one re-delivers."""
    for copy in copies:
        if copy.partition == partition and copy.source_offset is not None and copy.source_offset >= committed:
            return copy.target_offset
    return end


def least(offsets: Sequence[int | None]) -> int | None:
    """A target queue's offset from those of the source queues feeding it: the least, None when
    one of them cannot be translated (no checkpoint rather than one that skips messages)."""
    if not offsets or any(o is None for o in offsets):
        return None
    return min(o for o in offsets if o is not None)


def forward_only(current: Mapping[str, int | None], translated: Mapping[str, int]) -> dict[str, int]:
    """The translated offsets worth committing to a target group: where it has none, or is behind
    (a group is never moved backwards: it may have consumed there since)."""
    return {q: t for q, t in translated.items() if current.get(q) is None or (current[q] or 0) < t}
