"""mysql-cdc's initial snapshot against the local MariaDB: existing rows read in key chunks under
concurrent inserts/updates/key changes/deletes end, with the binlog's changes, equal to the source
by content; a snapshot resumed by a new task after a crash reads every row exactly once, and the
binlog resumes where capture started (kept in the snapshot positions), not where the new task
started."""

from __future__ import annotations

import uuid

from sluice.connectors.cdc.mysql.source import MySqlCdcConnector, MySqlCdcTask
from tests.cdc.mysql import source_config
from tests.cdc.snapshot import (
    concurrent_snapshot_converges,
    initial_only_reads_the_rows_and_stops,
    resumed_snapshot_reads_each_row_once,
)
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase


def _maker(db: TestDatabase, chunk: int, mode: str = "initial") -> MySqlCdcTask:
    raw = {
        "name": f"cdc-{uuid.uuid4().hex[:6]}",
        **source_config(db, "shop", **{"snapshot.chunk.size": str(chunk)}),
    }
    if mode == "initial":
        del raw["snapshot.mode"]  # Debezium's default
    else:
        raw["snapshot.mode"] = mode
    connector = MySqlCdcConnector()
    assert connector.validate(raw) == []
    config = connector.parse(raw)
    assert config["snapshot.mode"] == mode
    connector.start(config)
    return MySqlCdcTask(config, 0)


def test_a_snapshot_under_concurrent_writes_converges(mariadb_db: TestDatabase) -> None:
    concurrent_snapshot_converges(
        Db.of(mariadb_db), lambda: _maker(mariadb_db, 64), lambda t: f"{mariadb_db.name}.{t}"
    )


def test_a_resumed_snapshot_reads_each_row_once(mariadb_db: TestDatabase) -> None:
    resumed_snapshot_reads_each_row_once(
        Db.of(mariadb_db), lambda: _maker(mariadb_db, 40), lambda t: f"{mariadb_db.name}.{t}"
    )


def test_initial_only_reads_the_rows_and_no_binlog(mariadb_db: TestDatabase) -> None:
    initial_only_reads_the_rows_and_stops(
        Db.of(mariadb_db),
        lambda: _maker(mariadb_db, 3, "initial_only"),
        lambda t: f"{mariadb_db.name}.{t}",
    )
