"""Plain values shared by the planner, the offset store, the task activities and the workflows.

Everything here is a frozen dataclass of JSON-friendly fields: these values cross Temporal
(workflow/activity inputs and heartbeat details) and PostgreSQL (plans and positions), so they must
serialise without custom codecs and must never carry records.

Positions (connectors.positions) are "the next position to read" per partition, ordered and possibly
composite; ranges are half-open ``[start, end)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sluice.connectors.positions import PartitionKey, Position, as_position


class DataLossPolicy(StrEnum):
    """What to do when a start position is no longer retained by the source (like failOnDataLoss)."""

    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class PartitionRange:
    """Half-open range ``[start, end)`` of one partition.

    For a source connector ``partition`` is the connector's opaque source-partition key (a file
    path, a table name); for a sink it is a RocketMQ queue written as ``"<broker>:<queue_id>"``
    under ``topic``.
    """

    partition: str
    start: Position
    end: Position
    topic: str = ""

    def __post_init__(self) -> None:
        # Plain integers are accepted for offset positions (queue and byte offsets).
        object.__setattr__(self, "start", as_position(self.start))
        object.__setattr__(self, "end", as_position(self.end))
        if self.end < self.start:
            raise ValueError(f"invalid range {self.key}: [{self.start}, {self.end})")

    @classmethod
    def offsets(cls, partition: str, start: int, end: int, topic: str = "") -> PartitionRange:
        return cls(partition, Position((start,)), Position((end,)), topic)

    @property
    def key(self) -> PartitionKey:
        return PartitionKey(self.partition, self.topic)

    @property
    def size(self) -> int:
        """Units between start and end, for offset positions (records of a queue, bytes of a file)."""
        return self.end.offset - self.start.offset

    @property
    def is_empty(self) -> bool:
        return self.end.key == self.start.key

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "start": self.start.to_json(),
            "end": self.end.to_json(),
        }

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> PartitionRange:
        """Read a stored range; integer bounds (written before positions were versioned) still read."""
        where = f"range of partition {item.get('partition')!r}"
        return cls(
            partition=str(item["partition"]),
            start=Position.from_json(item["start"], where=f"{where} start"),
            end=Position.from_json(item["end"], where=f"{where} end"),
            topic=str(item.get("topic", "")),
        )


@dataclass(frozen=True)
class BatchPlan:
    """One micro-batch: recorded before it runs, re-run identically if it did not commit."""

    connector: str
    task_id: int
    batch_id: int
    ranges: tuple[PartitionRange, ...]
    # Sink-specific state captured when the plan was recorded (e.g. a file sink's length before
    # the batch) so a re-run can undo a partial write. JSON-serialisable.
    sink_state: dict[str, str] = field(default_factory=dict)

    @property
    def record_span(self) -> int:
        """Records covered, for plans over offset positions (queues); composite plans count 0."""
        return sum(r.size for r in self.ranges if r.start.is_offset)

    @property
    def is_empty(self) -> bool:
        return all(r.is_empty for r in self.ranges)

    def end_positions(self) -> dict[PartitionKey, Position]:
        """Positions to commit once this batch succeeded (next position per partition)."""
        return {r.key: r.end for r in self.ranges}


def queue_partition(broker_name: str, queue_id: int) -> str:
    """The partition key of a RocketMQ queue, as used in plans and the offset store."""
    return f"{broker_name}:{queue_id}"


def parse_queue_partition(partition: str) -> tuple[str, int]:
    broker, _, queue = partition.rpartition(":")
    if not broker or not queue.isdigit():
        raise ValueError(f"not a queue partition key: {partition!r} (expected '<broker>:<queue_id>')")
    return broker, int(queue)
