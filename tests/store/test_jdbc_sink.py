"""jdbc-sink against real MariaDB and PostgreSQL (a database other than the offset store's):
upsert/update/delete with content equality, auto.create/evolve, exactly once across a crash
between the target's commit and the store's, and refused rows named by position."""

from __future__ import annotations

import threading
import time
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import create_engine, text

from sluice.activities.store import OffsetStore
from sluice.connectors.api import RejectedRecordsError
from sluice.connectors.jdbc import write_postgres
from sluice.connectors.jdbc.shape import KAFKA_FIELDS
from sluice.connectors.jdbc.sink import JdbcAuthError, JdbcSinkConnector, JdbcSinkTask
from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.records import Record
from sluice.connectors.source_reads import records_table
from tests.store.helpers import offsets

VALUE = pa.struct(
    [
        pa.field("id", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("amount", pa.decimal128(10, 2)),
        pa.field("raw", pa.binary()),
    ]
)
DIALECTS = ["mariadb_db", "postgres_db"]


class Crash(Exception):
    """The worker dying after the target committed, before the store commit."""


class CrashAfterTarget:
    def __init__(self, store: OffsetStore) -> None:
        self.store = store

    def same_database(self, database_url: str) -> bool:
        return self.store.same_database(database_url)

    def commit(self, plan: BatchPlan, connection: Any | None) -> None:
        raise Crash


@pytest.fixture(params=DIALECTS)
def db(request: pytest.FixtureRequest, stack_config: object) -> Any:  # stack_config: the lane
    return request.getfixturevalue(request.param)


def task_for(db: Any, store: OffsetStore, tasks: list[JdbcSinkTask], **extra: str) -> JdbcSinkTask:
    raw = {
        "name": "jdbc-out",
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "topics": "orders",
        "connection.url": db.jdbc_url,
        "auto.create": "true",
        **extra,
    }
    assert JdbcSinkConnector().validate(raw) == []
    task = JdbcSinkTask(JdbcSinkConnector().parse(raw), 0)
    task.bind_positions(store.committer())
    tasks.append(task)
    return task


def rows(db: Any, sql: str) -> list[tuple[Any, ...]]:
    engine = create_engine(db.url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql))]
    finally:
        engine.dispose()


def run_batch(store: OffsetStore, task: JdbcSinkTask, batch_id: int, recs: list[Record]) -> BatchPlan:
    start = recs[0].offset
    plan = BatchPlan(
        "jdbc-out", 0, batch_id, (PartitionRange("broker-a:0", start, start + len(recs), "orders"),)
    )
    plan = store.record_plan(BatchPlan(plan.connector, 0, batch_id, plan.ranges, task.prepare(plan)))
    task.write(records_table(recs, VALUE), plan)
    return plan


def _scalar(engine: Any, query: Any) -> Any:
    with engine.connect() as conn:
        return conn.execute(query).scalar_one()


def rec(offset: int, key: int, value: tuple[Any, ...] | None) -> Record:
    return Record("broker-a:0", offset, value, topic="orders", key=str(key))


def test_upsert_and_tombstones_last_write_per_key_wins(
    store: OffsetStore, db: Any, tasks: list[JdbcSinkTask]
) -> None:
    task = task_for(
        db, store, tasks,
        **{"insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id", "delete.enabled": "true"},
    )  # fmt: skip
    run_batch(store, task, 0, [
        rec(0, 1, (1, "a", Decimal("1.50"), b"\x00\xff")),
        rec(1, 2, (2, "b", Decimal("2.00"), None)),
        rec(2, 1, (1, "a2", Decimal("1.75"), b"\x01")),  # later write of key 1 wins
        rec(3, 3, (3, "tab\there \\N 'q' \"dq\" \U0001f600", None, None)),
        rec(4, 2, None),  # tombstone after an upsert: deleted
    ])  # fmt: skip
    run_batch(store, task, 1, [rec(5, 2, (2, "back", Decimal("9.99"), None)), rec(6, 3, None)])
    got = rows(db, "SELECT id, name, amount, raw FROM orders ORDER BY id")
    assert got == [(1, "a2", Decimal("1.75"), b"\x01"), (2, "back", Decimal("9.99"), None)]
    assert offsets(store.committed_positions("jdbc-out")) == {"orders/broker-a:0": 7}

    by_value = {"insert.mode": "update", "pk.mode": "record_value", "pk.fields": "id"}
    update = task_for(db, store, tasks, **by_value)
    plan = BatchPlan("jdbc-out", 0, 2, (PartitionRange("broker-a:0", 7, 9, "orders"),))
    plan = store.record_plan(BatchPlan("jdbc-out", 0, 2, plan.ranges, update.prepare(plan)))
    recs = [rec(7, 1, (1, "upd", Decimal("0.01"), None)), rec(8, 9, (9, "absent", None, None))]
    update.write(records_table(recs, VALUE), plan)
    assert rows(db, "SELECT id, name FROM orders ORDER BY id") == [(1, "upd"), (2, "back")]


def test_exactly_once_when_the_store_commit_is_lost_and_auto_evolve(
    store: OffsetStore, db: Any, tasks: list[JdbcSinkTask]
) -> None:
    task = task_for(db, store, tasks)
    assert task._own_ledger  # the target is not the offset store's database
    crashing = task_for(db, store, tasks)
    crashing.bind_positions(CrashAfterTarget(store))
    recs = [rec(o, o, (o, f"n{o}", Decimal(o), None)) for o in range(5)]
    plan = BatchPlan("jdbc-out", 0, 0, (PartitionRange("broker-a:0", 0, 5, "orders"),))
    plan = store.record_plan(BatchPlan("jdbc-out", 0, 0, plan.ranges, task.prepare(plan)))
    with pytest.raises(Crash):
        crashing.write(records_table(recs, VALUE), plan)
    assert rows(db, "SELECT count(*) FROM orders") == [(5,)]  # the target committed ...
    assert store.committed_positions("jdbc-out") == {}  # ... the store did not
    pending = store.pending_plan("jdbc-out", 0)
    assert pending == plan
    task.write(records_table(recs, VALUE), store.record_plan(pending))  # the re-run
    assert rows(db, "SELECT id, name FROM orders ORDER BY id") == [(o, f"n{o}") for o in range(5)]
    assert offsets(store.committed_positions("jdbc-out")) == {"orders/broker-a:0": 5}
    assert rows(db, "SELECT batch_id FROM sluice_sink_batches") == [(0,)]

    wider = pa.struct([*VALUE, pa.field("note", pa.string())])
    evolving = task_for(db, store, tasks, **{"auto.evolve": "true"})
    plan = BatchPlan("jdbc-out", 0, 1, (PartitionRange("broker-a:0", 5, 6, "orders"),))
    plan = store.record_plan(BatchPlan("jdbc-out", 0, 1, plan.ranges, evolving.prepare(plan)))
    evolving.write(records_table([rec(5, 5, (5, "n5", None, None, "new"))], wider), plan)
    assert rows(db, "SELECT id, note FROM orders WHERE id >= 4 ORDER BY id") == [(4, None), (5, "new")]


def test_refused_rows_are_named_and_nothing_is_committed(
    store: OffsetStore, db: Any, tasks: list[JdbcSinkTask]
) -> None:
    raw_type = "BYTEA" if "postgres" in db.url else "BLOB"
    with create_engine(db.url).begin() as conn:
        conn.execute(text("CREATE TABLE orders (id BIGINT PRIMARY KEY, name VARCHAR(5), "
                          f"amount DECIMAL(10,2), raw {raw_type})"))  # fmt: skip
    task = task_for(db, store, tasks, **{"auto.create": "false"})
    recs = [
        rec(0, 1, (1, "ok", None, None)),
        rec(1, 2, (2, "much too long", None, None)),
        rec(2, 3, (3, "ok", None, None)),
        rec(3, 1, (1, "dup", None, None)),  # violates the primary key
    ]
    with pytest.raises(RejectedRecordsError) as err:
        run_batch(store, task, 0, recs)
    refused = {(r.offset, "'name'" in r.reason) for r in err.value.rejected}
    assert refused == {(1, True), (3, False)}
    message = str(err.value)
    assert "connector 'jdbc-out'" in message and "table 'orders'" in message or "orders'" in message
    assert "offset 1" in message and "offset 3" in message
    assert rows(db, "SELECT count(*) FROM orders") == [(0,)]
    assert store.committed_positions("jdbc-out") == {}


def test_pk_mode_kafka_keys_rows_by_record_position(
    store: OffsetStore, db: Any, tasks: list[JdbcSinkTask]
) -> None:
    """pk.mode=kafka: the key is (topic, partition, offset), so a re-written record updates its own
    row and two records with the same value are two rows."""
    task = task_for(db, store, tasks, **{"insert.mode": "upsert", "pk.mode": "kafka"})
    same = (1, "same", Decimal("1.00"), None)
    run_batch(store, task, 0, [rec(0, 1, same), rec(1, 1, same), rec(2, 2, (2, "b", None, None))])
    got = rows(
        db,
        "SELECT __connect_topic, __connect_partition, __connect_offset, id, name FROM orders "
        "ORDER BY __connect_offset",
    )
    assert got == [
        ("orders", "broker-a:0", 0, 1, "same"),
        ("orders", "broker-a:0", 1, 1, "same"),
        ("orders", "broker-a:0", 2, 2, "b"),
    ]
    # the same position again outside the ledger (another connector replaying the topic): no duplicate
    plan = BatchPlan("jdbc-replay", 0, 0, (PartitionRange("broker-a:0", 2, 3, "orders"),))
    plan = store.record_plan(BatchPlan("jdbc-replay", 0, 0, plan.ranges, task.prepare(plan)))
    task.write(records_table([rec(2, 2, (2, "b2", None, None))], VALUE), plan)
    assert rows(db, "SELECT __connect_offset, name FROM orders ORDER BY __connect_offset") == [
        (0, "same"), (1, "same"), (2, "b2"),
    ]  # fmt: skip
    key = "SELECT column_name FROM information_schema.key_column_usage WHERE table_name = 'orders' "
    key += "AND table_schema = " + ("'public'" if "postgres" in db.url else "DATABASE()")
    assert sorted(r[0] for r in rows(db, key)) == sorted(KAFKA_FIELDS)


def test_wrong_credentials_fail_clearly_without_the_password(
    store: OffsetStore, mariadb_db: Any, tasks: list[JdbcSinkTask]
) -> None:
    secret = "not-the-password-" + "x7q"
    task = task_for(mariadb_db, store, tasks, **{"connection.user": "sluice", "connection.password": secret})
    with pytest.raises(JdbcAuthError) as err:
        run_batch(store, task, 0, [rec(0, 1, (1, "a", None, None))])
    message = str(err.value)
    assert "connector 'jdbc-out'" in message and "refused the credentials of user 'sluice'" in message
    assert mariadb_db.name in message
    assert secret not in message and secret not in repr(err.value.__cause__ or "")
    assert err.value.__cause__ is None  # the driver's error (which may quote the URL) is not chained
    assert store.committed_positions("jdbc-out") == {}


def test_binary_values_are_stored_byte_for_byte(
    store: OffsetStore, db: Any, tasks: list[JdbcSinkTask]
) -> None:
    """value.converter=bytes: a body that is not text lands in a binary column exactly."""
    task = task_for(db, store, tasks, **{"insert.mode": "upsert", "pk.mode": "kafka"})
    bodies = [b"caf\xe9", b"\x00\xff\xfe", "é".encode(), None]
    recs = [Record("broker-a:0", i, v, topic="orders") for i, v in enumerate(bodies)]
    plan = BatchPlan("jdbc-out", 0, 0, (PartitionRange("broker-a:0", 0, len(recs), "orders"),))
    plan = store.record_plan(BatchPlan("jdbc-out", 0, 0, plan.ranges, task.prepare(plan)))
    task.write(records_table(recs, pa.binary()), plan)
    got = rows(db, "SELECT __connect_offset, value FROM orders ORDER BY __connect_offset")
    assert [(o, None if v is None else bytes(v)) for o, v in got] == list(enumerate(bodies))


@pytest.mark.parametrize("merges", [True, False], ids=["merge", "on-conflict"])
def test_postgres_upsert_by_merge_and_by_on_conflict_write_the_same_rows(
    store: OffsetStore,
    postgres_db: Any,
    tasks: list[JdbcSinkTask],
    monkeypatch: pytest.MonkeyPatch,
    merges: bool,
) -> None:
    """Servers before PostgreSQL 15 (no MERGE) upsert by ON CONFLICT: the same rows either way,
    for new keys, existing keys, a key twice in a batch and a row the batch leaves alone."""
    if not merges:
        monkeypatch.setattr(write_postgres, "MERGE_SINCE", 10**9)
    upsert = {"insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id"}
    task = task_for(postgres_db, store, tasks, **upsert)
    run_batch(store, task, 0, [rec(o, o, (o, f"n{o}", Decimal(o), None)) for o in range(4)])
    run_batch(store, task, 1, [
        rec(4, 1, (1, "first", None, None)),
        rec(5, 9, (9, "new", Decimal("9.50"), b"\x09")),
        rec(6, 1, (1, "second", Decimal("1.25"), b"\x01")),  # the later record of key 1 wins
        rec(7, 2, (2, "upd", None, None)),
    ])  # fmt: skip
    assert rows(postgres_db, "SELECT id, name, amount, raw FROM orders ORDER BY id") == [
        (0, "n0", Decimal("0.00"), None),
        (1, "second", Decimal("1.25"), b"\x01"),
        (2, "upd", None, None),
        (3, "n3", Decimal("3.00"), None),
        (9, "new", Decimal("9.50"), b"\x09"),
    ]


def test_postgres_upsert_of_a_key_a_concurrent_transaction_inserts_updates_it(
    store: OffsetStore, postgres_db: Any, tasks: list[JdbcSinkTask]
) -> None:
    """MERGE does not arbitrate a key inserted by a concurrent transaction (a unique violation once
    that one commits): the batch's MERGE is rolled back to its savepoint and the batch applied
    by ON CONFLICT, in the same transaction, so the batch's record wins and its positions commit."""
    upsert = {"insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id"}
    task = task_for(postgres_db, store, tasks, **upsert)
    run_batch(store, task, 0, [rec(0, 1, (1, "one", None, None))])
    engine = create_engine(postgres_db.url)
    try:
        with engine.connect() as other:
            other.execute(text("INSERT INTO orders (id, name) VALUES (5, 'theirs')"))  # not committed yet
            batch = threading.Thread(
                target=run_batch, args=(store, task, 1, [rec(1, 5, (5, "ours", None, None))])
            )
            batch.start()
            waiting = text(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE 'MERGE INTO%'"
            )
            deadline = time.monotonic() + 30
            while _scalar(engine, waiting) == 0:  # its own transaction each: the statistics are current
                assert time.monotonic() < deadline, "the batch's MERGE never waited for the other insert"
                time.sleep(0.05)
            other.commit()
            batch.join(30)
            assert not batch.is_alive()
    finally:
        engine.dispose()
    assert rows(postgres_db, "SELECT id, name FROM orders ORDER BY id") == [(1, "one"), (5, "ours")]
    assert offsets(store.committed_positions("jdbc-out")) == {"orders/broker-a:0": 2}


def test_postgres_upsert_into_an_updatable_view_writes_through_it(
    store: OffsetStore, postgres_db: Any, tasks: list[JdbcSinkTask]
) -> None:
    """PostgreSQL 15 and 16 refuse MERGE on a view; ON CONFLICT writes through an updatable one."""
    with create_engine(postgres_db.url).begin() as conn:
        conn.execute(
            text(
                "CREATE TABLE orders_base (id BIGINT PRIMARY KEY, name TEXT, amount NUMERIC(10,2), raw BYTEA)"
            )
        )
        conn.execute(text("CREATE VIEW orders AS SELECT id, name, amount, raw FROM orders_base"))
    upsert = {"insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id", "auto.create": "false"}
    task = task_for(postgres_db, store, tasks, **upsert)
    run_batch(store, task, 0, [rec(0, 1, (1, "a", None, None)), rec(1, 2, (2, "b", None, None))])
    run_batch(store, task, 1, [rec(2, 1, (1, "a2", Decimal("1.00"), None))])
    assert rows(postgres_db, "SELECT id, name, amount FROM orders_base ORDER BY id") == [
        (1, "a2", Decimal("1.00")),
        (2, "b", None),
    ]
    assert offsets(store.committed_positions("jdbc-out")) == {"orders/broker-a:0": 3}
