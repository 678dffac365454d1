"""The Spark data source ``rocketmq``: read exact queue-offset ranges, write batches to a topic.

Usage (one SparkSession per process; registering is idempotent)::

    register(spark)
    df = (spark.read.format("rocketmq").option("namesrv", "127.0.0.1:9876")
          .option("plan", plan_to_json(plan.ranges)).load())
    (df.select("body", "keys").write.format("rocketmq").option("namesrv", ...)
       .option("topic", "T").mode("append").save())

Reading is stateless and replayable: a plan lists half-open ``[start, end)`` offset ranges per queue
(connectors.model.PartitionRange), so reading the same plan twice yields the same rows. Options are
documented on ``RocketMQReader`` (spark_reader.py) and ``RocketMQWriter`` (spark_writer.py); the
versioned plan JSON and the option helpers they share are in spark_options.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter
from pyspark.sql.types import StructType

from sluice.connectors.rocketmq.spark_options import PLAN_VERSION, plan_from_json, plan_to_json
from sluice.connectors.rocketmq.spark_reader import RocketMQReader
from sluice.connectors.rocketmq.spark_writer import RocketMQWriter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "PLAN_VERSION",
    "READ_SCHEMA",
    "SOURCE_NAME",
    "RocketMQDataSource",
    "plan_from_json",
    "plan_to_json",
    "register",
]

SOURCE_NAME = "rocketmq"

# Spark SQL schema of the rows the reader yields (and the Arrow batches it builds match it).
READ_SCHEMA = (
    "topic string, partition string, queue_id int, queue_offset long, keys string, tags string, "
    "properties map<string,string>, born_timestamp timestamp, store_timestamp timestamp, body binary"
)


class RocketMQDataSource(DataSource):
    """``spark.read/write.format("rocketmq")``; see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return READ_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return RocketMQReader(dict(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
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
