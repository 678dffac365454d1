"""postgres-cdc against the local PostgreSQL (wal_level=logical): a batch's range re-read gives
identical records (also by a new task, as after a crash, and after the WAL moved on), the slot
moves only when told a batch committed, a dropped slot is data loss naming slot and position, and
bad configurations are refused up front naming connector, field and table."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from sluice.connectors.cdc.postgres.slot import lsn_int
from sluice.connectors.cdc.postgres.source import PostgresCdcConnector, PostgresCdcTask
from sluice.connectors.config import ConfigError
from sluice.connectors.data_loss import DataLossError
from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.plugins import load_connector_class
from sluice.connectors.positions import Position
from tests.cdc.pg import cdc_database, open_task, source_config
from tests.cdc.records import read_records
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase


@pytest.fixture
def cdc_pg(postgres_db: TestDatabase) -> Iterator[TestDatabase]:
    with cdc_database(postgres_db) as db:
        yield db


def _collect(task: PostgresCdcTask, r: PartitionRange) -> list[tuple[Any, ...]]:
    """The records of ``r``, without Spark: (topic, partition, offset, key, value, timestamp)."""
    columns = ("topic", "partition", "offset", "key", "value", "timestamp")
    return [tuple(row[c] for c in columns) for row in read_records(task, r)]


def _confirmed(db: TestDatabase, slot: str) -> int:
    rows = Db.of(db).run("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                         params=(slot,))  # fmt: skip
    return lsn_int(rows[0][0])


def test_a_range_reads_identically_again_and_the_slot_moves_only_after_commit(cdc_pg: TestDatabase) -> None:
    src = Db.of(cdc_pg)
    src.run(
        "CREATE TABLE items (id INT PRIMARY KEY, name TEXT, price NUMERIC(8,2), at TIMESTAMPTZ)",
        "CREATE TABLE tags (id INT PRIMARY KEY, label TEXT)",
    )
    slot = f"s_{uuid.uuid4().hex[:8]}"
    task = open_task(cdc_pg, slot)
    assert task.partitions() == ["public.items", "public.tags"]
    assert task.topics() == ["shop_public_items", "shop_public_tags"]
    assert task.earliest_positions() == {}  # no slot yet: the first planning creates it
    assert task.latest_positions({}) == task.earliest_positions()
    src.run(
        "INSERT INTO items SELECT g, 'i' || g, g * 1.25, now() FROM generate_series(1, 30) g",
        "BEGIN; UPDATE items SET id = 100 WHERE id = 1; INSERT INTO tags VALUES (1, 'x'); COMMIT",
        "DELETE FROM items WHERE id = 2",
    )
    start = task.earliest_positions()
    latest = task.latest_positions({})
    ranges = [PartitionRange(p, start[p], latest[p]) for p in task.partitions()]
    first = {r.partition: _collect(task, r) for r in ranges}
    items = first["public.items"]
    ops = [row[4] and row[4]["op"] for row in items]
    assert ops == ["c"] * 30 + ["d", None, "c", "d", None]  # key change: delete, tombstone, create
    assert [row[3] for row in items[30:33]] == [{"id": 1}, {"id": 1}, {"id": 100}]
    assert [row[2] for row in items] == sorted(row[2] for row in items)
    assert len(first["public.tags"]) == 1 and first["public.tags"][0][0] == "shop_public_tags"

    src.run("INSERT INTO items VALUES (500, 'later', 1, now())")  # the WAL moves on
    again = PostgresCdcTask(task.config, 0)  # a new task: nothing cached, as after a crash
    assert {r.partition: _collect(again, r) for r in ranges} == first
    assert {r.partition: _collect(task, r) for r in ranges} == first

    confirmed = _confirmed(cdc_pg, slot)
    assert again.latest_positions({}) != latest  # not committed: the slot did not move ...
    assert _confirmed(cdc_pg, slot) == confirmed
    task.latest_positions({})
    task.committed(BatchPlan("cdc-test", 0, 1, tuple(ranges)))  # ... until the batch committed
    assert _confirmed(cdc_pg, slot) == int(latest["public.items"].key[0]) - 1
    after = task.latest_positions({p: latest[p] for p in task.partitions()})
    assert after["public.items"] > latest["public.items"]
    later = PartitionRange("public.items", latest["public.items"], after["public.items"])
    assert [row[3] for row in _collect(task, later)] == [{"id": 500}]
    task.close()
    again.close()


def test_a_dropped_slot_is_data_loss_naming_slot_and_position(cdc_pg: TestDatabase) -> None:
    src = Db.of(cdc_pg)
    src.run("CREATE TABLE items (id INT PRIMARY KEY)")
    slot = f"s_{uuid.uuid4().hex[:8]}"
    task = open_task(cdc_pg, slot)
    task.latest_positions({})
    committed = {"public.items": Position((lsn_int("0/10"), 0))}
    src.run(f"SELECT pg_drop_replication_slot('{slot}')")
    with pytest.raises(DataLossError, match=rf"replication slot '{slot}'.*position \(16, 0\).*dropped"):
        task.latest_positions(committed)
    task.close()


def test_class_aliases_run_postgres_cdc() -> None:
    for name in (
        "io.debezium.connector.postgresql.PostgresConnector",
        "org.apache.rocketmq.connect.debezium.postgres.DebeziumPostgresConnector",
        "postgres-cdc",
    ):
        assert load_connector_class(name) is PostgresCdcConnector


@pytest.mark.parametrize(
    ("extra", "field", "fragment"),
    [
        ({"plugin.name": "decoderbufs"}, "plugin.name", "set plugin.name=pgoutput"),
        ({"plugin.name": "wal2json"}, "plugin.name", "Debezium plugin Sluice does not decode"),
        ({"snapshot.mode": "when_needed"}, "snapshot.mode", "use initial, initial_only or never"),
        ({"database.dbname": ""}, "database.dbname", "database.dbname"),
        ({"table.include.list": "public.(unclosed"}, "table.include.list", "not a regular expression"),
    ],
)
def test_bad_fields_are_refused_naming_the_field(extra: dict[str, str], field: str, fragment: str) -> None:
    raw = {"name": "cdc-bad", **source_config(_fake_db(), "shop", **extra)}
    errors = PostgresCdcConnector().validate(raw)
    assert any(e.field == field and fragment in e.message and "cdc-bad" in e.message for e in errors), errors


def test_the_debezium_default_snapshot_mode_is_initial() -> None:
    raw = {"name": "cdc-snap", **source_config(_fake_db(), "shop")}
    del raw["snapshot.mode"]
    connector = PostgresCdcConnector()
    assert connector.validate(raw) == []
    assert connector.parse(raw)["snapshot.mode"] == "initial"


def _fake_db() -> TestDatabase:
    return TestDatabase(
        "db", "postgresql+psycopg://u@127.0.0.1:1/db", "jdbc:postgresql://127.0.0.1:1/db", "u", ""
    )


def _start_errors(db: TestDatabase, **extra: str) -> list[str]:
    connector = PostgresCdcConnector()
    raw = {"name": "cdc-bad", **source_config(db, "shop", **extra)}
    assert connector.validate(raw) == []
    with pytest.raises(ConfigError) as info:
        connector.start(connector.parse(raw))
    return [f"{e.field}: {e.message}" for e in info.value.errors]


def test_tables_that_cannot_be_captured_are_refused_up_front(cdc_pg: TestDatabase) -> None:
    Db.of(cdc_pg).run(
        "CREATE TABLE ok (id INT PRIMARY KEY)",
        "CREATE TABLE nokey (v TEXT)",
        "CREATE TABLE noident (id INT PRIMARY KEY)",
        "ALTER TABLE noident REPLICA IDENTITY NOTHING",
    )
    errors = _start_errors(
        cdc_pg, **{"table.include.list": "public.ok,public.nokey,public.noident,public.nope"}
    )
    assert any("'public.nope' matches no table" in e for e in errors), errors
    assert any("table 'public.nokey' has no primary key" in e and "table.exclude.list" in e for e in errors)
    assert any("'public.noident' has REPLICA IDENTITY NOTHING" in e for e in errors)
    assert all(e.startswith("table.include.list: connector 'cdc-bad'") for e in errors)


def test_a_user_without_replication_privilege_is_refused(cdc_pg: TestDatabase) -> None:
    admin = Db.of(cdc_pg)
    role = f"norep_{uuid.uuid4().hex[:8]}"
    admin.run(f"CREATE ROLE {role} LOGIN PASSWORD 'pw' NOREPLICATION", "CREATE TABLE ok (id INT PRIMARY KEY)")
    try:
        user_db = TestDatabase(cdc_pg.name, cdc_pg.url, cdc_pg.jdbc_url, role, "pw")
        errors = _start_errors(user_db)
        assert errors == [
            "database.user: connector 'cdc-bad': the user has no REPLICATION privilege "
            "(ALTER ROLE <user> WITH REPLICATION, or connect as a user that has it)"
        ]
    finally:
        admin.run(f"DROP ROLE {role}")


def test_an_idle_capture_on_a_busy_server_still_moves_its_slot(cdc_pg: TestDatabase) -> None:
    """WAL written for tables the slot does not publish (other databases alike) is let go by an
    empty batch once the slot lags by KEEPALIVE_LAG, so the server does not keep it forever."""
    src = Db.of(cdc_pg)
    src.run("CREATE TABLE items (id INT PRIMARY KEY)", "CREATE TABLE noise (id INT PRIMARY KEY, pad TEXT)")
    slot = f"s_{uuid.uuid4().hex[:8]}"
    task = open_task(cdc_pg, slot, **{"table.include.list": "public.items",
                                  "publication.autocreate.mode": "filtered"})  # fmt: skip
    committed = task.latest_positions({})
    src.run("INSERT INTO noise SELECT g, repeat('x', 1000) FROM generate_series(1, 3000) g")  # ~3 MiB of WAL
    assert task.latest_positions(committed) == committed  # the first idle poll only notes where WAL is
    latest = task.latest_positions(committed)
    assert latest["public.items"] > committed["public.items"]
    r = PartitionRange("public.items", committed["public.items"], latest["public.items"])
    assert task.read([r]).to_table().num_rows == 0
    assert PostgresCdcTask(task.config, 0).read([r]).to_table().num_rows == 0  # re-read after a crash
    task.committed(BatchPlan("cdc-test", 0, 1, (r,)))
    assert _confirmed(cdc_pg, slot) == int(latest["public.items"].key[0]) - 1
    assert task.earliest_positions() == latest
    task.close()
