"""What the ``rocketmq`` data source's reader and writer share: the plan JSON, option parsing and
the client of a Python worker process.

A module of its own so ``spark_source`` (the DataSource) imports the reader and the writer, and
they import this, not the DataSource: no import cycle, and nothing here needs pyspark.

The plan JSON is versioned: ``{"version": 1, "ranges": [{"topic", "partition", "start", "end"}]}``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final

from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient

PLAN_VERSION: Final = 1


def plan_to_json(ranges: Sequence[PartitionRange] | BatchPlan) -> str:
    """The ``plan`` option for a set of queue ranges (or a whole BatchPlan's ranges)."""
    items = ranges.ranges if isinstance(ranges, BatchPlan) else ranges
    return json.dumps(
        {
            "version": PLAN_VERSION,
            "ranges": [
                {"topic": r.topic, "partition": r.partition, "start": r.start.offset, "end": r.end.offset}
                for r in items
            ],
        },
        separators=(",", ":"),
    )


def plan_from_json(text: str) -> tuple[PartitionRange, ...]:
    """Parse the ``plan`` option; errors name the offending range position and field."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"rocketmq source: option 'plan' is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("version") != PLAN_VERSION:
        raise ValueError(f"rocketmq source: option 'plan' must be an object with \"version\": {PLAN_VERSION}")
    raw = doc.get("ranges")
    if not isinstance(raw, list):
        raise ValueError("rocketmq source: option 'plan' needs a 'ranges' list")
    out: list[PartitionRange] = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise ValueError(f"rocketmq source: plan range {i} is not an object")
        for name, kind in (("topic", str), ("partition", str), ("start", int), ("end", int)):
            if not isinstance(item.get(name), kind) or isinstance(item.get(name), bool):
                raise ValueError(f"rocketmq source: plan range {i} field {name!r} must be a {kind.__name__}")
        if not item["topic"]:
            raise ValueError(f"rocketmq source: plan range {i} field 'topic' is empty")
        try:
            out.append(PartitionRange(item["partition"], item["start"], item["end"], item["topic"]))
        except ValueError as exc:
            raise ValueError(f"rocketmq source: plan range {i}: {exc}") from None
    return tuple(out)


def get_option(options: Mapping[str, str], name: str) -> str | None:
    """An option by name, whatever its case: Spark hands options over with lower-cased keys."""
    value = options.get(name.lower())
    return value if value is not None else options.get(name)


def require_option(options: Mapping[str, str], name: str) -> str:
    value = get_option(options, name)
    if not value:
        raise ValueError(f"rocketmq source: option {name!r} is required")
    return str(value)


def int_option(options: Mapping[str, str], name: str, default: int, *, minimum: int = 1) -> int:
    raw = get_option(options, name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"rocketmq source: option {name!r} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"rocketmq source: option {name!r} must be >= {minimum}, got {value}")
    return value


def bool_option(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = get_option(options, name)
    if raw is None or raw == "":
        return default
    lowered = str(raw).strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"rocketmq source: option {name!r} must be true or false, got {raw!r}")
    return lowered == "true"


def client_options(options: Mapping[str, str]) -> dict[str, Any]:
    """Client keyword arguments from data source options (credentials are passed, never logged)."""
    out: dict[str, Any] = {}
    access_key, secret_key = get_option(options, "accessKey"), get_option(options, "secretKey")
    if access_key or secret_key:
        out["access_key"] = access_key
        out["secret_key"] = secret_key
    timeout = get_option(options, "requestTimeoutSeconds")
    if timeout:
        out["request_timeout_s"] = float(timeout)
    return out


_clients: dict[tuple[str, tuple[tuple[str, Any], ...]], SyncRocketMQClient] = {}
_clients_lock = threading.Lock()


def executor_client(namesrv: str, options: Mapping[str, Any]) -> SyncRocketMQClient:
    """A client shared by the tasks of one (reused) Python worker process, created on first use.

    Why shared: Spark reuses Python workers, and a fresh client per task would pay for a new
    connection and route lookup each time. Nothing of it is pickled: readers and writers only hold
    plain options.
    """
    key = (namesrv, tuple(sorted(options.items())))
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = SyncRocketMQClient(namesrv, **dict(options))
            _clients[key] = client
        return client
