"""Plain values shared by the planner, the offset store, the task activities and the workflows.

Everything here is a frozen dataclass of JSON-friendly fields: these values cross Temporal
(workflow/activity inputs and heartbeat details) and PostgreSQL (plans and positions), so they must
serialise without custom codecs and must never carry records.

Positions follow Spark's Kafka source: one number per partition, the *next* position to read;
ranges are half-open ``[start, end)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


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
    start: int
    end: int
    topic: str = ""

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start:
            raise ValueError(f"invalid range {self.partition}: [{self.start}, {self.end})")

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def is_empty(self) -> bool:
        return self.end == self.start


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
        return sum(r.size for r in self.ranges)

    @property
    def is_empty(self) -> bool:
        return all(r.is_empty for r in self.ranges)

    def end_positions(self) -> dict[str, int]:
        """Positions to commit once this batch succeeded (next position per partition)."""
        return {_key(r): r.end for r in self.ranges}


def _key(r: PartitionRange) -> str:
    return f"{r.topic}/{r.partition}" if r.topic else r.partition


def queue_partition(broker_name: str, queue_id: int) -> str:
    """The partition key of a RocketMQ queue, as used in plans and the offset store."""
    return f"{broker_name}:{queue_id}"


def parse_queue_partition(partition: str) -> tuple[str, int]:
    broker, _, queue = partition.rpartition(":")
    if not broker or not queue.isdigit():
        raise ValueError(f"not a queue partition key: {partition!r} (expected '<broker>:<queue_id>')")
    return broker, int(queue)
