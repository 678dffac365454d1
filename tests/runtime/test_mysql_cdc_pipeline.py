"""mysql-cdc -> RocketMQ -> jdbc-sink (ExtractNewRecordState, upsert + delete) into PostgreSQL,
through real `sluice worker` processes: the replica ends equal to the MariaDB source by content
after inserts, updates (primary-key changes among them), deletes, transactions that touch two
tables, an added column and a TRUNCATE — and stays equal when the worker is SIGKILLed mid-run.

Each table's changes spread over its topic's four queues by key, and two sink tasks share them:
the truncate reaches the sink as a copy per queue (connectors.barriers), and the replica shows it
applied in order across queues and tasks.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.cdc.mysql import source_config
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase, table_rows
from tests.runtime.helpers import FAST_HEARTBEAT, replica_sink, wait_for

TABLES = ("orders", "customers")


def _rows(url: str, table: str) -> list[tuple[Any, ...]]:
    try:
        return table_rows(url, table)
    except Exception:  # auto-created by the sink's first batch
        return []


def _equal(src: TestDatabase, dst: TestDatabase) -> bool:
    return all(_rows(dst.url, t) == _rows(src.url, t) for t in TABLES)


def _schema(src: Db) -> None:
    src.run(
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer_id INT NOT NULL, amount DECIMAL(12,2), "
        "note VARCHAR(40), paid BOOLEAN, created DATETIME(6), day DATE, raw VARBINARY(8))",
        "CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, orders INT DEFAULT 0)",
    )


def _insert(src: Db, ids: range) -> None:
    values = ", ".join(
        f"({i}, {i % 13}, {i * 7 % 1000}.{i % 100:02d}, "
        + ("NULL" if i % 5 == 0 else f"'n😀{i}'")
        + f", {i % 2}, TIMESTAMP'2024-05-06 07:08:09.123456' + INTERVAL {i} MINUTE, "
        f"DATE'2024-02-28' + INTERVAL {i} DAY, x'{i:04x}')"
        for i in ids
    )
    src.run(f"INSERT INTO orders (id, customer_id, amount, note, paid, created, day, raw) VALUES {values}")


def _workload(src: Db, start: int, end: int) -> None:
    """Inserts, updates, primary-key changes, deletes, and two-table transactions."""
    _insert(src, range(start, end))
    src.run(
        "INSERT IGNORE INTO customers (id, name) VALUES "
        + ", ".join(f"({i}, 'c{i}')" for i in range(start, start + 13)),
        f"UPDATE orders SET amount = amount + 1, note = 'updated' WHERE id % 10 = 3 AND id >= {start}",
        # primary-key changes
        f"UPDATE orders SET id = id + 100000 WHERE id % 50 = 7 AND id >= {start} AND id < 100000",
        f"DELETE FROM orders WHERE id % 7 = 0 AND id >= {start} AND id < 100000",
        f"DELETE FROM customers WHERE id = {start + 5}",
        "BEGIN",  # one transaction over both tables
        "UPDATE customers SET orders = orders + 1, name = CONCAT(name, '+') WHERE id % 2 = 0",
        f"UPDATE orders SET note = 'both' WHERE id BETWEEN {start} AND {start + 40}",
        "COMMIT",
    )


@pytest.mark.private_worker  # stops or kills its worker, or sets its environment
@pytest.mark.slow
@pytest.mark.timeout(1500)
async def test_mysql_cdc_replica_equals_source_through_a_worker_kill(
    mariadb_db: TestDatabase, target_pg: TestDatabase, start_worker, sluice, rocketmq_admin
) -> None:
    src = Db.of(mariadb_db)
    _schema(src)
    prefix = f"M{uuid.uuid4().hex[:8]}"
    name = uuid.uuid4().hex[:8]
    small = {"batch.max.records": "300", "poll.interval.ms": "200"}
    source = source_config(mariadb_db, prefix, **{**small, "skipped.operations": "none", **FAST_HEARTBEAT})
    first = start_worker()
    await sluice.create(f"src-{name}", source)
    truncates = {"truncate.enabled": "true", "transforms.unwrap.drop.truncates": "false", "tasks.max": "2"}
    sink = replica_sink(
        target_pg, f"{prefix}_{mariadb_db.name}_", **{"auto.evolve": "true", **truncates, **FAST_HEARTBEAT}
    )
    await sluice.create(f"dst-{name}", sink)

    # snapshot.mode=never: changes count from the source's first planning; probe until one arrives
    def probe_arrived() -> bool:
        src.run(
            "INSERT INTO customers (id, name) VALUES (-1, 'p') ON DUPLICATE KEY UPDATE orders = orders + 1"
        )
        return any(row[0] == -1 for row in _rows(target_pg.url, "customers"))

    await wait_for(probe_arrived, 600, "the first change replicated")
    _workload(src, 1, 400)
    await wait_for(lambda: len(_rows(target_pg.url, "orders")) >= 100, 600, "the first changes replicated")
    first.kill()  # SIGKILL mid-run: a batch in flight is abandoned half-way
    src.run("TRUNCATE TABLE customers")  # ordered against every queue's earlier and later rows
    _workload(src, 400, 800)
    src.run("ALTER TABLE orders ADD COLUMN tag VARCHAR(12)", "UPDATE orders SET tag = 't' WHERE id % 3 = 0")
    start_worker()
    _workload(src, 800, 1000)

    await wait_for(lambda: _equal(mariadb_db, target_pg), 900, "the replica equal to the source")
    orders = _rows(target_pg.url, "orders")
    ids = {row[0] for row in orders}
    assert 7 not in ids and 100007 in ids and 49 not in ids and 100057 in ids  # key change, delete
    assert any(row[3] == "updated" for row in orders) and any(row[3] == "both" for row in orders)
    assert any(row[-1] == "t" for row in orders) and any(row[-1] is None for row in orders)  # added column
    customers = _rows(target_pg.url, "customers")
    assert any(str(row[1]).endswith("+") for row in customers)
    assert customers and all(row[0] >= 400 for row in customers)  # the truncate emptied the first ones
    # every table's changes were spread over its topic's queues by key
    for table in TABLES:
        queues = rocketmq_admin.queues(f"{prefix}_{mariadb_db.name}_{table}")
        assert sum(rocketmq_admin.max_offset(q) > 0 for q in queues) > 1, table
    for connector in (f"src-{name}", f"dst-{name}"):
        assert (await sluice.status(connector)).state == "RUNNING"
        await sluice.delete(connector)
