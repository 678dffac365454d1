"""The Spark data source ``rocketmq``: read exact queue-offset ranges, write batches to a topic.

Usage (one SparkSession per process; registering is idempotent)::

    register(spark)
    df = (spark.read.format("rocketmq").option("namesrv", "127.0.0.1:9876")
          .option("plan", plan_to_json(plan.ranges)).load())
    (df.select("body", "keys").write.format("rocketmq").option("namesrv", ...)
       .option("topic", "T").mode("append").save())

Reading is stateless and replayable: a plan lists half-open ``[start, end)`` offset ranges per queue
(connectors.model.PartitionRange), so reading the same plan twice yields the same rows. Options are
documented on ``RocketMQReader`` (spark_reader.py) and ``RocketMQWriter`` (spark_writer.py).

The plan JSON is versioned: ``{"version": 1, "ranges": [{"topic", "partition", "start", "end"}]}``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter
from pyspark.sql.types import StructType

from connectors.model import BatchPlan, PartitionRange

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from connectors.rocketmq.sync_client import SyncRocketMQClient

PLAN_VERSION = 1
SOURCE_NAME = "rocketmq"

# Spark SQL schema of the rows the reader yields (and the Arrow batches it builds match it).
READ_SCHEMA = (
    "topic string, partition string, queue_id int, queue_offset long, keys string, tags string, "
    "properties map<string,string>, born_timestamp timestamp, store_timestamp timestamp, body binary"
)


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
    from connectors.rocketmq.sync_client import SyncRocketMQClient

    key = (namesrv, tuple(sorted(options.items())))
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = SyncRocketMQClient(namesrv, **dict(options))
            _clients[key] = client
        return client


class RocketMQDataSource(DataSource):
    """``spark.read/write.format("rocketmq")``; see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return READ_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        from connectors.rocketmq.spark_reader import RocketMQReader

        return RocketMQReader(dict(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from connectors.rocketmq.spark_writer import RocketMQWriter

        if overwrite:
            raise ValueError(
                "rocketmq sink: only mode('append') is supported (a topic cannot be overwritten)"
            )
        return RocketMQWriter(dict(self.options), schema)


def register(spark: SparkSession) -> None:
    """Register the ``rocketmq`` format on ``spark`` once (later calls are no-ops)."""
    if getattr(spark, "_sluice_rocketmq_registered", False):
        return
    spark.dataSource.register(RocketMQDataSource)
    spark._sluice_rocketmq_registered = True  # type: ignore[attr-defined]
