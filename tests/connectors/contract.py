"""The standard contract suite every connector passes (Singer's ``get_tap_test_class`` idea).

``source_test_class(case)`` / ``sink_test_class(case)`` return pytest classes; a connector's test
module assigns them to ``Test...`` names. The checks are the ones exactly-once rests on:
positions never go backwards, ``snap_end`` stays inside its range, re-reading a range gives the same
records, and re-running a sink plan (also after a half-written attempt) leaves the same target.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from connectors.api import (
    SinkConnector,
    SinkTask,
    SourceConnector,
    SourceTask,
    open_sink_task,
    open_source_task,
)
from connectors.model import BatchPlan, PartitionRange
from connectors.records import RECORD_COLUMNS, Record, check_record_columns, make_records

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def _nothing(_: Path) -> None:
    return None


@dataclass(frozen=True)
class SourceCase:
    """How to run one source connector in the contract suite."""

    name: str
    connector: type[SourceConnector]
    config: Callable[[Path], dict[str, str]]  # raw config for a scratch directory
    setup: Callable[[Path], None] = _nothing  # create the source data
    grow: Callable[[Path], None] = _nothing  # add data (positions must not go backwards)


@dataclass(frozen=True)
class SinkCase:
    name: str
    connector: type[SinkConnector]
    config: Callable[[Path], dict[str, str]]
    read_back: Callable[[Path], Any]  # the target's content, comparable with ==
    half_write: Callable[[Path], None] = _nothing  # what a crashed attempt may leave behind
    extra: dict[str, Any] = field(default_factory=dict)


def rows(df: DataFrame) -> list[tuple[Any, ...]]:
    ordered = df.select(*RECORD_COLUMNS).orderBy("partition", "offset").collect()
    return [tuple(r) for r in ordered]


def _ranges(task: SourceTask, ends: dict[str, int], starts: dict[str, int]) -> list[PartitionRange]:
    return [
        PartitionRange(p, starts.get(p, 0), task.snap_end(p, starts.get(p, 0), end))
        for p, end in ends.items()
    ]


def source_test_class(case: SourceCase) -> type:
    class SourceContract:
        @pytest.fixture
        def task(self, tmp_path: Path) -> Any:
            case.setup(tmp_path)
            raw = case.config(tmp_path)
            assert case.connector().validate(raw) == []
            configs = case.connector().task_configs(raw, 1)
            assert len(configs) == 1
            task = open_source_task(case.connector, configs[0], 0)
            yield task
            task.close()

        def test_positions_never_go_backwards(self, task: SourceTask, tmp_path: Path) -> None:
            first = task.latest_positions()
            assert set(first) == set(task.partitions())
            earliest = task.earliest_positions()
            assert all(0 <= earliest[p] <= first[p] for p in first)
            case.grow(tmp_path)
            second = task.latest_positions()
            assert all(second[p] >= first[p] for p in first)

        def test_snap_end_stays_in_range(self, task: SourceTask) -> None:
            for p, end in task.latest_positions().items():
                for candidate in sorted({0, end // 3, end // 2, end}):
                    snapped = task.snap_end(p, 0, candidate)
                    assert 0 <= snapped <= max(candidate, snapped)
                    assert task.snap_end(p, snapped, snapped) == snapped

        def test_rereading_a_range_gives_the_same_records(
            self, spark: SparkSession, task: SourceTask
        ) -> None:
            ends = task.latest_positions()
            whole = _ranges(task, ends, {})
            first = task.read(spark, whole)
            check_record_columns(first, case.name)
            once = rows(first)
            assert once, "the case must produce records"
            assert rows(task.read(spark, whole)) == once
            # Records sit inside their ranges, positions unique per partition.
            bounds = {r.partition: r for r in whole}
            assert all(bounds[rec[1]].start <= rec[2] < bounds[rec[1]].end for rec in once)
            assert len({(rec[1], rec[2]) for rec in once}) == len(once)

        def test_split_ranges_read_the_same_records(self, spark: SparkSession, task: SourceTask) -> None:
            ends = task.latest_positions()
            whole = _ranges(task, ends, {})
            middle = {r.partition: task.snap_end(r.partition, 0, r.end // 2) for r in whole}
            head = [PartitionRange(p, 0, m) for p, m in middle.items()]
            tail = _ranges(task, {r.partition: r.end for r in whole}, middle)
            assert sorted(rows(task.read(spark, head)) + rows(task.read(spark, tail))) == sorted(
                rows(task.read(spark, whole))
            )

        def test_empty_ranges_read_nothing(self, spark: SparkSession, task: SourceTask) -> None:
            empty = [PartitionRange(p, 0, 0) for p in task.partitions()]
            assert rows(task.read(spark, empty)) == []

    SourceContract.__name__ = SourceContract.__qualname__ = f"SourceContract[{case.name}]"
    return SourceContract


def sink_test_class(case: SinkCase) -> type:
    class SinkContract:
        @pytest.fixture
        def task(self, tmp_path: Path) -> Any:
            raw = case.config(tmp_path)
            assert case.connector().validate(raw) == []
            task = open_sink_task(case.connector, case.connector().task_configs(raw, 1)[0], 0)
            yield task
            task.close()

        def batch(self, spark: SparkSession, first: int, count: int) -> DataFrame:
            return make_records(
                spark,
                [
                    Record("broker-a:0", i, f"line-{i}", topic="t")
                    for i in range(first + count - 1, first - 1, -1)
                ],
            )

        def plan(self, task: SinkTask, batch_id: int, start: int, end: int) -> BatchPlan:
            bare = BatchPlan("contract", 0, batch_id, (PartitionRange("broker-a:0", start, end, "t"),))
            return BatchPlan("contract", 0, batch_id, bare.ranges, task.prepare(bare))

        def test_rerunning_a_plan_is_repeatable(
            self, spark: SparkSession, task: SinkTask, tmp_path: Path
        ) -> None:
            plan1 = self.plan(task, 1, 0, 3)
            task.write(spark, self.batch(spark, 0, 3), plan1)
            after1 = case.read_back(tmp_path)
            plan2 = self.plan(task, 2, 3, 5)
            task.write(spark, self.batch(spark, 3, 2), plan2)
            after2 = case.read_back(tmp_path)
            assert after2 != after1
            task.write(spark, self.batch(spark, 3, 2), plan2)  # the runtime re-runs an uncommitted plan
            assert case.read_back(tmp_path) == after2
            case.half_write(tmp_path)  # a crashed third attempt left a partial write behind
            task.write(spark, self.batch(spark, 3, 2), plan2)
            assert case.read_back(tmp_path) == after2

        def test_empty_batch_changes_nothing(
            self, spark: SparkSession, task: SinkTask, tmp_path: Path
        ) -> None:
            before = case.read_back(tmp_path)
            task.write(spark, self.batch(spark, 0, 0), self.plan(task, 1, 0, 0))
            assert case.read_back(tmp_path) == before

    SinkContract.__name__ = SinkContract.__qualname__ = f"SinkContract[{case.name}]"
    return SinkContract
