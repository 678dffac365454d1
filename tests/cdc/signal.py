"""Helpers for on-demand snapshot tests of both change-capture sources (connectors.cdc.ondemand):
a signal table in Debezium's layout, signals inserted as Debezium users insert them, and scenarios
driven at the task level with tests/cdc/snapshot.py's planner loop and keyed replica."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sluice.connectors.cdc.snapshot import Chunk, partition_of
from sluice.connectors.positions import Position
from tests.cdc.records import as_json, read_records
from tests.cdc.snapshot import Replica, Writer, _create, drain, plan, read, run_batches, source_rows
from tests.connectors.jdbc_dbs import Db

SIGNALS = "debezium_signal"


def create_signal_table(db: Db) -> None:
    db.run(
        f"CREATE TABLE {SIGNALS} (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048))"
    )


def signal(db: Db, sid: str, kind: str, data: Any) -> None:
    text = data if isinstance(data, str) else json.dumps(data)
    db.run(f"INSERT INTO {SIGNALS} (id, type, data) VALUES (%s, %s, %s)", params=(sid, kind, text))


def execute(db: Db, sid: str, *tables: str, kind: str = "incremental") -> None:
    signal(db, sid, "execute-snapshot", {"data-collections": list(tables), "type": kind})


def generation(committed: dict[str, Position], table: str) -> Chunk | None:
    position = committed.get(partition_of(table))
    return Chunk.of(position) if position is not None else None


def until_generation_done(
    task: Any,
    committed: dict[str, Position],
    replica: Replica,
    table: str,
    gen: int,
    between: Callable[[], None] = lambda: None,
) -> int:
    """Batches until ``table``'s snapshot generation ``gen`` committed its last chunk."""
    for n in range(200):
        chunk = generation(committed, table)
        if chunk is not None and chunk.generation == gen and chunk.done:
            return n
        run_batches(task, committed, replica, batches=1, between=between)
    raise AssertionError(f"generation {gen} of {table} did not finish in 200 batches: {committed}")


def resnapshot_converges(db: Db, make_task: Callable[[], Any], qualify: Callable[[str], str]) -> None:
    """Rows that exist before capture starts (snapshot.mode=never) reach a replica only through a
    signalled snapshot; a writer inserts, updates, re-keys and deletes throughout, between each
    planning and its read; the replica ends equal to the source, the signal table's rows never
    become records, and the rows the writer never touched came through the snapshot."""
    _create(db, "items", range(2, 802, 2))
    create_signal_table(db)
    task = make_task()
    items = qualify("items")
    assert partition_of(items) in task.partitions()
    committed: dict[str, Position] = {}
    replica = Replica()
    run_batches(task, committed, replica, batches=2)
    assert items not in replica.rows  # never mode: nothing before capture
    writer = Writer(db, "items", seed=11, first_new_id=10_000, below=400)
    writer.start()
    try:
        run_batches(task, committed, replica, batches=2, between=writer.advance)
        execute(db, "resnap-1", items)
        until_generation_done(task, committed, replica, items, 1, between=writer.advance)
    finally:
        writes = writer.stop()
    drain(task, committed, replica)
    assert writes > 20, writes
    assert qualify(SIGNALS) not in replica.rows and set(replica.rows) == {items}
    read_keys = replica.snapshot_keys[items]
    assert len(read_keys) == len(set(read_keys)), "a row was read twice"
    untouched = {json.dumps({"id": i}, separators=(",", ":")) for i in range(400, 802, 2)}
    assert untouched <= set(read_keys), sorted(untouched - set(read_keys))[:10]
    want, got = source_rows(db, "items"), replica.rows[items]
    assert got == want, sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))[:10]
    chunk = generation(committed, items)
    assert chunk is not None and chunk.generation == 1 and chunk.done and chunk.signal == "resnap-1"
    task.close()


def rereads_are_subsets(db: Db, make_task: Callable[[], Any], qualify: Callable[[str], str]) -> None:
    """A planned chunk read again by a new task after rows of it changed gives a subset of the first
    read's records, each identical (offset, key, value), leaving out exactly the changed keys; the
    capture then goes on and the replica ends equal to the source."""
    _create(db, "items", range(2, 202, 2))
    create_signal_table(db)
    first = make_task()
    items = qualify("items")
    committed: dict[str, Position] = {}
    replica = Replica()
    run_batches(first, committed, replica, batches=1)
    execute(db, "again-1", items)
    run_batches(first, committed, replica, batches=1)
    opened = generation(committed, items)
    assert opened is not None and opened.generation == 1 and not opened.done
    pending = plan(first, committed)
    chunks = [r for r in pending if r.partition == partition_of(items)]
    assert len(chunks) == 1
    before = _records(first, chunks[0])
    assert len(before) == 40, len(before)  # snapshot.chunk.size
    db.run(
        "UPDATE items SET qty = 999 WHERE id = 10",
        "DELETE FROM items WHERE id = 20",
        "INSERT INTO items (id, name, qty) VALUES (21, 'late', 1)",
    )
    first.close()  # a crash: the planned batch never committed

    again = make_task()
    after = _records(again, chunks[0])
    changed = {json.dumps({"id": i}, separators=(",", ":")) for i in (10, 20, 21)}
    assert set(after) <= set(before)
    assert {k for _, k, _ in before} - {k for _, k, _ in after} == changed - {'{"id":21}'}
    assert not changed & {k for _, k, _ in after}
    for r in pending:  # the runtime re-runs the recorded plan, then goes on
        for key, value in read(again, r):
            replica.apply(r.partition.removeprefix("snapshot:"), key, value)
    committed.update({r.partition: r.end for r in pending})
    until_generation_done(again, committed, replica, items, 1)
    drain(again, committed, replica)
    assert replica.rows[items] == source_rows(db, "items")
    again.close()


def _records(task: Any, r: Any) -> list[tuple[int, str | None, str | None]]:
    return sorted(
        (row["offset"], as_json(row["key"]), as_json(row["value"])) for row in read_records(task, r)
    )


def bad_signals_are_skipped(
    db: Db, make_task: Callable[[], Any], qualify: Callable[[str], str], caplog: Any
) -> None:
    """Signals the connector cannot act on are logged with their id and skipped; a good one after
    them still works, and ``stop-snapshot`` ends a running generation."""
    import logging

    _create(db, "items", range(2, 42, 2))
    create_signal_table(db)
    task = make_task()
    items = qualify("items")
    committed: dict[str, Position] = {}
    replica = Replica()
    run_batches(task, committed, replica, batches=1)
    with caplog.at_level(logging.WARNING, logger="sluice.connectors.cdc.signals"):
        signal(db, "bad-json", "execute-snapshot", "{not json")
        execute(db, "bad-table", qualify("nope"))
        signal(db, "bad-type", "pause-snapshot", {})
        db.run("INSERT INTO items (id, name, qty) VALUES (1001, 'x', 1)")
        run_batches(task, committed, replica, batches=2)
    text = caplog.text
    for sid in ("bad-json", "bad-table", "bad-type"):
        assert f"signal '{sid}'" in text, text
    chunk = generation(committed, items)
    assert chunk is None or chunk.generation == 0  # no generation was opened
    assert replica.rows[items] == {'{"id":1001}': {"id": 1001, "name": "x", "qty": 1}}
    execute(db, "good", items, kind="blocking")
    signal(db, "halt", "stop-snapshot", {"data-collections": [items], "type": "incremental"})
    run_batches(task, committed, replica, batches=1)
    chunk = generation(committed, items)
    assert chunk is not None and chunk.generation == 1 and chunk.done and chunk.signal == "good"
    drain(task, committed, replica)
    assert list(replica.rows[items]) == ['{"id":1001}']  # stopped before any chunk was read
    execute(db, "good-2", items)
    until_generation_done(task, committed, replica, items, 2)
    assert replica.rows[items] == source_rows(db, "items")
    task.close()


def a_change_inside_the_window_wins(
    db: Db, make_task: Callable[[], Any], qualify: Callable[[str], str]
) -> None:
    """A change committed right after a chunk's select (before the batch's log end is pinned) is in
    the batch's log but not in the chunk: the chunk must drop that key, or its older row would be
    applied after the newer change (the replica applies a batch's log records first)."""
    _create(db, "items", range(2, 82, 2))
    create_signal_table(db)
    task = make_task()
    items = qualify("items")
    committed: dict[str, Position] = {}
    replica = Replica()
    run_batches(task, committed, replica, batches=1)
    execute(db, "window-1", items)
    run_batches(task, committed, replica, batches=1)
    ondemand = task._ondemand
    fetch, fired = ondemand.fetch, []

    def fetch_then_write(*args: Any) -> Any:
        rows = fetch(*args)
        if not fired:  # a writer commits between the select and the log end
            fired.append(1)
            db.run("UPDATE items SET qty = 5000, name = 'late' WHERE id = 10")
        return rows

    ondemand.fetch = fetch_then_write
    until_generation_done(task, committed, replica, items, 1)
    drain(task, committed, replica)
    assert fired
    assert replica.rows[items]['{"id":10}'] == {"id": 10, "name": "late", "qty": 5000}
    assert replica.rows[items] == source_rows(db, "items")
    assert '{"id":10}' not in replica.snapshot_keys[items]
    task.close()
