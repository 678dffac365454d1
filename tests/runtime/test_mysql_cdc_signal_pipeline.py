"""A signalled re-snapshot through real `sluice worker` processes: mysql-cdc (snapshot.mode=never)
-> RocketMQ -> jdbc-sink (ExtractNewRecordState, upsert + delete) into PostgreSQL. Rows that existed
before capture started reach the replica only because a Debezium ``execute-snapshot`` signal row
re-reads the table while a writer keeps inserting, updating, re-keying and deleting; the replica
ends equal to the source by content, and the signal table never becomes a topic or a table."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.cdc.mysql import source_config
from tests.cdc.signal import SIGNALS, create_signal_table, execute
from tests.cdc.snapshot import Writer, _create
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase, table_rows
from tests.runtime.helpers import replica_sink, wait_for


def _rows(url: str, table: str) -> list[tuple[Any, ...]]:
    try:
        return table_rows(url, table)
    except Exception:  # auto-created by the sink's first batch
        return []



@pytest.mark.slow
@pytest.mark.timeout(1200)
async def test_a_signalled_resnapshot_under_writes_makes_the_replica_equal(
    mariadb_db: TestDatabase, target_pg: TestDatabase, start_worker, sluice
) -> None:
    src = Db.of(mariadb_db)
    _create(src, "items", range(2, 4002, 2))  # before capture: only a snapshot can bring these
    create_signal_table(src)
    prefix = f"S{uuid.uuid4().hex[:8]}"
    name = uuid.uuid4().hex[:8]
    source = source_config(
        mariadb_db,
        prefix,
        **{
            "batch.max.records": "500",
            "poll.interval.ms": "200",
            "snapshot.chunk.size": "300",
            "signal.data.collection": f"{mariadb_db.name}.{SIGNALS}",
        },
    )
    start_worker()
    await sluice.create(f"src-{name}", source)
    await sluice.create(f"dst-{name}", replica_sink(target_pg, f"{prefix}_{mariadb_db.name}_"))

    # snapshot.mode=never: changes count from the source's first planning; probe until one arrives
    def probe_arrived() -> bool:
        src.run("INSERT INTO items (id, name, qty) VALUES (-1, 'p', 0) ON DUPLICATE KEY UPDATE qty = qty + 1")
        return any(row[0] == -1 for row in _rows(target_pg.url, "items"))

    await wait_for(probe_arrived, 600, "the first change replicated")
    assert len(_rows(target_pg.url, "items")) < 100  # the old rows are not there yet
    writer = Writer(src, "items", seed=5, first_new_id=100_000, below=2000)
    writer.start()
    try:
        await wait_for(lambda: writer.count > 20, 60, "the writer under way")
        execute(src, "pipeline-resnap", f"{mariadb_db.name}.items")
        untouched = {(i, f"n{i}", i % 97) for i in range(2000, 4002, 2)}
        await wait_for(
            lambda: untouched <= set(_rows(target_pg.url, "items")), 600, "the snapshot's untouched rows"
        )
    finally:
        writes = writer.stop()
    assert writes > 50, writes

    def equal() -> bool:
        return _rows(target_pg.url, "items") == _rows(mariadb_db.url, "items")

    await wait_for(equal, 600, "the replica equal to the source")
    assert len(_rows(target_pg.url, "items")) > 2000
    assert _rows(target_pg.url, SIGNALS) == []  # the signal table is never replicated
    for connector in (f"src-{name}", f"dst-{name}"):
        assert (await sluice.status(connector)).state == "RUNNING"
        await sluice.delete(connector)
