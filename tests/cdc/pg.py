"""Helpers for PostgreSQL change-capture tests: a source database whose replication slots are
dropped before the database is (PostgreSQL refuses to drop a database a slot belongs to)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sluice.connectors.cdc.postgres.source import PostgresCdcConnector, PostgresCdcTask
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase


def drop_slots(db: TestDatabase, timeout_s: float = 60) -> None:
    """Drop every replication slot of ``db`` (waiting while a killed worker's peek still holds one)."""
    admin = Db.of(db)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            admin.run(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                f"WHERE database = '{db.name}'"
            )
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


@contextmanager
def cdc_database(db: TestDatabase) -> Iterator[TestDatabase]:
    try:
        yield db
    finally:
        drop_slots(db)


def slot_exists(db: TestDatabase, slot: str) -> bool:
    return bool(Db.of(db).run("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", params=(slot,)))


def source_config(db: TestDatabase, prefix: str, **extra: str) -> dict[str, str]:
    """A Debezium PostgreSQL connector config, as a Kafka Connect user writes it."""
    from sqlalchemy.engine import make_url

    url = make_url(db.url)
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": str(url.host),
        "database.port": str(url.port),
        "database.user": db.user,
        "database.password": db.password,
        "database.dbname": db.name,
        "topic.prefix": prefix,
        "plugin.name": "pgoutput",
        "snapshot.mode": "never",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        **extra,
    }


def open_task(db: TestDatabase, slot: str | None = None, **extra: str) -> PostgresCdcTask:
    """Task 0 of a validated, started ``postgres-cdc`` connector on ``db`` (a new slot unless named)."""
    slot = slot or f"s_{uuid.uuid4().hex[:8]}"
    raw = {"name": f"cdc-{uuid.uuid4().hex[:6]}", **source_config(db, "shop", **{"slot.name": slot, **extra})}
    connector = PostgresCdcConnector()
    assert connector.validate(raw) == []
    config = connector.parse(raw)
    connector.start(config)
    return PostgresCdcTask(config, 0)
