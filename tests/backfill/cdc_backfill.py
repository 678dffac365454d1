"""A backfill request at the task level, for either change-capture source (test_cdc_backfill.py):
the runtime's ``take_backfills`` before each planning, the planner loop of tests.cdc.snapshot."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from sluice.connectors.backfills import Backfill
from sluice.connectors.key_chunks import Chunk, partition_of
from sluice.connectors.positions import Position
from tests.cdc.snapshot import Replica, Writer, _create, drain, run_batches, source_rows
from tests.connectors.jdbc_dbs import Db


def _key(i: int) -> str:
    return json.dumps({"id": i}, separators=(",", ":"))


def until_done(task: Any, committed: dict[str, Position], replica: Replica, table: str, request: int,
               between: Callable[[], None] = lambda: None) -> Chunk:  # fmt: skip
    for _ in range(200):
        position = committed.get(partition_of(table))
        chunk = Chunk.of(position) if position is not None else None
        if chunk is not None and chunk.request == request and chunk.done:
            return chunk
        run_batches(task, committed, replica, batches=1, between=between)
    raise AssertionError(f"backfill {request} of {table} did not finish in 200 batches: {committed}")


def filtered_backfill_converges(db: Db, make_task: Callable[[], Any], qualify: Callable[[str], str]) -> None:
    """Rows that exist before capture starts (snapshot.mode=never) and meet the backfill's condition
    reach the replica through it, while a writer inserts, updates, re-keys and deletes between each
    planning and its read; no signal table is configured. The rows below the condition are never
    read; for every key the condition covers, the replica ends equal to the source (no key older)."""
    _create(db, "items", range(2, 802, 2))
    task = make_task()
    items = qualify("items")
    committed: dict[str, Position] = {}
    replica = Replica()
    run_batches(task, committed, replica, batches=2)
    assert items not in replica.rows  # never mode: nothing before capture
    writer = Writer(db, "items", seed=23, first_new_id=10_000, below=400)
    writer.start()
    requests = [Backfill(1, (items,), "id >= 200 AND name LIKE 'n%'", int(time.time() * 1000))]
    try:
        run_batches(task, committed, replica, batches=2, between=writer.advance)
        task.take_backfills(requests)
        done = until_done(task, committed, replica, items, 1, between=writer.advance)
    finally:
        writes = writer.stop()
    drain(task, committed, replica)
    assert writes > 20, writes
    read_keys = replica.snapshot_keys[items]
    assert len(read_keys) == len(set(read_keys)), "a row was read twice"
    assert all(json.loads(k)["id"] >= 200 for k in read_keys), "a row the condition excludes was read"
    untouched = {_key(i) for i in range(400, 802, 2)}
    assert untouched <= set(read_keys), sorted(untouched - set(read_keys))[:10]
    assert done.rows >= len(untouched) and done.condition == requests[0].condition
    want, got = source_rows(db, "items"), replica.rows[items]
    # Keys the condition covers (as the source has them now) or that changed since capture started:
    # equal. Rows below 200 the writer never touched never reached the replica.
    for key in set(want) | set(got):
        if key in want and json.loads(key)["id"] < 200 and key not in got:
            continue
        assert got.get(key) == want.get(key), key
    assert _key(2) not in got
    # Applied once: later plannings with the same request open nothing.
    before = dict(committed)
    run_batches(task, committed, replica, batches=2)
    assert Chunk.of(committed[partition_of(items)]) == Chunk.of(before[partition_of(items)])
    task.close()


def cancel_ends_a_running_backfill(
    db: Db, make_task: Callable[[], Any], qualify: Callable[[str], str]
) -> None:
    """A cancelled request ends its table's backfill at the next planning, after the chunks read."""
    _create(db, "items", range(1, 401))
    task = make_task()
    items = qualify("items")
    committed: dict[str, Position] = {}
    replica = Replica()
    run_batches(task, committed, replica, batches=1)
    request = Backfill(3, (items,), "", int(time.time() * 1000))
    task.take_backfills([request])
    run_batches(task, committed, replica, batches=3)  # opened, then two chunks
    running = Chunk.of(committed[partition_of(items)])
    assert running.running and running.rows > 0
    task.take_backfills([Backfill(3, (items,), "", request.requested_ms, cancelled=True)])
    run_batches(task, committed, replica, batches=2)
    stopped = Chunk.of(committed[partition_of(items)])
    assert (
        stopped.done and stopped.stopped and stopped.rows == running.rows and stopped.after == running.after
    )
    assert len(replica.snapshot_keys[items]) == running.rows
    task.close()
