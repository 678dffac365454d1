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

The runtime uses the same reader and writer in tasks of its own (``RocketMQReader.read`` for a
sink's shares, ``RocketMQWriter.write_batches`` for a source's), which spares a batch the Python
processes Spark starts on the driver to plan and commit a Python data source.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter
from pyspark.sql.types import StructType

from sluice.connectors.rocketmq.spark_options import PLAN_VERSION, plan_from_json, plan_to_json
from sluice.connectors.rocketmq.spark_reader import READ_SCHEMA, RocketMQReader
from sluice.connectors.rocketmq.spark_writer import RocketMQWriter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "PLAN_VERSION",
    "READ_SCHEMA",
    "SOURCE_NAME",
    "RocketMQDataSource",
    "RocketMQReader",
    "plan_from_json",
    "plan_to_json",
    "register",
]

SOURCE_NAME = "rocketmq"


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
