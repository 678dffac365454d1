"""The standard contract suite every connector passes (Singer's ``get_tap_test_class`` idea).

``source_test_class(case)`` / ``sink_test_class(case)`` return pytest classes; a connector's test
module assigns them to ``Test...`` names. The checks are the ones exactly-once rests on:
positions never go backwards, ``batch_end`` stays inside its range and holds the budget, re-reading a
range gives the same records, and re-running a sink plan (after a half-written attempt, or for a
transactional sink after a crash inside its transaction) leaves the same target.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sluice.connectors.api import (
    Delivery,
    SinkConnector,
    SinkTask,
    SourceConnector,
    SourceTask,
    TransactionalSink,
    delivery_of,
    open_sink_task,
    open_source_task,
)
from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.positions import Position
from sluice.connectors.records import RECORD_COLUMNS, Record, check_record_columns
from sluice.connectors.source_reads import records_table

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from sluice.activities.store import OffsetStore


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
class SinkEnv:
    """Where a sink case writes: a scratch directory, and for database sinks a fresh schema of the
    local PostgreSQL that also holds the offset store (transactional sinks commit into it)."""

    tmp: Path
    database_url: str = ""
    schema: str = ""
    store: OffsetStore | None = None
    target: Any = None  # the case's target_fixture value (e.g. a fresh MariaDB database)


@dataclass(frozen=True)
class SinkCase:
    name: str
    connector: type[SinkConnector]
    config: Callable[[SinkEnv], dict[str, str]]
    read_back: Callable[[SinkEnv], Any]  # the target's content, comparable with ==
    half_write: Callable[[SinkEnv], None] = _nothing  # what a crashed attempt may leave behind
    needs_database: bool = False
    #: A fixture giving a database other than the offset store's (``env.target``). A transactional
    #: sink writing there commits the data with a ledger row first and the store's positions right
    #: after, so a crash between the two leaves the rows written: the re-run must not repeat them.
    target_fixture: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class _Crash(Exception):
    """The worker dying inside a transactional sink's transaction, just before it commits."""


class _CrashingCommitter:
    def __init__(self, store: OffsetStore) -> None:
        self.store = store

    def same_database(self, database_url: str) -> bool:
        return self.store.same_database(database_url)

    def commit(self, plan: BatchPlan, connection: Any) -> None:
        raise _Crash


def rows(df: DataFrame) -> list[tuple[Any, ...]]:
    ordered = df.select(*RECORD_COLUMNS).orderBy("partition", "offset").collect()
    return [tuple(r) for r in ordered]


def read_rows(task: SourceTask, ranges: list[PartitionRange]) -> list[tuple[Any, ...]]:
    """The records of a read in (partition, offset) order, read without Spark (a source speaks
    Arrow: connectors.source_reads); as Spark collects them: maps as dicts, times naive UTC."""
    table = task.read(ranges).to_table()
    assert table.column_names[: len(RECORD_COLUMNS)] == list(RECORD_COLUMNS), table.column_names
    columns = [table.column(c).to_pylist() for c in RECORD_COLUMNS]
    columns[5] = [None if h is None else dict(h) for h in columns[5]]
    columns[6] = [None if t is None else t.astimezone(UTC).replace(tzinfo=None) for t in columns[6]]
    return sorted(zip(*columns, strict=True), key=lambda rec: (rec[1], rec[2]))


def _ranges(
    task: SourceTask, ends: dict[str, Position], starts: dict[str, Position] | None = None
) -> list[PartitionRange]:
    """Ranges from ``starts`` (default: earliest) to where the task ends a batch at ``ends``."""
    first = starts or task.earliest_positions()
    return [PartitionRange(p, first[p], task.batch_end(p, first[p], end, None)) for p, end in ends.items()]


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
            first = task.latest_positions({})
            assert set(first) == set(task.partitions())
            earliest = task.earliest_positions()
            assert all(earliest[p] <= first[p] for p in first)
            case.grow(tmp_path)
            second = task.latest_positions(first)
            assert all(second[p] >= first[p] for p in first)
            # The same source seen twice is the same object (the planner compares meta "id").
            assert all(second[p].get("id") == first[p].get("id") for p in first)

        def test_batch_end_stays_in_range_and_holds_the_budget(self, task: SourceTask) -> None:
            earliest = task.earliest_positions()
            for p, latest in task.latest_positions({}).items():
                start = earliest[p]
                backlog = task.backlog(p, start, latest)
                for budget in (None, 1, 2, 3):
                    end = task.batch_end(p, start, latest, budget)
                    assert start <= end <= latest
                    assert task.batch_end(p, end, end, budget) == end
                    if budget is not None and backlog is not None and task.position_unit == "records":
                        assert end.offset - start.offset <= budget

        def test_rereading_a_range_gives_the_same_records(self, task: SourceTask) -> None:
            whole = _ranges(task, task.latest_positions({}))
            once = read_rows(task, whole)
            assert once, "the case must produce records"
            assert read_rows(task, whole) == once
            # Records sit inside their ranges, positions unique per partition.
            bounds = {r.partition: r for r in whole}
            assert all(bounds[rec[1]].start.offset <= rec[2] < bounds[rec[1]].end.offset for rec in once)
            assert len({(rec[1], rec[2]) for rec in once}) == len(once)

        def test_spark_reads_what_arrow_reads(self, spark: SparkSession, task: SourceTask) -> None:
            """The runtime's Spark binding of the read (activities.spark_binding) loses, adds and
            changes nothing."""
            from sluice.activities.spark_binding import source_frame

            whole = _ranges(task, task.latest_positions({}))
            frame = source_frame(spark, task.read(whole))
            check_record_columns(frame, case.name)
            assert rows(frame) == read_rows(task, whole)

        def test_split_ranges_read_the_same_records(self, task: SourceTask) -> None:
            latest = task.latest_positions({})
            whole = _ranges(task, latest)
            middle = {
                r.partition: task.batch_end(r.partition, r.start, r.end, max(1, (r.size or 2) // 2))
                for r in whole
            }
            head = [PartitionRange(r.partition, r.start, middle[r.partition]) for r in whole]
            tail = _ranges(task, {r.partition: r.end for r in whole}, middle)
            assert sorted(read_rows(task, head) + read_rows(task, tail)) == sorted(read_rows(task, whole))

        def test_empty_ranges_read_nothing(self, task: SourceTask) -> None:
            empty = [PartitionRange(p, pos, pos) for p, pos in task.earliest_positions().items()]
            assert task.read(empty).is_empty
            assert read_rows(task, empty) == []

    SourceContract.__name__ = SourceContract.__qualname__ = f"SourceContract[{case.name}]"
    return SourceContract


def sink_test_class(case: SinkCase) -> type:
    class SinkContract:
        @pytest.fixture
        def env(self, tmp_path: Path, request: pytest.FixtureRequest) -> SinkEnv:
            if not case.needs_database:
                return SinkEnv(tmp_path)
            from sluice.activities.store import OffsetStore

            url = request.getfixturevalue("stack_config").database_url
            schema = request.getfixturevalue("fresh_schema")
            store = OffsetStore(url, schema=schema, engine=request.getfixturevalue("pg_engine"))
            store.migrate()
            target = request.getfixturevalue(case.target_fixture) if case.target_fixture else None
            return SinkEnv(tmp_path, url, schema, store, target)

        @pytest.fixture
        def task(self, env: SinkEnv) -> Any:
            raw = case.config(env)
            assert case.connector().validate(raw) == []
            task = open_sink_task(case.connector, case.connector().task_configs(raw, 1)[0], 0)
            if isinstance(task, TransactionalSink):
                assert env.store is not None, f"{case.name}: a transactional sink needs needs_database"
                task.bind_positions(env.store.committer())
            yield task
            task.close()

        def batch(self, first: int, count: int) -> pa.Table:
            return records_table(
                [
                    Record("broker-a:0", i, f"line-{i}", topic="t")
                    for i in range(first + count - 1, first - 1, -1)
                ],
            )

        def plan(self, task: SinkTask, batch_id: int, start: int, end: int) -> BatchPlan:
            bare = BatchPlan("contract", 0, batch_id, (PartitionRange("broker-a:0", start, end, "t"),))
            return BatchPlan("contract", 0, batch_id, bare.ranges, task.prepare(bare))

        def attempt(
            self,
            task: SinkTask,
            env: SinkEnv,
            plan: BatchPlan,
            records: pa.Table,
            *,
            crash: bool = False,
        ) -> None:
            """One attempt of ``plan`` as the runtime makes it; ``crash``: the worker dies before the
            commit (a transactional sink's transaction rolls back; any other sink's write stays)."""
            if not isinstance(task, TransactionalSink):
                task.write(records, plan)
                return
            assert env.store is not None
            env.store.record_plan(plan)
            if not crash:
                task.write(records, plan)
                return
            task.bind_positions(_CrashingCommitter(env.store))
            with pytest.raises(_Crash):
                task.write(records, plan)
            task.bind_positions(env.store.committer())

        def test_rerunning_a_plan_is_repeatable(self, task: SinkTask, env: SinkEnv) -> None:
            assert delivery_of(task) in (Delivery.EXACTLY_ONCE, Delivery.IDEMPOTENT, Delivery.AT_LEAST_ONCE)
            self.attempt(task, env, self.plan(task, 1, 0, 3), self.batch(0, 3))
            after1 = case.read_back(env)
            plan2 = self.plan(task, 2, 3, 5)
            self.attempt(task, env, plan2, self.batch(3, 2), crash=True)
            crashed = case.read_back(env)
            if isinstance(task, TransactionalSink) and not case.target_fixture:
                assert crashed == after1  # nothing of the crashed attempt is visible
            self.attempt(task, env, plan2, self.batch(3, 2))  # the runtime re-runs it
            after2 = case.read_back(env)
            assert after2 != after1
            if case.target_fixture:  # the target had committed: the re-run wrote nothing again
                assert after2 == crashed
            if isinstance(task, TransactionalSink):
                assert env.store is not None and env.store.pending_plan("contract", 0) is None
                return
            task.write(self.batch(3, 2), plan2)  # and again: still one copy
            assert case.read_back(env) == after2
            case.half_write(env)  # a crashed third attempt left a partial write behind
            task.write(self.batch(3, 2), plan2)
            assert case.read_back(env) == after2

        def test_empty_batch_changes_nothing(self, task: SinkTask, env: SinkEnv) -> None:
            self.attempt(task, env, self.plan(task, 1, 0, 3), self.batch(0, 3))
            before = case.read_back(env)
            self.attempt(task, env, self.plan(task, 2, 3, 3), self.batch(3, 0))
            assert case.read_back(env) == before

    SinkContract.__name__ = SinkContract.__qualname__ = f"SinkContract[{case.name}]"
    # its env reaches the stack through getfixturevalue: say which lane it is in (tests/conftest.py)
    return pytest.mark.stack(SinkContract) if case.needs_database else SinkContract
