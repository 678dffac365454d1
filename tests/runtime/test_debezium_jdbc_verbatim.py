"""A Debezium MySQL source and a Confluent JDBC sink, configured as their documentation writes them:
converters named by Kafka's class only (no ``schemas.enable`` line: envelopes by default, for keys
and values), ``pk.mode=record_key`` without ``pk.fields`` (the key struct's fields are the key),
``delete.enabled``. Through RocketMQ, the PostgreSQL table ends equal to the MariaDB one by content
under inserts, updates, primary-key changes and deletes.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from sluice.workflows.types import TaskState
from tests.cdc.mysql import source_config
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase, table_rows
from tests.runtime.helpers import wait_for

KAFKA_JSON = "org.apache.kafka.connect.json.JsonConverter"
CONVERTERS = {"key.converter": KAFKA_JSON, "value.converter": KAFKA_JSON}


def _rows(url: str, table: str) -> list[tuple[Any, ...]]:
    try:
        return table_rows(url, table)
    except Exception:  # auto-created by the sink's first batch
        return []


def _debezium_source(db: TestDatabase, prefix: str) -> dict[str, str]:
    """Debezium's MySQL connector config with converters named by class only."""
    config = source_config(db, prefix, **{"table.include.list": f"{db.name}.accounts"})
    del config["value.converter.schemas.enable"]
    return {**config, "database.server.id": "184054", "snapshot.mode": "initial",
            "poll.interval.ms": "200", **CONVERTERS}  # fmt: skip


def _confluent_sink(target: TestDatabase, topic: str) -> dict[str, str]:
    return {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "connection.url": target.jdbc_url,
        "connection.user": target.user,
        "connection.password": target.password,
        "topics": topic,
        "table.name.format": "accounts",
        "transforms": "unwrap",
        "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
        "transforms.unwrap.drop.tombstones": "false",
        "insert.mode": "upsert",
        "pk.mode": "record_key",
        "delete.enabled": "true",
        "auto.create": "true",
        "poll.interval.ms": "200",
        **CONVERTERS,
    }


@pytest.mark.timeout(900)
async def test_verbatim_debezium_source_and_confluent_sink_replicate_by_content(
    mariadb_db: TestDatabase, target_pg: TestDatabase, start_worker, sluice
) -> None:
    src = Db.of(mariadb_db)
    src.run(
        "CREATE TABLE accounts (id BIGINT PRIMARY KEY, name VARCHAR(40) NOT NULL, "
        "balance DECIMAL(12,2), note TEXT)",
        "INSERT INTO accounts VALUES " + ", ".join(f"({i}, 'a{i}', {i}.25, 'ñ{i}')" for i in range(1, 21)),
    )
    prefix = f"V{uuid.uuid4().hex[:8]}"
    name = uuid.uuid4().hex[:8]
    start_worker()
    await sluice.create(f"src-{name}", _debezium_source(mariadb_db, prefix))
    # Debezium's <prefix>.<db>.<table>, dots as '_' on RocketMQ (docs/connectors.md, "CDC: MySQL/MariaDB")
    await sluice.create(f"dst-{name}", _confluent_sink(target_pg, f"{prefix}_{mariadb_db.name}_accounts"))

    def equal() -> bool:
        return _rows(target_pg.url, "accounts") == _rows(mariadb_db.url, "accounts")

    await wait_for(equal, 600, "the snapshot replicated")
    # The table's columns are the source's, not the records' coordinates (topic, offset, key, value).
    assert len(_rows(target_pg.url, "accounts")[0]) == 4
    src.run(
        "INSERT INTO accounts VALUES (21, 'new', 1.50, NULL), (22, 'newer', NULL, 'x')",
        "UPDATE accounts SET balance = balance * 2, note = 'updated' WHERE id % 3 = 0",
        "UPDATE accounts SET id = id + 1000 WHERE id IN (5, 7)",  # primary-key changes
        "DELETE FROM accounts WHERE id IN (2, 11, 22)",
        "BEGIN",
        "UPDATE accounts SET name = CONCAT(name, '+') WHERE id < 10",
        "DELETE FROM accounts WHERE id = 1",
        "COMMIT",
    )
    await wait_for(equal, 600, "the changes replicated")
    ids = {row[0] for row in _rows(target_pg.url, "accounts")}
    assert {1005, 1007, 21} <= ids and not ids & {1, 2, 5, 7, 11, 22}
    for connector in (f"src-{name}", f"dst-{name}"):
        status = await sluice.status(connector)
        assert status.state == "RUNNING" and all(t.state == TaskState.RUNNING for t in status.tasks), status
        await sluice.delete(connector)
