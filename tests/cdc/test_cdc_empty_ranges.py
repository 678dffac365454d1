"""KnowsEmptyRanges on both change-capture sources: a batch moves every captured table to the same
log point, and a table that did not change in it (or whose only changes ``skipped.operations``
drops) says so without Spark, so the runtime sends nothing for it. ``holds_records`` False must be
certain: its ``read`` is then empty; a changed table's range holds records."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sluice.connectors.api import KnowsEmptyRanges, SourceTask
from sluice.connectors.model import PartitionRange
from tests.cdc import mysql, pg
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase


@pytest.fixture
def cdc_pg(postgres_db: TestDatabase) -> Iterator[TestDatabase]:
    with pg.cdc_database(postgres_db) as db:
        yield db


def _batch(task: SourceTask) -> dict[str, PartitionRange]:
    start = task.earliest_positions()
    latest = task.latest_positions({})
    return {p.rsplit(".", 1)[-1]: PartitionRange(p, start[p], latest[p]) for p in task.partitions()}


def _held(task: SourceTask, batch: dict[str, PartitionRange]) -> dict[str, bool]:
    """Each table's ``holds_records``, checked against what ``read`` gives for a range said empty."""
    assert isinstance(task, KnowsEmptyRanges)
    held = {table: task.holds_records(r) for table, r in batch.items()}
    for table, r in batch.items():
        if not held[table]:
            assert task.read([r]).to_table().num_rows == 0, f"{table}: said empty but read records"
    return held


SETUP = (
    "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))",
    "CREATE TABLE tags (id INT PRIMARY KEY, label VARCHAR(20))",
    "CREATE TABLE quiet (id INT PRIMARY KEY)",
    "INSERT INTO tags VALUES (1, 'x')",
)
CHANGES = (
    "INSERT INTO items VALUES (1, 'a'), (2, 'b')",
    "UPDATE tags SET label = 'y' WHERE id = 1",
)
#: Per source: the database fixture and how its task is opened.
SOURCES = {"mysql-cdc": ("mariadb_db", mysql.open_task), "postgres-cdc": ("cdc_pg", pg.open_task)}


@pytest.mark.stack  # the source database through getfixturevalue
@pytest.mark.parametrize("source", sorted(SOURCES))
def test_ranges_without_emitted_changes_are_known_empty(source: str, request: pytest.FixtureRequest) -> None:
    fixture, open_task = SOURCES[source]
    db: TestDatabase = request.getfixturevalue(fixture)
    src = Db.of(db)
    src.run(*SETUP)
    every: SourceTask = open_task(db)
    no_updates: SourceTask = open_task(db, **{"skipped.operations": "u"})
    for task in (every, no_updates):
        task.latest_positions({})  # capture starts at the log end now (PostgreSQL: creates the slot)
    src.run(*CHANGES)
    assert _held(every, _batch(every)) == {"items": True, "tags": True, "quiet": False}
    assert _held(no_updates, _batch(no_updates)) == {"items": True, "tags": False, "quiet": False}
    for task in (every, no_updates):
        task.close()
