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
from sluice.connectors.records import ERROR_COLUMN, Record, make_records
from sluice.connectors.rocketmq.spark_source import plan_to_json, register
from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
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
    from pyspark.sql import types as T

    register(spark)
    value_type = T.BinaryType() if isinstance(values[2], bytes) else T.StringType()
    sent = [Record("src:0", i, v, topic=topic_name, key=f"k{i}") for i, v in enumerate(values)]
    messages = converter.to_messages(make_records(spark, sent, value_type))
    assert [r["body"] == b"" for r in messages.orderBy("keys").collect()] == [
        v in (None, "", b"") for v in values
    ], "a tombstone's body is empty (a message needs one)"

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
