"""Helpers for MySQL/MariaDB change-capture tests: a Debezium MySQL connector config for one test
database (each test's database is fresh; the binlog is the server's, shared by all)."""

from __future__ import annotations

import uuid

from sqlalchemy.engine import make_url

from sluice.connectors.cdc.mysql.source import MySqlCdcConnector, MySqlCdcTask
from tests.databases import TestDatabase


def source_config(db: TestDatabase, prefix: str, **extra: str) -> dict[str, str]:
    """A Debezium MySQL connector config, as a Kafka Connect user writes it."""
    url = make_url(db.url)
    return {
        "connector.class": "io.debezium.connector.mysql.MySqlConnector",
        "database.hostname": str(url.host),
        "database.port": str(url.port),
        "database.user": db.user,
        "database.password": db.password,
        "database.include.list": db.name,
        "topic.prefix": prefix,
        "snapshot.mode": "never",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        **extra,
    }


def open_task(db: TestDatabase, **extra: str) -> MySqlCdcTask:
    """Task 0 of a validated, started ``mysql-cdc`` connector on ``db`` (a unique name)."""
    raw = {"name": f"cdc-{uuid.uuid4().hex[:6]}", **source_config(db, "shop", **extra)}
    connector = MySqlCdcConnector()
    assert connector.validate(raw) == []
    config = connector.parse(raw)
    connector.start(config)
    return MySqlCdcTask(config, 0)
