"""mysql-cdc and TRUNCATE against the local MariaDB, as Debezium's MySQL connector does it: with
``skipped.operations=none`` a ``TRUNCATE [TABLE] [db.]name`` of a captured table is one truncate
event (``op`` ``t``, no before/after, no key, a ``source`` block naming the statement's binlog
position) between the rows around it, read again identically by a new task; a TRUNCATE of a table
that is not captured yields nothing; by default (``t`` skipped) nothing is emitted for it. The
statement parser is table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.connectors.cdc.mysql.source import MySqlCdcTask
from sluice.connectors.cdc.mysql.truncate import truncated_table
from sluice.connectors.model import PartitionRange
from sluice.connectors.positions import Position
from tests.cdc.mysql import open_task
from tests.cdc.records import read_records
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase


@pytest.mark.parametrize(
    ("query", "schema", "expected"),
    [
        ("TRUNCATE TABLE items", b"shop", ("shop", "items")),
        ("truncate items;", "shop", ("shop", "items")),
        ("TRUNCATE `other`.`odd``name`", b"shop", ("other", "odd`name")),
        ("/* app */ TRUNCATE TABLE shop . items", b"", ("shop", "items")),
        ("TRUNCATE TABLE items, tags", b"shop", None),  # not MySQL syntax
        ("DROP TABLE items", b"shop", None),
        ("ALTER TABLE items TRUNCATE PARTITION p0", b"shop", None),  # a partition: not the table
    ],
)
def test_truncate_statements_name_their_table(query: str, schema: Any, expected: Any) -> None:
    assert truncated_table(query, schema) == expected


def _ranges(task: MySqlCdcTask, committed: dict[str, Position]) -> list[PartitionRange]:
    task.relocate(committed)
    earliest = task.earliest_positions()
    latest = task.latest_positions(committed)
    return [PartitionRange(p, committed.get(p, earliest[p]), latest[p]) for p in task.partitions()]


def _read(task: MySqlCdcTask, r: PartitionRange) -> list[tuple[Any, ...]]:
    return [(row["topic"], row["offset"], row["key"], row["value"]) for row in read_records(task, r)]


def test_a_truncate_is_a_debezium_truncate_event_read_again_identically(mariadb_db: TestDatabase) -> None:
    src = Db.of(mariadb_db)
    src.run(
        "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))",
        "CREATE TABLE skipped_table (id INT PRIMARY KEY)",
    )
    db = mariadb_db.name
    task = open_task(mariadb_db, **{"skipped.operations": "none", "table.include.list": f"{db}.items"})
    default = open_task(mariadb_db, **{"table.include.list": f"{db}.items"})
    assert all(r.is_empty for r in _ranges(task, {})) and all(r.is_empty for r in _ranges(default, {}))
    src.run(
        "INSERT INTO items VALUES (1, 'a'), (2, 'b')",
        "TRUNCATE TABLE items",
        "TRUNCATE skipped_table",
        "INSERT INTO items VALUES (3, 'c')",
    )
    (r,) = _ranges(task, {})
    first = _read(task, r)
    assert [v["op"] for _, _, _, v in first] == ["c", "c", "t", "c"]
    topic, _, key, value = first[2]
    assert topic == f"shop_{db}_items" and key is None
    assert value["before"] is None and value["after"] is None
    source = value["source"]
    assert (source["connector"], source["db"], source["table"], source["row"]) == ("mysql", db, "items", 0)
    assert source["file"] and source["pos"] > first[1][3]["source"]["pos"]

    src.run("INSERT INTO items VALUES (9, 'later')")  # the binlog moves on
    again = MySqlCdcTask(task.config, 0)  # nothing cached, as after a crash
    assert _read(again, r) == first

    (d,) = _ranges(default, {})
    assert [v["op"] for _, _, _, v in _read(default, d)] == ["c", "c", "c", "c"]  # 1, 2, 3, 9
    for t in (task, again, default):
        t.close()
