"""A JDBC sink batch staged partition by partition (connectors.jdbc.staging), as a Spark job's
tasks stage it, against real PostgreSQL and MariaDB: for every write mode the target ends exactly as
when the same records are written from the driver (``write``), positions commit with the rows,
the staging tables go with the commit, a re-staged batch (a crash before the merge) is applied
once, and refused rows commit nothing. Each partition is staged in a process of its own (as an
executor's Python worker would), so nothing but the stager's small results reaches the test."""

from __future__ import annotations

import os
import pickle
from concurrent.futures import ProcessPoolExecutor
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import create_engine

from sluice.activities.store import OffsetStore
from sluice.connectors.api import StagedRowsRefused, TaskStager
from sluice.connectors.jdbc.sink import JdbcSinkTask
from sluice.connectors.jdbc.staging import STAGING_SCHEMA, StagedTable
from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.records import Record
from sluice.connectors.source_reads import records_table
from tests.store.helpers import offsets
from tests.store.test_jdbc_sink import DIALECTS, VALUE, rows, task_for

#: (extra config, records per partition): the partitions of one batch, in partition order.
CASES = {
    "insert": ({}, [[(0, 1, "a")], [(0, 2, "b"), (1, 3, "c")]]),
    "upsert, a key in two partitions: the later partition's record wins": (
        {"insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id"},
        [[(0, 1, "first"), (1, 2, "b")], [(0, 1, "last"), (1, 3, "c")]],
    ),
    "upsert with deletes": (
        {"insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id", "delete.enabled": "true"},
        [[(0, 1, "a"), (1, 2, "b"), (2, 2, None)], [(0, 3, "c")]],
    ),
}


def _partitions(spec: list[list[tuple[int, int, str | None]]]) -> list[pa.Table]:
    """Each partition's records: queue ``broker-a:<partition>``, offsets as given."""
    return [
        records_table(
            [
                Record(
                    f"broker-a:{p}",
                    offset,
                    None if name is None else (key, name, Decimal(key), None),
                    topic="orders",
                    key=str(key),
                )  # fmt: skip
                for offset, key, name in records
            ],
            VALUE,
        )
        for p, records in enumerate(spec)
    ]


def _plan(store: OffsetStore, task: JdbcSinkTask, batch_id: int, parts: list[pa.Table]) -> BatchPlan:
    ranges = tuple(
        PartitionRange(f"broker-a:{p}", min(offsets), max(offsets) + 1, "orders")
        for p, t in enumerate(parts)
        if (offsets := t.column("offset").to_pylist())
    )
    plan = BatchPlan("jdbc-out", 0, batch_id, ranges)
    return store.record_plan(BatchPlan("jdbc-out", 0, batch_id, ranges, task.prepare(plan)))


def _stage(stager: TaskStager, records: bytes, partition: int) -> bytes:
    """In a process of its own: a partition staged, its result pickled (as a Spark task returns it)."""
    table = pa.ipc.open_stream(records).read_all()
    return pickle.dumps(stager(table, partition))


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def _staged(stager: TaskStager, parts: list[pa.Table]) -> list[list[StagedTable]]:
    with ProcessPoolExecutor(max_workers=2) as pool:
        done = [pool.submit(_stage, stager, _ipc(t), p) for p, t in enumerate(parts)]
        return [pickle.loads(f.result()) for f in done]


@pytest.fixture(params=DIALECTS)
def db(request: pytest.FixtureRequest, stack_config: object) -> Any:  # stack_config: the lane
    return request.getfixturevalue(request.param)


def _staging_tables(db: Any) -> list[tuple[Any, ...]]:
    if "postgres" in db.url:
        return rows(db, f"SELECT tablename FROM pg_tables WHERE schemaname = '{STAGING_SCHEMA}'")
    return rows(db, "SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'sluice_stage%'")


@pytest.mark.parametrize("case", CASES)
def test_a_staged_batch_ends_as_one_written_from_the_driver(
    case: str, store: OffsetStore, db: Any, tasks: list[JdbcSinkTask]
) -> None:
    extra, spec = CASES[case]
    parts = _partitions(spec)
    driver = task_for(db, store, tasks, **extra, **{"table.name.format": "driver_${topic}"})
    driver.write(pa.concat_tables(parts), _plan(store, driver, 0, parts))
    expected = rows(db, "SELECT id, name, amount FROM driver_orders ORDER BY id")

    task = task_for(db, store, tasks, **extra)
    plan = _plan(store, task, 1, parts)
    stager = task.stager(plan)
    assert stager is not None
    shares = _staged(stager, parts)
    assert {t.pid for share in shares for t in share}.isdisjoint({os.getpid()})
    task.write_staged(shares, plan)
    assert rows(db, "SELECT id, name, amount FROM orders ORDER BY id") == expected
    assert _staging_tables(db) == []  # dropped with the commit
    assert offsets(store.committed_positions("jdbc-out"))["orders/broker-a:1"] == len(spec[1])


def test_a_batch_staged_twice_is_merged_once_and_refused_rows_commit_nothing(
    store: OffsetStore, db: Any, tasks: list[JdbcSinkTask]
) -> None:
    extra = {"insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id"}
    task = task_for(db, store, tasks, **extra)
    parts = _partitions([[(0, 1, "a"), (1, 2, "b")], [(0, 3, "c")]])
    plan = _plan(store, task, 0, parts)
    stager = task.stager(plan)
    assert stager is not None
    _staged(stager, parts)  # a crash after staging, before the merge: the re-run stages again
    task.write_staged(_staged(stager, parts), plan)
    assert rows(db, "SELECT id, name FROM orders ORDER BY id") == [(1, "a"), (2, "b"), (3, "c")]

    with create_engine(db.url).begin() as conn:
        conn.exec_driver_sql("ALTER TABLE orders ADD CONSTRAINT short_name CHECK (char_length(name) < 5)")
    refused = _partitions([[(2, 4, "ok")], [(1, 5, "far too long")]])
    plan = _plan(store, task, 1, refused)
    stager = task.stager(plan)
    assert stager is not None
    with pytest.raises(StagedRowsRefused, match="connector 'jdbc-out' task 0 batch 1"):
        task.write_staged(_staged(stager, refused), plan)
    assert rows(db, "SELECT id FROM orders ORDER BY id") == [(1,), (2,), (3,)]
    assert offsets(store.committed_positions("jdbc-out")) == {"orders/broker-a:0": 2, "orders/broker-a:1": 1}
    assert _staging_tables(db) == []
