"""A change-capture task's records read without Spark: ``read`` is plain Arrow (connectors.source_reads),
so the CDC tests need the source database but no JVM."""

from __future__ import annotations

import json
from typing import Any

from sluice.connectors.api import SourceTask
from sluice.connectors.model import PartitionRange


def read_records(task: SourceTask, r: PartitionRange) -> list[dict[str, Any]]:
    """The records of ``r`` in offset order, each the record columns as Python values (key and
    value as dicts, the timestamp as a datetime)."""
    rows = task.read([r]).to_table().to_pylist()
    return sorted(rows, key=lambda row: row["offset"])


def as_json(value: dict[str, Any] | None) -> str | None:
    """A key or value as compact JSON text — what a keyed replica indexes its rows by (None: a
    truncate's key, a tombstone's value)."""
    if value is None:
        return None
    return json.dumps(value, separators=(",", ":"), default=str)
