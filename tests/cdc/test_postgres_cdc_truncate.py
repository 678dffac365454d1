"""postgres-cdc and TRUNCATE against the local PostgreSQL: with ``skipped.operations=none`` a
TRUNCATE is one truncate event per truncated table in Debezium's shape (``op`` ``t``, no
``before``/``after``, no key, a ``source`` block), at its place among the rows of its transaction,
and a range re-read by a new task (as after a crash) gives it once more, identically; under the
default (``t`` skipped) nothing is emitted for it, and ``skipped.operations`` skips other
operations too (a delete with its tombstone)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sluice.connectors.cdc.postgres.source import PostgresCdcTask
from sluice.connectors.model import PartitionRange
from tests.cdc.pg import cdc_database, open_task
from tests.cdc.records import read_records
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase


@pytest.fixture
def cdc_pg(postgres_db: TestDatabase) -> Iterator[TestDatabase]:
    with cdc_database(postgres_db) as db:
        yield db


def _records(task: PostgresCdcTask, ranges: list[PartitionRange]) -> dict[str, list[Any]]:
    return {
        r.partition: [
            (row["topic"], row["offset"], row["key"], row["value"]) for row in read_records(task, r)
        ]
        for r in ranges
    }


def _batch(task: PostgresCdcTask) -> list[PartitionRange]:
    start = task.earliest_positions()
    latest = task.latest_positions({})
    return [PartitionRange(p, start[p], latest[p]) for p in task.partitions()]


def _ops(records: list[Any]) -> list[str | None]:
    return [v and v["op"] for _, _, _, v in records]


def test_a_truncate_is_a_debezium_truncate_event_read_again_identically(cdc_pg: TestDatabase) -> None:
    src = Db.of(cdc_pg)
    src.run(
        "CREATE TABLE items (id INT PRIMARY KEY, name TEXT)",
        "CREATE TABLE tags (id INT PRIMARY KEY, label TEXT)",
        "CREATE TABLE other (id INT PRIMARY KEY)",
    )
    task = open_task(
        cdc_pg, **{"skipped.operations": "none", "table.include.list": "public.items,public.tags"}
    )
    assert task.latest_positions({}) == task.earliest_positions()  # creates the slot
    src.run(
        "INSERT INTO items VALUES (1, 'a'), (2, 'b')",
        "INSERT INTO tags VALUES (1, 'x')",
        "BEGIN; INSERT INTO items VALUES (3, 'c'); TRUNCATE items, tags, other; "
        "INSERT INTO items VALUES (4, 'd'); COMMIT",
    )
    ranges = _batch(task)
    first = _records(task, ranges)
    items, tags = first["public.items"], first["public.tags"]
    assert _ops(items) == ["c", "c", "c", "t", "c"]  # the truncate at its place in the transaction
    assert _ops(tags) == ["c", "t"]
    topic, _, key, value = items[3]
    assert topic == "shop_public_items" and key is None
    assert value["before"] is None and value["after"] is None
    source = value["source"]
    assert (source["connector"], source["db"], source["schema"], source["table"]) == (
        "postgresql", cdc_pg.name, "public", "items",
    )  # fmt: skip
    assert source["lsn"] and source["txId"] and value["ts_ms"] == source["ts_ms"]
    assert tags[1][3]["source"]["txId"] == source["txId"]  # one TRUNCATE, one event per table
    assert [r[1] for r in items] == sorted(r[1] for r in items)

    src.run("INSERT INTO items VALUES (9, 'later')")  # the WAL moves on
    again = PostgresCdcTask(task.config, 0)  # nothing cached, as after a crash
    assert _records(again, ranges) == first  # the truncate comes back once, identically
    task.close()
    again.close()


def test_by_default_truncates_are_skipped_and_skipped_operations_skips_others(cdc_pg: TestDatabase) -> None:
    src = Db.of(cdc_pg)
    src.run("CREATE TABLE items (id INT PRIMARY KEY, name TEXT)")
    default = open_task(cdc_pg)
    no_deletes = open_task(cdc_pg, **{"skipped.operations": "d,u"})
    for task in (default, no_deletes):
        task.latest_positions({})
    src.run(
        "INSERT INTO items VALUES (1, 'a'), (2, 'b')",
        "UPDATE items SET name = 'z' WHERE id = 1",
        "DELETE FROM items WHERE id = 2",
        "TRUNCATE items",
    )
    assert _ops(_records(default, _batch(default))["public.items"]) == ["c", "c", "u", "d", None]
    assert _ops(_records(no_deletes, _batch(no_deletes))["public.items"]) == ["c", "c", "t"]
    default.close()
    no_deletes.close()
