"""Database pipelines both ways through real faults: the target table ends equal to the source, by
content, with no lost and no doubled row.

- MariaDB -> jdbc-source (timestamp+incrementing) -> RocketMQ -> jdbc-sink (upsert) into another
  PostgreSQL database (the target ledger path): the worker is SIGKILLed mid-run, rows are inserted
  and updated, and the broker is restarted mid-run.
- PostgreSQL -> jdbc-source (incrementing) -> RocketMQ -> jdbc-sink (insert) into MariaDB: the
  target database is restarted mid-run. ``insert`` mode makes a doubled row a primary-key error.
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import pytest

from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.stack import restart_service
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase, table_rows
from tests.runtime.helpers import FAST_HEARTBEAT, FAST_RETRY, wait_for

COLUMNS = "id, customer, amount, note, updated_at"


#: The MariaDB source table of the faults tests (a timestamp+incrementing source reads its index).
MARIADB_ORDERS = (
    "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR(20) NOT NULL, "
    "amount DECIMAL(14,2) NOT NULL, note VARCHAR(40), updated_at TIMESTAMP(6) NOT NULL "
    "DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6), KEY (updated_at, id))"
)


def _insert(db: Db, ids: range) -> None:
    values = ", ".join(
        f"({i}, 'c{i % 97}', {Decimal(i) / 100 + Decimal('1000.05')}, "
        + ("NULL" if i % 7 == 0 else f"'n😀{i}'")
        + ")"
        for i in ids
    )
    db.run(f"INSERT INTO orders (id, customer, amount, note) VALUES {values}")


def _rows(url: str) -> list[tuple[Any, ...]]:
    try:
        rows = table_rows(url, "orders")
    except Exception:  # the table is auto-created by the sink's first batch
        return []
    return [row[:5] for row in rows]


def _source(db: Db, prefix: str, mode: str, **extra: str) -> dict[str, str]:
    config = {
        "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
        "connection.url": db.jdbc_url,
        "connection.user": db.user,
        "connection.password": db.password,
        "mode": mode,
        "incrementing.column.name": "id",
        "table.whitelist": "orders",
        "topic.prefix": prefix,
        "batch.max.rows": "400",
        "poll.interval.ms": "200",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        **FAST_RETRY,
        **extra,
    }
    if mode == "timestamp+incrementing":
        config["timestamp.column.name"] = "updated_at"
    return config


def _sink(target: TestDatabase, prefix: str, insert_mode: str, **extra: str) -> dict[str, str]:
    """Tables are named by the topic after Kafka's RegexRouter took the prefix off (``orders``)."""
    return {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "connection.url": target.jdbc_url,
        "connection.user": target.user,
        "connection.password": target.password,
        "topics.regex": f"{prefix}.*",
        "table.name.format": "${topic}",
        "transforms": "route",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": f"{prefix}(.*)",
        "transforms.route.replacement": "$1",
        "insert.mode": insert_mode,
        "pk.mode": "record_value",
        "pk.fields": "id",
        "auto.create": "true",
        "batch.max.records": "500",
        "poll.interval.ms": "200",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        **FAST_RETRY,
        **extra,
    }


@pytest.mark.fault
@pytest.mark.private_worker  # SIGKILLs its worker
@pytest.mark.slow
@pytest.mark.timeout(1500)
async def test_mariadb_to_postgres_through_worker_kill_and_broker_restart(
    start_worker, sluice, stack_config: StackConfig, mariadb_db: TestDatabase, postgres_db: TestDatabase
) -> None:
    src = Db.of(mariadb_db)
    src.run(MARIADB_ORDERS)
    _insert(src, range(1, 3001))
    prefix = f"F{uuid.uuid4().hex[:8]}-"
    name = uuid.uuid4().hex[:8]
    first = start_worker()
    await sluice.create(f"src-{name}", _source(src, prefix, "timestamp+incrementing", **FAST_HEARTBEAT))
    await sluice.create(f"dst-{name}", _sink(postgres_db, prefix, "upsert", **FAST_HEARTBEAT))

    await wait_for(lambda: len(_rows(postgres_db.url)) >= 600, 600, "the first batches in PostgreSQL")
    first.kill()  # SIGKILL mid-run: batches in flight are abandoned half-way
    start_worker()
    src.run("UPDATE orders SET amount = amount + 1, note = 'updated' WHERE id % 10 = 0")
    _insert(src, range(3001, 4001))
    restart_service(stack_config, "broker")
    src.run("UPDATE orders SET customer = 'late' WHERE id > 3900")

    await wait_for(
        lambda: _rows(postgres_db.url) == _rows(src.url),
        900,
        "the PostgreSQL table equal to the MariaDB table after the kill and the broker restart",
    )
    rows = _rows(postgres_db.url)
    assert len(rows) == 4000 and rows[9][3] == "updated" and rows[-1][1] == "late"
    for connector in (f"src-{name}", f"dst-{name}"):
        assert (await sluice.status(connector)).state == "RUNNING"
        await sluice.delete(connector)


@pytest.mark.fault
@pytest.mark.slow
@pytest.mark.timeout(1500)
async def test_postgres_to_mariadb_through_target_restart(
    start_worker, sluice, stack_config: StackConfig, mariadb_db: TestDatabase, postgres_db: TestDatabase
) -> None:
    src = Db.of(postgres_db)
    src.run(
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR(20) NOT NULL, "
        "amount NUMERIC(14,2) NOT NULL, note VARCHAR(40), "
        "updated_at TIMESTAMPTZ(6) NOT NULL DEFAULT clock_timestamp())"
    )
    _insert(src, range(1, 3001))
    prefix = f"G{uuid.uuid4().hex[:8]}-"
    name = uuid.uuid4().hex[:8]
    start_worker()
    await sluice.create(f"src-{name}", _source(src, prefix, "incrementing"))
    await sluice.create(f"dst-{name}", _sink(mariadb_db, prefix, "insert"))

    await wait_for(lambda: len(_rows(mariadb_db.url)) >= 600, 600, "the first batches in MariaDB")
    restart_service(stack_config, "mariadb")
    _insert(src, range(3001, 4001))

    await wait_for(
        lambda: _rows(mariadb_db.url) == _rows(src.url),
        900,
        "the MariaDB table equal to the PostgreSQL table after the target's restart",
    )
    assert len(_rows(mariadb_db.url)) == 4000
    for connector in (f"src-{name}", f"dst-{name}"):
        assert (await sluice.status(connector)).state == "RUNNING"
        await sluice.delete(connector)
