"""Batch ledger rows as values, and the JSON form of plan ranges.

The ledger is Sluice's equivalent of Spark's offset log + commit log in one row per batch: a row is
written PLANNED before a batch runs and flipped to COMMITTED in the commit transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sluice.connectors.model import BatchPlan, PartitionRange


@dataclass(frozen=True)
class BatchRecord:
    """One ledger row, for status and inspection."""

    connector: str
    task_id: int
    batch_id: int
    ranges: tuple[PartitionRange, ...]
    status: str
    planned_at: datetime
    committed_at: datetime | None
    attempts: int
    sink_state: dict[str, str] = field(default_factory=dict)

    @property
    def committed(self) -> bool:
        return self.committed_at is not None

    @property
    def plan(self) -> BatchPlan:
        return BatchPlan(self.connector, self.task_id, self.batch_id, self.ranges, dict(self.sink_state))


def ranges_to_json(ranges: Iterable[PartitionRange]) -> list[dict[str, Any]]:
    return [r.to_json() for r in ranges]


def ranges_from_json(raw: Sequence[Mapping[str, Any]]) -> tuple[PartitionRange, ...]:
    return tuple(PartitionRange.from_json(item) for item in raw)


def same_ranges(a: Iterable[PartitionRange], b: Iterable[PartitionRange]) -> bool:
    """Order-insensitive equality: a plan is a set of ranges, one per partition."""

    def key(r: PartitionRange) -> str:
        return json.dumps(r.to_json(), sort_keys=True)

    return sorted(map(key, a)) == sorted(map(key, b))


def record_from_row(row: Mapping[Any, Any]) -> BatchRecord:
    return BatchRecord(
        connector=row["connector"],
        task_id=int(row["task_id"]),
        batch_id=int(row["batch_id"]),
        ranges=ranges_from_json(row["ranges"]),
        status=row["status"],
        planned_at=row["planned_at"],
        committed_at=row["committed_at"],
        attempts=int(row["attempts"]),
        sink_state={str(k): str(v) for k, v in (row["sink_state"] or {}).items()},
    )
