"""Two sinks starting at once into one PostgreSQL database both create ``sluice_sink_batches``:
neither may fail (PostgreSQL's ``CREATE TABLE IF NOT EXISTS`` races with itself on ``pg_type``;
seen as a retried first batch when a replica sink and a change-log sink start together)."""

from __future__ import annotations

import threading

from sqlalchemy import create_engine, text

from sluice.connectors.jdbc import ledger
from sluice.connectors.jdbc.urls import Dialect
from tests.databases import TestDatabase


def test_concurrent_ledger_creation_does_not_fail(postgres_db: TestDatabase) -> None:
    engine = create_engine(postgres_db.url, pool_size=8)
    try:
        for attempt in range(3):  # without the lock, each attempt failed at least one of 8
            with engine.begin() as conn:
                conn.execute(text(f"DROP TABLE IF EXISTS {ledger.TABLE}"))
            barrier = threading.Barrier(8)
            errors: list[str] = []

            def create(barrier: threading.Barrier, errors: list[str]) -> None:
                barrier.wait()
                try:
                    with engine.begin() as conn:
                        ledger.ensure(conn, Dialect.POSTGRESQL)
                except Exception as exc:
                    errors.append(str(exc)[:120])

            threads = [threading.Thread(target=create, args=(barrier, errors)) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors, f"attempt {attempt}: {errors}"
    finally:
        engine.dispose()
