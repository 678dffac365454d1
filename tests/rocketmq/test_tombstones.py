"""Tombstones through the real broker: a null record value and an empty one stay apart end to end.

A RocketMQ message always has a body, so a null value (a tombstone: jdbc-sink's delete.enabled
deletes its key) travels as an empty body marked ``sluice.tombstone=true``; an empty value is an
empty body without the mark. The converters, the writer and the reader must keep the difference.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import pytest

from sluice.activities.sink_runner import QueueView
from sluice.connectors.converters import TOMBSTONE_PROPERTY, BytesConverter, Converter, StringConverter
from sluice.connectors.planner import PlanRequest, plan_next
from sluice.connectors.records import ERROR_COLUMN, Record
from sluice.connectors.rocketmq.spark_source import plan_to_json, register
from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.connectors.source_reads import records_table
from sluice.deploy.local.config import StackConfig
from tests.connectors.decoding import records_of

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.mark.parametrize(
    ("converter", "values"),
    [
        (StringConverter(), [None, "", "x", None, "tab\t\U0001f600"]),
        (BytesConverter(), [None, b"", b"\x00", None, b"\xff\xfe"]),
    ],
    ids=["string", "bytes"],
)
def test_null_and_empty_values_survive_the_broker_apart(
    spark: SparkSession, stack_config: StackConfig, topic_name: str, converter: Converter, values: list[Any]
) -> None:
    import pyarrow as pa

    register(spark)
    value_type = pa.binary() if isinstance(values[2], bytes) else pa.string()
    sent = [Record("src:0", i, v, topic=topic_name, key=f"k{i}") for i, v in enumerate(values)]
    records = records_table(sent, value_type)
    made = converter.arrow_encoder(records.schema).encode(records)
    assert made.column("body").to_pylist() == [
        b"" if v is None else (v if isinstance(v, bytes) else v.encode()) for v in values
    ], "a tombstone's body is empty (a message needs one)"
    assert [dict(p).get(TOMBSTONE_PROPERTY) for p in made.column("properties").to_pylist()] == [
        "true" if v is None else None for v in values
    ]
    messages = spark.createDataFrame(made)

    with SyncRocketMQClient(stack_config.namesrv_address) as client:
        messages.write.format("rocketmq").option("namesrv", stack_config.namesrv_address).option(
            "topic", topic_name
        ).mode("append").save()
        plan = plan_next(PlanRequest("test", 0, 0, {}), QueueView(client, [topic_name], 0, 1)).plan
    assert plan is not None
    pulled = (
        spark.read.format("rocketmq")
        .option("namesrv", stack_config.namesrv_address)
        .option("plan", plan_to_json(plan.ranges))
        .load()
    )
    marks = {r["keys"]: r["properties"].get(TOMBSTONE_PROPERTY) for r in pulled.collect()}
    assert marks == {f"k{i}": ("true" if v is None else None) for i, v in enumerate(values)}

    back = sorted(records_of(converter, pulled).to_pylist(), key=lambda r: r["key"])
    assert [(r["key"], r["value"], r[ERROR_COLUMN]) for r in back] == [
        (f"k{i}", v, None) for i, v in enumerate(values)
    ]
    assert all(TOMBSTONE_PROPERTY not in dict(r["headers"]) for r in back), "the mark is not a header"
