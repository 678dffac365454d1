"""Helpers for initial-snapshot tests of both change-capture sources: a planner loop at the task
level (what connectors.planner.plan_next asks, in its order), a keyed replica that applies records
as jdbc-sink does after ExtractNewRecordState (upsert the new row, delete on ``d``/tombstone), and
a background writer that inserts, updates (also primary keys) and deletes while the snapshot runs.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.positions import Position
from tests.cdc.records import as_json, read_records
from tests.connectors.jdbc_dbs import Db


@dataclass
class Replica:
    """What a keyed sink holds per table: key JSON -> the last row; and every snapshot key read."""

    rows: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    snapshot_keys: dict[str, list[str]] = field(default_factory=dict)
    log_seen: set[str] = field(default_factory=set)
    read_after_log: bool = False  # an ``r`` record after a log record: the ordering the snapshot forbids

    def apply(self, table: str, key: str, value: str | None) -> None:
        rows = self.rows.setdefault(table, {})
        doc = json.loads(value) if value else None
        if doc is None or doc["op"] == "d":
            rows.pop(key, None)
            self.log_seen.add(table)
            return
        if doc["op"] == "r":
            self.snapshot_keys.setdefault(table, []).append(key)
            self.read_after_log = self.read_after_log or table in self.log_seen
        else:
            self.log_seen.add(table)
        rows[key] = doc["after"]


def plan(task: Any, committed: dict[str, Position]) -> list[PartitionRange]:
    """One planning: relocate (when the task has it), earliest, latest; the non-empty ranges."""
    if hasattr(task, "relocate"):
        task.relocate(committed)
    earliest = task.earliest_positions()
    latest = task.latest_positions(committed)
    out = []
    for p in task.partitions():
        start = committed.get(p, earliest.get(p))
        if start is None or p not in latest or start.key >= latest[p].key:
            continue
        out.append(PartitionRange(p, start, latest[p]))
    return out


def read(task: Any, r: PartitionRange) -> list[tuple[str | None, str | None]]:
    """The records of ``r`` as (key JSON, value JSON), in offset order."""
    return [(as_json(row["key"]), as_json(row["value"])) for row in read_records(task, r)]


def run_batches(
    task: Any,
    committed: dict[str, Position],
    replica: Replica,
    *,
    batches: int,
    between: Callable[[], None] = lambda: None,
    stop_when: Callable[[list[PartitionRange]], bool] = lambda ranges: False,
) -> int:
    """Plan, read, apply, commit up to ``batches`` times (``between`` runs after each planning, so
    writes land between a chunk's planning read and its commit); returns the batches run."""
    for n in range(batches):
        ranges = plan(task, committed)
        between()
        if stop_when(ranges):
            return n
        for r in ranges:
            table = r.partition.removeprefix("snapshot:")
            for key, value in read(task, r):
                replica.apply(table, key, value)
        committed.update({r.partition: r.end for r in ranges})
        if hasattr(task, "committed") and ranges:
            task.committed(BatchPlan("snap-test", 0, n + 1, tuple(ranges)))
    return batches


def source_rows(db: Db, table: str) -> dict[str, dict[str, Any]]:
    """The source table as the replica should hold it (id, name, qty)."""
    rows = db.run(f"SELECT id, name, qty FROM {table} ORDER BY id")
    return {json.dumps({"id": i}, separators=(",", ":")): {"id": i, "name": n, "qty": q} for i, n, q in rows}


class Writer(threading.Thread):
    """Random inserts (inside and beyond the existing key range), updates, key changes and deletes
    on ``table`` (id INT PRIMARY KEY, name, qty), each its own transaction, until stopped. Only keys
    below ``below`` are touched: the rows above reach a replica through the snapshot alone."""

    def __init__(self, db: Db, table: str, seed: int, first_new_id: int, below: int) -> None:
        super().__init__(daemon=True)
        self.db, self.table, self.rng = db, table, random.Random(seed)
        self.next_id = first_new_id
        self.below = below
        self.done = threading.Event()
        self.count = 0
        self.error: BaseException | None = None

    def step(self, conn: Any) -> None:
        t, rng = self.table, self.rng
        roll = rng.random()
        with conn.cursor() as cur:
            cur.execute(f"SELECT id FROM {t} WHERE id < {self.below} ORDER BY id")
            ids = [r[0] for r in cur.fetchall()]
            if roll < 0.3 or not ids:
                self.next_id += 1
                new = (
                    self.next_id if rng.random() < 0.5 else rng.randrange(0, self.below // 2) * 2 + 1
                )  # odd: between
                if new in ids:
                    return
                cur.execute(f"INSERT INTO {t} (id, name, qty) VALUES ({new}, 'w{new}', {rng.randrange(100)})")
            elif roll < 0.75:
                pick = rng.choice(ids)
                cur.execute(f"UPDATE {t} SET qty = qty + 1, name = 'u{self.count}' WHERE id = {pick}")
            elif roll < 0.85:
                pick = rng.choice(ids)
                self.next_id += 1
                cur.execute(f"UPDATE {t} SET id = {self.next_id} WHERE id = {pick}")
            else:
                cur.execute(f"DELETE FROM {t} WHERE id = {rng.choice(ids)}")
        self.count += 1

    def run(self) -> None:
        conn = self.db.connect()
        try:
            while not self.done.is_set():
                self.step(conn)
                self.done.wait(0.02)
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc
        finally:
            conn.close()

    def advance(self, writes: int = 8, timeout_s: float = 30) -> None:
        """Return once ``writes`` more writes are made (run between a chunk's planning and its
        commit): a count, not a wait of fixed length, so a faster snapshot still sees them."""
        target = self.count + writes
        deadline = time.monotonic() + timeout_s
        while self.count < target and self.error is None and self.is_alive():
            if time.monotonic() > deadline:
                raise AssertionError(f"the writer made {self.count} writes, not {target}, in {timeout_s} s")
            time.sleep(0.01)

    def stop(self) -> int:
        self.done.set()
        self.join(30)
        if self.error is not None:
            raise self.error
        return self.count


def _key(i: int) -> str:
    return json.dumps({"id": i}, separators=(",", ":"))


def _create(db: Db, table: str, ids: range) -> None:
    values = ", ".join(f"({i}, 'n{i}', {i % 97})" for i in ids)
    db.run(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(40), qty INT)")
    if values:
        db.run(f"INSERT INTO {table} (id, name, qty) VALUES {values}")


def until_snapshot_done(task: Any, committed: dict[str, Position], replica: Replica) -> int:
    from sluice.connectors.cdc.snapshot import finished

    tables = [p.removeprefix("snapshot:") for p in task.partitions() if p.startswith("snapshot:")]
    for n in range(100):
        if finished(tables, committed):
            return n
        run_batches(task, committed, replica, batches=1)
    raise AssertionError(f"the snapshot did not finish in 100 batches: {committed}")


def drain(task: Any, committed: dict[str, Position], replica: Replica) -> None:
    """Batches until a planning finds nothing left to read."""
    assert run_batches(task, committed, replica, batches=60, stop_when=lambda r: not r) < 60


def concurrent_snapshot_converges(
    db: Db, make_task: Callable[[], Any], qualify: Callable[[str], str]
) -> None:
    """400 existing rows read in chunks while a writer inserts, updates, re-keys and deletes; then
    the log: the replica equals the source by content, no snapshot row followed a log record, and
    each key was read by the snapshot at most once."""
    _create(db, "items", range(2, 802, 2))
    _create(db, "empty_t", range(0))
    task = make_task()
    committed: dict[str, Position] = {}
    replica = Replica()
    writer = Writer(db, "items", seed=7, first_new_id=10_000, below=400)
    writer.start()
    try:
        run_batches(task, committed, replica, batches=3, between=writer.advance)
        assert replica.log_seen == set()  # the log is held while the snapshot runs
        until_snapshot_done(task, committed, replica)
    finally:
        writes = writer.stop()
    drain(task, committed, replica)
    items = qualify("items")
    assert writes > 20, writes
    assert items in replica.log_seen  # the concurrent changes came through the log
    assert not replica.read_after_log
    keys = replica.snapshot_keys[items]
    assert len(keys) == len(set(keys)), "a row was read twice"
    untouched = [_key(i) for i in range(400, 802, 2)]
    assert set(untouched) <= set(keys), sorted(set(untouched) - set(keys))[:10]
    want, got = source_rows(db, "items"), replica.rows[items]
    assert got == want, sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))[:10]
    assert replica.rows.get(qualify("empty_t"), {}) == {}
    task.close()


def resumed_snapshot_reads_each_row_once(
    db: Db, make_task: Callable[[], Any], qualify: Callable[[str], str]
) -> None:
    """Three chunks committed, changes made, a fourth chunk planned but not committed (a crash): a new
    task re-runs it and goes on; the snapshot read every key exactly once, in key order, and the
    changes made before the new task started still reach the replica through the log."""
    _create(db, "items", range(2, 502, 2))
    first = make_task()
    committed: dict[str, Position] = {}
    replica = Replica()
    run_batches(first, committed, replica, batches=3)
    db.run(
        "UPDATE items SET qty = 999 WHERE id = 2",  # already read
        "DELETE FROM items WHERE id = 4",  # already read
        "INSERT INTO items (id, name, qty) VALUES (3, 'late', 3)",  # inside the read key range
        "UPDATE items SET name = 'changed' WHERE id = 400",  # not read yet
    )
    pending = plan(first, committed)
    assert pending and all(r.partition.startswith("snapshot:") for r in pending)
    first.close()  # the crash: the planned batch never committed

    again = make_task()
    for r in pending:  # the runtime re-runs the recorded plan first
        for key, value in read(again, r):
            replica.apply(r.partition.removeprefix("snapshot:"), key, value)
    committed.update({r.partition: r.end for r in pending})
    if hasattr(again, "committed"):
        again.committed(BatchPlan("snap-test", 0, 4, tuple(pending)))
    until_snapshot_done(again, committed, replica)
    drain(again, committed, replica)
    items = qualify("items")
    read_keys, expected = replica.snapshot_keys[items], [_key(i) for i in range(2, 502, 2)]
    assert read_keys == expected, (len(read_keys), sorted(set(read_keys) ^ set(expected))[:10], read_keys[:5])
    assert replica.rows[items] == source_rows(db, "items")
    assert replica.rows[items][_key(2)]["qty"] == 999 and _key(4) not in replica.rows[items]
    again.close()


def initial_only_reads_the_rows_and_stops(
    db: Db, make_task: Callable[[], Any], qualify: Callable[[str], str]
) -> None:
    """``snapshot.mode=initial_only``: the rows in chunks, then nothing: a later insert is not read."""
    _create(db, "items", range(2, 22, 2))
    task = make_task()
    assert task.partitions() == [f"snapshot:{qualify('items')}"]
    committed: dict[str, Position] = {}
    replica = Replica()
    drain(task, committed, replica)
    items = qualify("items")
    assert replica.rows[items] == source_rows(db, "items")
    db.run("INSERT INTO items (id, name, qty) VALUES (1000, 'late', 1)")
    assert plan(task, committed) == []
    task.close()
