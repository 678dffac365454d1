"""mysql-cdc's on-demand snapshots against the local MariaDB (connectors.cdc.ondemand): a signal row
in Debezium's signal table re-reads a table captured with snapshot.mode=never while a writer changes
it, and the replica ends equal to the source; a chunk re-read after a crash gives a subset of the
same records; bad signals are skipped with a warning; a bad signal table fails validation."""

from __future__ import annotations

import uuid

import pytest

from sluice.connectors.cdc.mysql.source import MySqlCdcConnector, MySqlCdcTask
from sluice.connectors.config import ConfigError
from tests.cdc.mysql import source_config
from tests.cdc.signal import (
    SIGNALS,
    a_change_inside_the_window_wins,
    bad_signals_are_skipped,
    create_signal_table,
    rereads_are_subsets,
    resnapshot_converges,
)
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase


def _config(db: TestDatabase, chunk: int, **extra: str) -> dict[str, str]:
    return {
        "name": f"cdc-{uuid.uuid4().hex[:6]}",
        **source_config(db, "shop", **{"snapshot.chunk.size": str(chunk)}),
        "signal.data.collection": f"{db.name}.{SIGNALS}",
        **extra,
    }


def _maker(db: TestDatabase, chunk: int) -> MySqlCdcTask:
    raw = _config(db, chunk)
    connector = MySqlCdcConnector()
    assert connector.validate(raw) == []
    config = connector.parse(raw)
    connector.start(config)
    return MySqlCdcTask(config, 0)


def test_a_signalled_snapshot_under_concurrent_writes_converges(mariadb_db: TestDatabase) -> None:
    resnapshot_converges(
        Db.of(mariadb_db), lambda: _maker(mariadb_db, 64), lambda t: f"{mariadb_db.name}.{t}"
    )


def test_a_reread_chunk_is_a_subset_of_the_same_records(mariadb_db: TestDatabase) -> None:
    rereads_are_subsets(Db.of(mariadb_db), lambda: _maker(mariadb_db, 40), lambda t: f"{mariadb_db.name}.{t}")


def test_bad_signals_are_skipped_and_stop_ends_a_snapshot(mariadb_db: TestDatabase, caplog) -> None:
    bad_signals_are_skipped(
        Db.of(mariadb_db), lambda: _maker(mariadb_db, 8), lambda t: f"{mariadb_db.name}.{t}", caplog
    )


def _start_errors(raw: dict[str, str]) -> str:
    connector = MySqlCdcConnector()
    assert connector.validate(raw) == []
    with pytest.raises(ConfigError) as failure:
        connector.start(connector.parse(raw))
    return str(failure.value)


def test_a_bad_signal_table_fails_validation_naming_connector_and_field(mariadb_db: TestDatabase) -> None:
    db = Db.of(mariadb_db)
    db.run("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))")
    raw = _config(mariadb_db, 10, name="sig-check")
    text = _start_errors(raw)
    assert "connector 'sig-check'" in text and "signal.data.collection" in text and "does not exist" in text
    db.run(f"CREATE TABLE {SIGNALS} (id VARCHAR(42) PRIMARY KEY, kind VARCHAR(32))")
    text = _start_errors(raw)
    assert "lacks column(s) type, data" in text, text
    db.run(f"DROP TABLE {SIGNALS}")
    create_signal_table(db)
    assert "signal.data.collection" in _start_errors({**raw, "snapshot.mode": "initial_only"})
    MySqlCdcConnector().start(MySqlCdcConnector().parse(raw))  # a good one passes
    bad = MySqlCdcConnector().validate({**raw, "signal.data.collection": "nodot"})
    assert [e.field for e in bad] == ["signal.data.collection"]


def test_a_change_between_a_chunk_read_and_the_log_end_wins(mariadb_db: TestDatabase) -> None:
    a_change_inside_the_window_wins(
        Db.of(mariadb_db), lambda: _maker(mariadb_db, 100), lambda t: f"{mariadb_db.name}.{t}"
    )
