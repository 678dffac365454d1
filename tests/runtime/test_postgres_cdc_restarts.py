"""postgres-cdc -> RocketMQ -> jdbc-sink into another PostgreSQL database through a restart of
PostgreSQL and a restart of the RocketMQ broker, each under a live insert/update/delete load
(two-table transactions among it), through a real `sluice worker`.

The PostgreSQL restart takes down, at once, the source, the target and Sluice's own position store:
every connector must retry, and the replication slot (which survives a restart: it is on disk) must
still hold every change not yet confirmed. After each restart the replica equals the source by
content, no task FAILED, and the change log holds every change exactly once
(``tests.runtime.cdc_restarts``: doubled changes and version gaps).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from sluice.deploy.local.config import StackConfig
from tests.cdc.pg import cdc_database, slot_exists, source_config
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase
from tests.runtime.cdc_restarts import insert_orders, schema, through_restarts
from tests.runtime.helpers import FAST_RETRY


@pytest.fixture
def cdc_pg(postgres_db: TestDatabase) -> Iterator[TestDatabase]:
    """The source; its slots are dropped before it (listed before ``start_worker`` in a test's
    arguments, so the workers stop first)."""
    with cdc_database(postgres_db) as db:
        yield db


@pytest.mark.fault
@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_postgres_cdc_through_postgres_and_broker_restarts(
    cdc_pg: TestDatabase, target_pg: TestDatabase, start_worker, sluice, stack_config: StackConfig
) -> None:
    src = Db.of(cdc_pg)
    schema(src)
    # deletes carry the whole old row (the change log's rewritten deletes keep their version)
    src.run("ALTER TABLE orders REPLICA IDENTITY FULL", "ALTER TABLE customers REPLICA IDENTITY FULL")
    insert_orders(src, range(1, 101))  # read by the initial snapshot; the load never touches them
    prefix = f"Q{uuid.uuid4().hex[:8]}"
    name = uuid.uuid4().hex[:8]
    slot = f"s_{name}"
    source = source_config(
        cdc_pg,
        prefix,
        **{
            "slot.name": slot,
            "batch.max.records": "2000",
            "poll.interval.ms": "200",
            "snapshot.mode": "initial",
            **FAST_RETRY,
        },
    )
    start_worker()

    await through_restarts(
        sluice,
        name,
        (source, f"{prefix}_public_"),
        cdc_pg,
        target_pg,
        stack_config,
        "postgres",
        # source, target and position store all went away; the replication slot must survive
        lambda: assert_slot(cdc_pg, slot),
    )


def assert_slot(db: TestDatabase, slot: str) -> None:
    assert slot_exists(db, slot), f"replication slot {slot} did not survive the restart"
