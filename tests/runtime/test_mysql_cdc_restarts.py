"""mysql-cdc -> RocketMQ -> jdbc-sink into PostgreSQL through a restart of the source MariaDB and
a restart of the RocketMQ broker, each under a live insert/update/delete load (two-table
transactions among it), through a real `sluice worker`.

After each restart the replica equals the source by content, no task FAILED (a restart is retried),
and the change log holds every change exactly once (``tests.runtime.cdc_restarts``: doubled changes
and version gaps). A MariaDB restart also starts a new binlog file: capture must follow the rotation.
"""

from __future__ import annotations

import uuid

import pytest

from sluice.deploy.local.config import StackConfig
from tests.cdc.mysql import source_config
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase
from tests.runtime.cdc_restarts import insert_orders, schema, through_restarts
from tests.runtime.helpers import FAST_RETRY


@pytest.mark.fault
@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_mysql_cdc_through_source_and_broker_restarts(
    mariadb_db: TestDatabase, target_pg: TestDatabase, start_worker, sluice, stack_config: StackConfig
) -> None:
    src = Db.of(mariadb_db)
    schema(src)
    insert_orders(src, range(1, 101))  # read by the initial snapshot; the load never touches them
    prefix = f"R{uuid.uuid4().hex[:8]}"
    name = uuid.uuid4().hex[:8]
    source = source_config(
        mariadb_db,
        prefix,
        **{"batch.max.records": "2000", "poll.interval.ms": "200", "snapshot.mode": "initial", **FAST_RETRY},
    )
    start_worker()

    # capture is live once the snapshot's rows are in: the load's changes all come from the binlog
    await through_restarts(
        sluice,
        name,
        (source, f"{prefix}_{mariadb_db.name}_"),
        mariadb_db,
        target_pg,
        stack_config,
        "mariadb",
    )
