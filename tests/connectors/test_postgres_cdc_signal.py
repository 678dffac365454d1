"""postgres-cdc's on-demand snapshots against the local PostgreSQL (connectors.cdc.ondemand): a
signal row in Debezium's signal table re-reads a table captured with snapshot.mode=never while a
writer changes it, and the replica ends equal to the source; a change between a chunk's select and
the log end wins; a chunk re-read after a crash gives a subset of the same records; bad signals are
skipped with a warning; a bad signal table fails validation."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from sluice.connectors.cdc.postgres.source import PostgresCdcConnector, PostgresCdcTask
from sluice.connectors.config import ConfigError
from tests.cdc.pg import cdc_database, source_config
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


@pytest.fixture
def cdc_pg(postgres_db: TestDatabase) -> Iterator[TestDatabase]:
    with cdc_database(postgres_db) as db:
        yield db


def _config(db: TestDatabase, chunk: int, **extra: str) -> dict[str, str]:
    slot = f"s_{uuid.uuid4().hex[:8]}"
    return {
        "name": "cdc-signal",
        **source_config(db, "shop", **{"slot.name": slot, "snapshot.chunk.size": str(chunk)}),
        "signal.data.collection": f"public.{SIGNALS}",
        **extra,
    }


def _factory(db: TestDatabase, chunk: int) -> Callable[[], PostgresCdcTask]:
    raw = _config(db, chunk)

    def make() -> PostgresCdcTask:
        connector = PostgresCdcConnector()
        assert connector.validate(raw) == []
        config = connector.parse(raw)
        connector.start(config)
        return PostgresCdcTask(config, 0)

    return make


def _public(table: str) -> str:
    return f"public.{table}"


def test_a_signalled_snapshot_under_concurrent_writes_converges(cdc_pg: TestDatabase) -> None:
    resnapshot_converges(Db.of(cdc_pg), _factory(cdc_pg, 64), _public)


def test_a_change_between_a_chunk_read_and_the_log_end_wins(cdc_pg: TestDatabase) -> None:
    a_change_inside_the_window_wins(Db.of(cdc_pg), _factory(cdc_pg, 100), _public)


def test_a_reread_chunk_is_a_subset_of_the_same_records(cdc_pg: TestDatabase) -> None:
    rereads_are_subsets(Db.of(cdc_pg), _factory(cdc_pg, 40), _public)


def test_bad_signals_are_skipped_and_stop_ends_a_snapshot(cdc_pg: TestDatabase, caplog) -> None:
    bad_signals_are_skipped(Db.of(cdc_pg), _factory(cdc_pg, 8), _public, caplog)


def _start_errors(raw: dict[str, str]) -> str:
    connector = PostgresCdcConnector()
    assert connector.validate(raw) == []
    with pytest.raises(ConfigError) as failure:
        connector.start(connector.parse(raw))
    return str(failure.value)


def test_a_bad_signal_table_fails_validation_naming_connector_and_field(cdc_pg: TestDatabase) -> None:
    db = Db.of(cdc_pg)
    db.run("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))")
    raw = _config(cdc_pg, 10, name="sig-check")
    text = _start_errors(raw)
    assert "connector 'sig-check'" in text and "signal.data.collection" in text and "does not exist" in text
    db.run(f"CREATE TABLE {SIGNALS} (id VARCHAR(42) PRIMARY KEY, kind VARCHAR(32))")
    assert "lacks column(s) type, data" in _start_errors(raw)
    db.run(f"DROP TABLE {SIGNALS}", f"CREATE TABLE {SIGNALS} (id VARCHAR(42), type VARCHAR(32), data TEXT)")
    assert "primary key" in _start_errors(raw)
    db.run(f"DROP TABLE {SIGNALS}")
    create_signal_table(db)
    assert "signal.data.collection" in _start_errors({**raw, "snapshot.mode": "initial_only"})
    PostgresCdcConnector().start(PostgresCdcConnector().parse(raw))  # a good one passes
