"""mysql-cdc against the local MariaDB (binlog ROW, full row images and metadata): a batch's range
re-read gives identical records (also by a new task, as after a crash, and after the binlog moved
on), a primary-key change is a delete and a create, an added column reaches later records, a
purged binlog file is data loss naming file and position, and bad configurations are refused up
front naming connector, field and table."""

from __future__ import annotations

import time
import uuid
from decimal import Decimal
from typing import Any

import pytest

from sluice.connectors.cdc.mysql.source import MySqlCdcConnector, MySqlCdcTask
from sluice.connectors.config import ConfigError
from sluice.connectors.data_loss import DataLossError
from sluice.connectors.model import PartitionRange
from sluice.connectors.plugins import load_connector_class
from sluice.connectors.positions import Position
from tests.cdc.mysql import open_task, source_config
from tests.cdc.records import read_records
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase


def _plan(task: MySqlCdcTask, committed: dict[str, Position]) -> list[PartitionRange]:
    """What the planner asks, in its order (connectors.planner.plan_next)."""
    task.relocate(committed)
    earliest = task.earliest_positions()
    latest = task.latest_positions(committed)
    return [PartitionRange(p, committed.get(p, earliest[p]), latest[p]) for p in task.partitions()]


def _collect(task: MySqlCdcTask, r: PartitionRange) -> list[tuple[Any, ...]]:
    """The records of ``r``, without Spark: (topic, partition, offset, key, value, timestamp)."""
    columns = ("topic", "partition", "offset", "key", "value", "timestamp")
    return [tuple(row[c] for c in columns) for row in read_records(task, r)]


def _ops(rows: list[tuple[Any, ...]]) -> list[str | None]:
    return [row[4]["op"] if row[4] else None for row in rows]


def test_a_range_reads_identically_again_with_key_changes_and_an_added_column(
    mariadb_db: TestDatabase,
) -> None:
    src = Db.of(mariadb_db)
    src.run(
        "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(8,2), at TIMESTAMP(3) NULL, "
        "day DATE, raw VARBINARY(8), big BIGINT UNSIGNED)",
        "CREATE TABLE tags (id INT PRIMARY KEY, label TEXT)",
    )
    task = open_task(mariadb_db)
    db = mariadb_db.name
    assert task.partitions() == [f"{db}.items", f"{db}.tags"]
    assert task.topics() == sorted(f"shop_{db}_{t}" for t in ("items", "tags"))
    assert all(r.is_empty for r in _plan(task, {}))  # capture starts at the first planning
    src.run(
        "INSERT INTO items VALUES " + ", ".join(
            f"({i}, 'i{i}😀', {i}.25, '2024-05-06 07:08:09.123', '2024-02-28', x'0{i % 10}ff', {2**64 - 1})"
            for i in range(1, 31)
        ),
        "BEGIN", "UPDATE items SET id = 100 WHERE id = 1", "INSERT INTO tags VALUES (1, 'x')", "COMMIT",
        "DELETE FROM items WHERE id = 2",
        "UPDATE items SET price = 9.99 WHERE id = 3",
        "ALTER TABLE items ADD COLUMN note VARCHAR(20) DEFAULT 'new'",
        "INSERT INTO items (id, name, note) VALUES (40, 'late', 'added')",
    )  # fmt: skip
    ranges = _plan(task, {})
    first = {r.partition: _collect(task, r) for r in ranges}
    items = first[f"{db}.items"]
    assert _ops(items) == ["c"] * 30 + ["d", None, "c", "d", None, "u", "c"]  # key change: d, tombstone, c
    assert [row[3] for row in items[30:33]] == [{"id": 1}, {"id": 1}, {"id": 100}]
    update = items[35][4]
    assert update["before"]["price"] == Decimal("3.25") and update["after"]["price"] == Decimal("9.99")
    assert update["source"]["table"] == "items" and update["source"]["file"].startswith("binlog.")
    first_row = items[0][4]["after"]
    assert first_row["name"] == "i1😀" and first_row["at"].isoformat().startswith("2024-05-06T07:08:09.123")
    assert first_row["big"] == 18446744073709551615 and "note" not in first_row or first_row["note"] is None
    assert items[-1][4]["after"]["note"] == "added"  # the added column flows through
    assert _ops(first[f"{db}.tags"]) == ["c"]

    src.run("INSERT INTO items (id) VALUES (50)")  # the binlog moves on; the planned range must not
    again = open_task(mariadb_db)
    committed = {r.partition: r.start for r in ranges}
    again.relocate(committed)
    assert {r.partition: _collect(again, r) for r in ranges} == first
    later = _plan(again, {r.partition: r.end for r in ranges})
    assert [_ops(_collect(again, r)) for r in later] == [["c"], []]


def test_a_batch_ends_on_a_commit_past_the_record_limit(mariadb_db: TestDatabase) -> None:
    src = Db.of(mariadb_db)
    src.run("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    task = open_task(mariadb_db, **{"batch.max.records": "5"})
    _plan(task, {})
    src.run(
        "INSERT INTO t VALUES (1, 0), (2, 0), (3, 0)",
        "INSERT INTO t VALUES (4, 0), (5, 0), (6, 0)",
        "INSERT INTO t VALUES (7, 0)",
    )
    committed: dict[str, Position] = {}
    sizes = []
    for _ in range(3):
        (r,) = _plan(task, committed)
        sizes.append(len(_collect(task, r)))
        committed = {r.partition: r.end}
    assert sizes == [6, 1, 0]  # two whole transactions pass the limit of 5; never half of one


def test_a_purged_binlog_file_is_data_loss_naming_file_and_position(mariadb_db: TestDatabase) -> None:
    Db.of(mariadb_db).run("CREATE TABLE t (id INT PRIMARY KEY)")
    task = open_task(mariadb_db)
    gone = Position((0, 1234, 0))  # binlog file 000000: never on the server, as after a purge
    with pytest.raises(DataLossError, match=r"binlog\.000000.*position 1234.*purged"):
        _plan(task, {f"{mariadb_db.name}.t": gone})


def _errors(raw: dict[str, str]) -> str:
    connector = MySqlCdcConnector()
    errors = connector.validate(raw)
    if not errors:
        try:
            connector.start(connector.parse(raw))
        except ConfigError as exc:
            return str(exc)
    return "\n".join(str(e) for e in errors)


def test_bad_configurations_are_refused_up_front(mariadb_db: TestDatabase) -> None:
    src = Db.of(mariadb_db)
    src.run("CREATE TABLE keyed (id INT PRIMARY KEY)", "CREATE TABLE loose (v INT)")
    db = mariadb_db.name
    base = {"name": "bad-cdc", **source_config(mariadb_db, "shop")}
    assert "'loose' has no primary key" in _errors(base) or f"'{db}.loose' has no primary key" in _errors(
        base
    )
    assert "matches no table" in _errors({**base, "table.include.list": f"{db}.nope"})
    assert "matches no database" in _errors({**base, "database.include.list": "nope_db"})
    assert "snapshot.mode 'when_needed' is not supported" in _errors({**base, "snapshot.mode": "when_needed"})
    own = src.run("SELECT @@server_id")[0][0]
    assert "database.server.id" in _errors({**base, "database.server.id": str(own)})
    assert "no primary key" not in _errors({**base, "table.include.list": f"{db}.keyed"})

    user = f"np_{uuid.uuid4().hex[:8]}"
    src.run(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'", f"GRANT SELECT ON `{db}`.* TO '{user}'@'%'")
    try:
        message = _errors({**base, "database.user": user, "database.password": "pw",
                           "table.include.list": f"{db}.keyed"})  # fmt: skip
        assert "connector 'bad-cdc'" in message and "REPLICATION SLAVE and REPLICATION CLIENT" in message
        assert "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.*" in message
    finally:
        src.run(f"DROP USER '{user}'@'%'")


@pytest.mark.parametrize(
    "cls",
    [
        "io.debezium.connector.mysql.MySqlConnector",
        "org.apache.rocketmq.connect.debezium.mysql.DebeziumMysqlConnector",
        "mysql-cdc",
    ],
)
def test_debezium_and_rocketmq_connect_class_names_run_mysql_cdc(cls: str) -> None:
    assert load_connector_class(cls) is MySqlCdcConnector


def test_batches_read_ahead_are_the_batches_an_inline_read_plans(mariadb_db: TestDatabase) -> None:
    """While a batch runs, the task reads the binlog after it (connectors.cdc.read_ahead); the next
    planning takes that read — continued to the binlog end when it stopped short of the limit — and
    plans exactly the ranges and records a task reading inline plans from the same positions."""
    src = Db.of(mariadb_db)
    src.run("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    task = open_task(mariadb_db, **{"batch.max.records": "5"})
    assert task.ahead is not None
    inline = open_task(mariadb_db, **{"batch.max.records": "5"})
    inline.ahead = None
    next_id = iter(range(1, 10_000))

    def transactions(count: int) -> None:  # three rows each
        rows = ("({}, 'a'), ({}, 'b😀'), ({}, NULL)",) * count
        src.run(*[f"INSERT INTO t VALUES {row.format(*[next(next_id) for _ in range(3)])}" for row in rows])

    committed: dict[str, Position] = {}
    sizes = []
    # before each planning: transactions committed after the read ahead ended (it is waited for first)
    for count in (0, 3, 1, 4, 2, 0):
        task.ahead.wait()
        transactions(count)
        ranges = _plan(task, committed)
        assert ranges == _plan(inline, committed)
        records = [row for r in ranges for row in _collect(task, r)]
        assert records == [row for r in ranges for row in _collect(inline, r)]
        sizes.append(len(records))
        previous, committed = committed, {r.partition: r.end for r in ranges}
    # 3 transactions: 2 planned, 1 read ahead, continued by the next; 4: the read ahead reaches the limit
    assert sizes == [0, 6, 6, 6, 6, 6]
    assert task.ahead.hits == 5  # every planning after the first took its read ahead

    # A busy task's read ahead follows the binlog: what commits while it follows, it reads.
    transactions(1)
    deadline = time.monotonic() + 10
    while len(getattr(task.ahead._result, "changes", ())) < 3 and time.monotonic() < deadline:  # noqa: SLF001
        time.sleep(0.05)
    assert len(getattr(task.ahead._result, "changes", ())) == 3  # noqa: SLF001
    ranges = _plan(task, committed)
    assert ranges == _plan(inline, committed)
    records = [row for r in ranges for row in _collect(task, r)]
    assert records == [row for r in ranges for row in _collect(inline, r)] and len(records) == 3
    assert task.ahead.hits == 6
    previous, committed = committed, {r.partition: r.end for r in ranges}

    # A planning from elsewhere (a batch planned again after a crash) does not take it.
    again = _plan(task, previous)
    assert again == _plan(inline, previous) and task.ahead.hits == 6
    task.close()
    inline.close()
