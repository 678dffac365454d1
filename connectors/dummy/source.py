"""Dummy source: ``records.per.partition`` deterministic records per partition, built by Spark.

Partition ``dummy-<p>`` holds records ``0 .. N-1``: value ``value-<p>-<i>``, key ``key-<p>-<i>``,
timestamp ``2024-01-01T00:00:00Z + i ms``, header ``dummy.partition=<p>``. Faults: ``fail.at.offset``
(a read of a range containing it raises, naming partition and offset), ``fail.once.marker``,
``slow.ms``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sluice.connectors.api import SourceConnector, SourceTask, split_round_robin
from sluice.connectors.config import ConfigDef, ConfigField, at_least
from sluice.connectors.dummy.faults import FAULT_FIELDS, InjectedFault, fail_once, sleep_if_slow
from sluice.connectors.model import PartitionRange
from sluice.connectors.positions import Position
from sluice.connectors.records import empty_records

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

BASE_MILLIS = 1_704_067_200_000  # 2024-01-01T00:00:00Z


def partition_key(index: int) -> str:
    return f"dummy-{index}"


def partition_index(key: str) -> int:
    return int(key.rpartition("-")[2])


class DummySourceTask(SourceTask):
    position_unit = "records"

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        super().__init__(config, task_id)
        assigned = list(config.get("assigned.partitions") or [])
        self._partitions = assigned or [partition_key(i) for i in range(int(config.get("partitions", 1)))]
        self._count = int(config.get("records.per.partition", 100))

    def partitions(self) -> list[str]:
        return list(self._partitions)

    def latest_positions(self, committed: Mapping[str, Position]) -> dict[str, Position]:
        return {p: Position((self._count,)) for p in self._partitions}

    def read(self, spark: SparkSession, ranges: Sequence[PartitionRange]) -> DataFrame:
        # pyspark: config validation imports this module (the dummy connectors)
        from pyspark.sql import functions as F

        sleep_if_slow(self.config)
        fail_at = int(self.config.get("fail.at.offset", -1))
        for r in ranges:
            if r.start.offset <= fail_at < r.end.offset:
                raise InjectedFault(
                    f"connector {self.name!r}: injected failure at partition {r.partition!r} offset {fail_at}"
                )
        if fail_once(self.config, f"read {[(r.partition, r.start, r.end) for r in ranges]}"):
            raise InjectedFault(f"connector {self.name!r}: injected one-time failure (fail.once.marker)")
        frames = []
        for r in ranges:
            if r.is_empty:
                continue
            p = partition_index(r.partition)
            i = F.col("id")
            frames.append(
                spark.range(r.start.offset, r.end.offset, numPartitions=1).select(
                    F.lit(self.config.get("topic")).cast("string").alias("topic"),
                    F.lit(r.partition).alias("partition"),
                    i.alias("offset"),
                    F.concat(F.lit(f"key-{p}-"), i.cast("string")).alias("key"),
                    F.concat(F.lit(f"value-{p}-"), i.cast("string")).alias("value"),
                    F.create_map(F.lit("dummy.partition"), F.lit(str(p))).alias("headers"),
                    F.timestamp_millis(F.lit(BASE_MILLIS) + i).alias("timestamp"),
                )
            )
        if not frames:
            return empty_records(spark)
        result = frames[0]
        for frame in frames[1:]:
            result = result.unionByName(frame)
        return result


class DummySourceConnector(SourceConnector):
    plugin_name = "dummy-source"
    task_class = DummySourceTask
    config_def = ConfigDef(
        (
            ConfigField("partitions", int, 1, validator=at_least(1)),
            ConfigField("records.per.partition", int, 100, validator=at_least(0)),
            ConfigField("assigned.partitions", list[str], [], doc="set by task_configs"),
            *FAULT_FIELDS,
        )
    )

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        keys = [partition_key(i) for i in range(int(config.get("partitions", 1)))]
        return [{**config, "assigned.partitions": ",".join(g)} for g in split_round_robin(keys, max_tasks)]
