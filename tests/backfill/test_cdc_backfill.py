"""Backfill requests on both change-capture sources against the local databases, at the task level
(tests/backfill/cdc_backfill.py): filtered, under writes, applied once, cancelled."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sluice.connectors.cdc.mysql.source import MySqlCdcConnector, MySqlCdcTask
from sluice.connectors.cdc.postgres.source import PostgresCdcConnector, PostgresCdcTask
from tests.backfill.cdc_backfill import cancel_ends_a_running_backfill, filtered_backfill_converges
from tests.cdc import mysql, pg
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase


@pytest.fixture
def cdc_pg(postgres_db: TestDatabase) -> Iterator[TestDatabase]:
    with pg.cdc_database(postgres_db) as db:
        yield db


def _maker(connector: Any, task: Callable[..., Any], raw: dict[str, str]) -> Callable[[], Any]:
    def make() -> Any:
        assert connector.validate(raw) == []
        config = connector.parse(raw)
        connector.start(config)
        return task(config, 0)

    return make


def _mysql(db: TestDatabase, chunk: int) -> Callable[[], MySqlCdcTask]:
    raw = {"name": "cdc-backfill", **mysql.source_config(db, "shop", **{"snapshot.chunk.size": str(chunk)})}
    return _maker(MySqlCdcConnector(), MySqlCdcTask, raw)


def _postgres(db: TestDatabase, chunk: int) -> Callable[[], PostgresCdcTask]:
    extra = {"slot.name": f"s_{uuid.uuid4().hex[:8]}", "snapshot.chunk.size": str(chunk)}
    raw = {"name": "cdc-backfill", **pg.source_config(db, "shop", **extra)}
    return _maker(PostgresCdcConnector(), PostgresCdcTask, raw)


def test_mysql_filtered_backfill_under_writes_converges(mariadb_db: TestDatabase) -> None:
    filtered_backfill_converges(Db.of(mariadb_db), _mysql(mariadb_db, 48), lambda t: f"{mariadb_db.name}.{t}")


def test_postgres_filtered_backfill_under_writes_converges(cdc_pg: TestDatabase) -> None:
    filtered_backfill_converges(Db.of(cdc_pg), _postgres(cdc_pg, 48), lambda t: f"public.{t}")


def test_mysql_cancel_ends_a_running_backfill(mariadb_db: TestDatabase) -> None:
    cancel_ends_a_running_backfill(
        Db.of(mariadb_db), _mysql(mariadb_db, 50), lambda t: f"{mariadb_db.name}.{t}"
    )


def test_postgres_cancel_ends_a_running_backfill(cdc_pg: TestDatabase) -> None:
    cancel_ends_a_running_backfill(Db.of(cdc_pg), _postgres(cdc_pg, 50), lambda t: f"public.{t}")
