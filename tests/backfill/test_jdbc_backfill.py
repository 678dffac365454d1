"""jdbc-source backfills against real MariaDB and PostgreSQL, at the task level: the planner loop of
tests.cdc.snapshot with the runtime's ``take_backfills`` before each planning, a keyed replica that
upserts what it reads, and a writer updating rows between each planning and its read."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from sluice.connectors.backfills import Backfill
from sluice.connectors.jdbc.source import JdbcSourceTask
from sluice.connectors.key_chunks import Chunk, partition_of
from sluice.connectors.model import PartitionRange
from sluice.connectors.positions import Position
from tests.cdc.records import read_records
from tests.cdc.snapshot import plan
from tests.connectors.jdbc_dbs import Db
from tests.connectors.test_jdbc_source import task

pytestmark = pytest.mark.slow


@pytest.fixture(params=["mysql", "postgresql"])
def db(request: pytest.FixtureRequest, stack_config: object) -> Db:  # stack_config: the lane
    return Db.of(request.getfixturevalue("mariadb_db" if request.param == "mysql" else "postgres_db"))


TS = {"mysql": "DATETIME(3)", "postgresql": "TIMESTAMP(3)"}
NOW = {"mysql": "NOW(3)", "postgresql": "LOCALTIMESTAMP(3)"}


def _create(db: Db, n: int) -> None:
    ts = TS[db.dialect]
    db.run(f"CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(40), qty INT, updated {ts} NOT NULL)")
    values = ", ".join(f"({i}, 'n{i}', {i % 7}, '2024-01-01 00:00:00')" for i in range(1, n + 1))
    db.run(f"INSERT INTO items (id, name, qty, updated) VALUES {values}")


def _source(db: Db) -> dict[int, tuple[Any, ...]]:
    return {r[0]: tuple(r) for r in db.run("SELECT id, name, qty FROM items ORDER BY id")}


class Loop:
    """Plans, reads and applies batches as the runtime would, committing each plan's ends."""

    def __init__(self, t: JdbcSourceTask) -> None:
        self.task = t
        self.committed: dict[str, Position] = {}
        self.replica: dict[int, tuple[Any, ...]] = {}
        self.backfilled: list[int] = []
        self.chunk_batches_with_live: int = 0

    def batch(self, between: Any = lambda: None) -> list[PartitionRange]:
        ranges = plan(self.task, self.committed)
        between()
        parts = {r.partition for r in ranges if self.task.holds_records(r)}
        if partition_of("items") in parts and "items" in parts:
            self.chunk_batches_with_live += 1
        for r in ranges:
            if not self.task.holds_records(r):
                continue
            for record in read_records(self.task, r):
                value = record["value"]
                self.replica[value["id"]] = (value["id"], value["name"], value["qty"])
                if r.partition.startswith("snapshot:"):
                    self.backfilled.append(value["id"])
        self.committed.update({r.partition: r.end for r in ranges})
        return ranges

    def snapshot(self) -> Chunk:
        return Chunk.of(self.committed[partition_of("items")])


def test_a_backfill_under_updates_leaves_no_key_older_than_its_source_row(db: Db) -> None:
    _create(db, 600)
    t = task(
        db, mode="timestamp+incrementing", **{"timestamp.column.name": "updated", "read.split.rows": "40"}
    )
    loop = Loop(t)
    while loop.batch():
        pass
    assert loop.replica == _source(db)
    # The replica loses rows and keeps stale ones, as a target damaged behind the pipeline's back.
    for i in range(100, 400, 3):
        loop.replica.pop(i)
    for i in range(101, 400, 7):
        loop.replica[i] = (i, "stale", -1)
    loop.replica[550] = (550, "stale outside the range", -1)
    rng = random.Random(3)

    def update() -> None:
        for _ in range(5):
            i = rng.randrange(1, 500)
            db.run(
                f"UPDATE items SET qty = qty + 1, name = 'u{i}', updated = {NOW[db.dialect]} WHERE id = {i}"
            )

    t.take_backfills([Backfill(1, ("items",), "id >= 100 AND id < 400", int(time.time() * 1000))])
    for _ in range(100):
        loop.batch(between=update)
        if loop.snapshot().done:
            break
    assert loop.snapshot().done and loop.snapshot().request == 1
    while loop.batch():
        pass
    want = _source(db)
    assert {i: r for i, r in loop.replica.items() if i != 550} == {i: r for i, r in want.items() if i != 550}
    assert loop.replica[550] == (550, "stale outside the range", -1)  # never updated, never re-read
    assert (
        sorted(loop.backfilled) == sorted(set(loop.backfilled)) == [i for i in range(100, 400) if i in want]
    )
    assert loop.snapshot().rows == len(loop.backfilled)
    assert loop.chunk_batches_with_live == 0  # a chunk's table waits for its live range
    # applied once: the same request moves nothing more
    before = dict(loop.committed)
    loop.batch()
    assert loop.committed[partition_of("items")] == before[partition_of("items")]
    t.close()


def test_backfill_checks_tables_keys_and_conditions_against_the_database(db: Db) -> None:
    _create(db, 3)
    db.run("CREATE TABLE nokey (id INT NOT NULL, v INT)")
    t = task(db, **{"table.whitelist": "items,nokey"})
    assert t.backfill_tables() == ["items", "nokey"]
    assert t.backfill_problem("items", "qty > 1") is None
    assert "no primary key" in (t.backfill_problem("nokey", "") or "")
    assert "'other' is not one of its tables" in (t.backfill_problem("other", "") or "")
    bad = t.backfill_problem("items", "nosuch > 1") or ""
    assert "connector 'jdbc-test' table 'items': the condition 'nosuch > 1' cannot be used" in bad
    assert t.backfill_problem("items", "qty > 1") is None  # the connection survives a refused probe
    q = "`" if db.dialect == "mysql" else '"'
    assert t.backfill_range("items", "", "5", "9") == f"{q}id{q} >= '5' AND {q}id{q} < '9'"
    t.close()
