"""Driver-side RocketMQ positions: earliest/latest per queue, start policies, and data-loss checks.

A position is a queue offset, "the next message to read", keyed by the queue's partition key
("broker-a:3"). The planner (connectors.planning) is pure; this module is the thin layer that asks
the broker for the numbers it needs.

``check_data_loss`` is the ONE place data loss is decided, like Spark Kafka's ``reportDataLoss``: at
planning (retention removed the start of a planned range, a queue vanished) and again on executors
when a pull says the range is no longer (or not) there. Policy FAIL raises ``DataLossError`` naming
topic, queue and the lost range; SKIP narrows the range to what still exists and logs a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from connectors.model import DataLossPolicy, PartitionRange
from connectors.planning import AtTimestamp, SpecificPositions, StartPolicy, resolve_start
from connectors.rocketmq.errors import RocketMQError
from connectors.rocketmq.values import MessageQueue

log = logging.getLogger(__name__)


class OffsetClient(Protocol):
    """The slice of SyncRocketMQClient the planner needs (kept narrow so any client fits)."""

    def queues(self, topic: str) -> list[MessageQueue]: ...
    def min_offset(self, mq: MessageQueue) -> int: ...
    def max_offset(self, mq: MessageQueue) -> int: ...
    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int: ...


class DataLossError(RocketMQError):
    """Planned messages are no longer (or not) in the queue, and the policy says fail."""

    def __init__(
        self, topic: str, partition: str, lost_start: int, lost_end: int | None, reason: str
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.lost_start = lost_start
        self.lost_end = lost_end
        lost = f"[{lost_start}, {lost_end})" if lost_end is not None else f"[{lost_start}, ...)"
        super().__init__(
            f"rocketmq: data loss in topic {topic!r} queue {partition}: offsets {lost} {reason} "
            "(set the connector's data-loss policy to 'skip' to continue past it)"
        )


def queue_map(client: OffsetClient, topic: str) -> dict[str, MessageQueue]:
    """The topic's readable queues by partition key (raises TopicNotFoundError for unknown topics)."""
    return {mq.key: mq for mq in client.queues(topic)}


def latest_offsets(client: OffsetClient, topic: str) -> dict[str, int]:
    """Max offset (next to be written) per queue: the end of everything readable now."""
    return {key: client.max_offset(mq) for key, mq in queue_map(client, topic).items()}


def earliest_offsets(client: OffsetClient, topic: str) -> dict[str, int]:
    """Min offset per queue: the first message retention has not removed yet."""
    return {key: client.min_offset(mq) for key, mq in queue_map(client, topic).items()}


def resolve_start_policy(
    client: OffsetClient, topic: str, policy: StartPolicy, *, partitions: Sequence[str] | None = None
) -> dict[str, int]:
    """Resolve ``policy`` into starting positions for ``partitions`` (default: every queue of ``topic``).

    A timestamp becomes, per queue, the offset of the first message stored at or after it (RocketMQ's
    search by timestamp), clamped into ``[min, max]`` so a future timestamp means "latest".
    """
    queues = queue_map(client, topic)
    keys = list(partitions) if partitions is not None else list(queues)
    missing = [k for k in keys if k not in queues]
    if missing:
        raise RocketMQError(f"rocketmq: topic {topic!r} has no queue {', '.join(missing)}")
    earliest = {k: client.min_offset(queues[k]) for k in keys}
    latest = {k: client.max_offset(queues[k]) for k in keys}
    if isinstance(policy, AtTimestamp):
        found = {k: client.search_offset(queues[k], policy.timestamp_ms) for k in keys}
        clamped = {k: min(max(found[k], earliest[k]), latest[k]) for k in keys}
        policy = SpecificPositions(clamped)
    return resolve_start(policy, earliest, latest, partitions=keys)


def check_data_loss(
    ranges: Sequence[PartitionRange],
    min_offsets: Mapping[str, int],
    policy: DataLossPolicy,
    *,
    max_offsets: Mapping[str, int] | None = None,
    topic: str = "",
) -> tuple[PartitionRange, ...]:
    """Ranges narrowed to what the queues still hold, or ``DataLossError`` under policy FAIL.

    Lost parts of a range ``[start, end)`` for a queue holding ``[min, max)``:
    1. ``[start, min)`` when retention removed the beginning (the usual data loss);
    2. the whole range when the queue vanished from the topic (absent from ``min_offsets``);
    3. ``[max, end)`` when ``max_offsets`` is given and the queue ends before the range does. A plan
       only covers offsets that existed at planning, so this means the broker lost written messages
       (asynchronous flush before a crash, or the topic was recreated) — Spark Kafka fails here too.

    ``topic`` defaults to each range's own topic. Under SKIP the range keeps its bounds clipped
    (possibly empty) so callers can still commit its planned end.
    """
    out: list[PartitionRange] = []
    for r in ranges:
        where = r.topic or topic
        lo = min_offsets.get(r.partition)
        if lo is None:
            _report(policy, where, r.partition, r.start, r.end, "are gone: the queue vanished from the topic")
            out.append(replace(r, start=r.end))
            continue
        start = r.start
        if start < lo and not r.is_empty:
            lost_end = min(lo, r.end)
            _report(
                policy, where, r.partition, start, lost_end, f"were removed by retention (earliest is {lo})"
            )
            start = lost_end
        end = r.end
        if max_offsets is not None and r.partition in max_offsets:
            hi = max_offsets[r.partition]
            if hi < end and start < end:
                lost_start = max(hi, start)
                _report(policy, where, r.partition, lost_start, end, f"are missing: the queue ends at {hi}")
                end = lost_start
        out.append(replace(r, start=start, end=max(start, end)))
    return tuple(out)


def _report(policy: DataLossPolicy, topic: str, partition: str, start: int, end: int, reason: str) -> None:
    if policy == DataLossPolicy.FAIL:
        raise DataLossError(topic, partition, start, end, reason)
    log.warning(
        "rocketmq: skipping lost data in topic %r queue %s: offsets [%d, %d) %s",
        topic,
        partition,
        start,
        end,
        reason,
    )
