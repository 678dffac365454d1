"""Driver-side RocketMQ positions: earliest/latest per queue, start policies, and data-loss checks.

A position is a queue offset, "the next message to read", keyed by the queue's partition key
("broker-a:3"). The planner (connectors.planning) is pure; this module is the thin layer that asks
the broker for the numbers it needs.

``check_data_loss`` applies the one data-loss function (``sluice.connectors.data_loss.check_range``) to
queue ranges, on executors when a pull says the range is no longer (or not) there; planning uses the
same function through the planner. Policy FAIL raises ``DataLossError`` naming topic, queue and the
lost range; SKIP narrows the range to what still exists and logs a warning.

``consumer_group`` names the broker consumer group that mirrors a sink's offsets: the sink runner
writes to it and deleting the connector removes it, so both must agree on the one name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from sluice.connectors.data_loss import DataLossError, check_range
from sluice.connectors.model import DataLossPolicy, PartitionRange
from sluice.connectors.planning import AtTimestamp, SpecificPositions, StartPolicy, resolve_start
from sluice.connectors.positions import Position
from sluice.connectors.rocketmq.errors import RocketMQError
from sluice.connectors.rocketmq.values import MessageQueue

__all__ = ["DataLossError", "check_data_loss", "consumer_group", "resolve_start_policy"]


def consumer_group(connector: str) -> str:
    """The broker consumer group holding the mirror of sink ``connector``'s offsets (RocketMQ's own
    tools show its lag); connector names are unique, so no other connector shares it."""
    return f"sluice-{connector}"


class OffsetClient(Protocol):
    """The slice of SyncRocketMQClient the planner needs (kept narrow so any client fits)."""

    def queues(self, topic: str) -> list[MessageQueue]: ...
    def min_offset(self, mq: MessageQueue) -> int: ...
    def max_offset(self, mq: MessageQueue) -> int: ...
    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int: ...


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
) -> dict[str, Position]:
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
) -> tuple[PartitionRange, ...]:
    """Queue ranges narrowed to what the queues still hold (``sluice.connectors.data_loss.check_range``
    per range, with the queues' min and max offsets): a queue absent from ``min_offsets`` vanished,
    a start below min was removed by retention, an end beyond max was lost by the broker. Under
    SKIP the ranges keep their bounds clipped (possibly empty) so callers can still commit them."""
    out: list[PartitionRange] = []
    for r in ranges:
        lo = min_offsets.get(r.partition)
        hi = max_offsets.get(r.partition) if max_offsets is not None else None
        out.append(
            check_range(
                r,
                Position((lo,)) if lo is not None else None,
                Position((hi,)) if hi is not None else None,
                policy,
            )
        )
    return tuple(out)
