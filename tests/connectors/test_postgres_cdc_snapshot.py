"""postgres-cdc's initial snapshot against the local PostgreSQL: existing rows read in key chunks
under concurrent inserts/updates/key changes/deletes end, with the slot's changes, equal to the
source by content; a snapshot resumed by a new task after a crash reads every row exactly once."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from sluice.connectors.cdc.postgres.source import PostgresCdcConnector, PostgresCdcTask
from sluice.connectors.positions import Position
from tests.cdc.pg import cdc_database, slot_exists, source_config
from tests.cdc.snapshot import (
    Replica,
    concurrent_snapshot_converges,
    drain,
    initial_only_reads_the_rows_and_stops,
    resumed_snapshot_reads_each_row_once,
    until_snapshot_done,
)
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase


@pytest.fixture
def cdc_pg(postgres_db: TestDatabase) -> Iterator[TestDatabase]:
    with cdc_database(postgres_db) as db:
        yield db


def _factory(db: TestDatabase, chunk: int) -> tuple[str, dict[str, str]]:
    slot = f"s_{uuid.uuid4().hex[:8]}"
    raw = {
        "name": "cdc-snap",
        **source_config(db, "shop", **{"slot.name": slot, "snapshot.chunk.size": str(chunk)}),
    }
    del raw["snapshot.mode"]  # Debezium's default: initial
    return slot, raw


def _maker(raw: dict[str, str]) -> PostgresCdcTask:
    connector = PostgresCdcConnector()
    assert connector.validate(raw) == []
    config = connector.parse(raw)
    assert config["snapshot.mode"] == raw.get("snapshot.mode", "initial")
    connector.start(config)
    return PostgresCdcTask(config, 0)


def test_a_snapshot_under_concurrent_writes_converges(cdc_pg: TestDatabase) -> None:
    _, raw = _factory(cdc_pg, 64)
    concurrent_snapshot_converges(Db.of(cdc_pg), lambda: _maker(raw), lambda t: f"public.{t}")


def test_a_resumed_snapshot_reads_each_row_once(cdc_pg: TestDatabase) -> None:
    _, raw = _factory(cdc_pg, 40)
    resumed_snapshot_reads_each_row_once(Db.of(cdc_pg), lambda: _maker(raw), lambda t: f"public.{t}")


def test_initial_only_reads_the_rows_without_a_slot(cdc_pg: TestDatabase) -> None:
    slot, raw = _factory(cdc_pg, 3)
    raw["snapshot.mode"] = "initial_only"
    initial_only_reads_the_rows_and_stops(Db.of(cdc_pg), lambda: _maker(raw), lambda t: f"public.{t}")
    assert not slot_exists(cdc_pg, slot)  # nothing holds WAL for a connector that reads no changes


def test_a_snapshot_row_has_the_values_the_log_gives_the_same_row(cdc_pg: TestDatabase) -> None:
    """Types whose text cast differs from their output (boolean: 'true' vs 't') read alike."""
    src = Db.of(cdc_pg)
    cols = "paid BOOLEAN, amount NUMERIC(8,2), at TIMESTAMPTZ, local_at TIMESTAMP, raw BYTEA, doc JSONB"
    row = "true, 12.50, '2024-05-06 07:08:09.123+02', '2024-01-01 00:00:00.5', '\\x0001', '{\"a\": [1]}'"
    src.run(f"CREATE TABLE items (id INT PRIMARY KEY, {cols})", f"INSERT INTO items VALUES (1, {row})")
    _, raw = _factory(cdc_pg, 10)
    task = _maker(raw)
    committed: dict[str, Position] = {}
    replica = Replica()
    until_snapshot_done(task, committed, replica)
    src.run(f"INSERT INTO items VALUES (2, {row})")
    drain(task, committed, replica)
    rows = replica.rows["public.items"]
    assert replica.snapshot_keys["public.items"] == ['{"id":1}']
    snapshot, logged = rows['{"id":1}'], rows['{"id":2}']
    assert snapshot["paid"] is True
    assert {k: v for k, v in snapshot.items() if k != "id"} == {k: v for k, v in logged.items() if k != "id"}
    task.close()
