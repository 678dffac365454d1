"""The PostgreSQL sink against the real PostgreSQL: exactly once across a failure (no JVM: a sink
writes Arrow)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import Connection, text
from sqlalchemy.engine import Engine

from sluice.activities.store import BatchAlreadyCommittedError, OffsetStore
from sluice.connectors.api import TransactionalSink
from sluice.connectors.config import ConfigError
from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.postgres import PostgresSinkConnector, PostgresSinkError, PostgresSinkTask
from sluice.connectors.records import Record
from sluice.connectors.source_reads import records_table
from sluice.deploy.local.config import StackConfig
from tests.store.helpers import offsets

VALUE = pa.struct(
    [
        pa.field("id", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("amount", pa.decimal128(10, 2)),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("seen", pa.timestamp("us", "UTC")),
    ]
)
T0 = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)


class Crash(Exception):
    """The worker dying after the rows were copied, before the transaction commits."""


class CrashingCommitter:
    """The runtime's committer, failing at the last moment, after checking the COPY really reached the
    table inside the sink's transaction."""

    def __init__(self, store: OffsetStore, table: str) -> None:
        self.store, self.table, self.copied = store, table, -1

    def same_database(self, database_url: str) -> bool:
        return self.store.same_database(database_url)

    def commit(self, plan: BatchPlan, connection: Connection) -> None:
        self.copied = connection.execute(text(f"SELECT count(*) FROM {self.table}")).scalar_one()
        raise Crash


def bound(task: PostgresSinkTask, store: OffsetStore) -> PostgresSinkTask:
    """The task as the runtime wires a TransactionalSink: with the store's committer bound."""
    assert isinstance(task, TransactionalSink)
    task.bind_positions(store.committer())
    return task


def config(cfg: StackConfig, schema: str, **extra: str) -> dict[str, Any]:
    raw = {
        "name": "pg-sink",
        "connector.class": "postgres-sink",
        "topics": "orders",
        "connection.url": cfg.database_url,
        "schema": schema,
        "table": "orders_out",
        "auto.create": "true",
        **extra,
    }
    return PostgresSinkConnector().parse(raw)


def order(i: int, name: str | None = None) -> tuple[Any, ...]:
    return (
        i,
        name if name is not None else f"name-{i}",
        Decimal(f"{i}.25"),
        [f"t{i}", "x"],
        T0 + dt.timedelta(seconds=i),
    )


def rows_of(engine: Engine, schema: str, sql: str) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(sql.format(t=f'"{schema}".orders_out')))]


def test_sink_writes_exactly_once_across_a_crash(
    stack_config: StackConfig,
    store: OffsetStore,
    pg_engine: Engine,
    tasks: list[PostgresSinkTask],
) -> None:
    recs = [Record("broker-a:0", o, order(o), topic="orders") for o in range(6)]
    recs += [Record("broker-a:1", o, order(100 + o), topic="orders") for o in range(4)]
    records = records_table(recs, VALUE)
    plan = BatchPlan(
        "pg-sink",
        0,
        0,
        (PartitionRange("broker-a:0", 0, 6, "orders"), PartitionRange("broker-a:1", 0, 4, "orders")),
    )
    store.record_plan(plan)

    crashing = PostgresSinkTask(config(stack_config, store.schema), 0)
    committer = CrashingCommitter(store, f'"{store.schema}".orders_out')
    crashing.bind_positions(committer)
    tasks.append(crashing)
    with pytest.raises(Crash):
        crashing.write(records, plan)
    assert committer.copied == 10  # the rows were in the table inside the transaction ...
    with pg_engine.connect() as conn:  # ... and nothing is visible after it: not even the table
        assert (
            conn.execute(text("SELECT to_regclass(:t)"), {"t": f'"{store.schema}".orders_out'}).scalar()
            is None
        )
    assert store.committed_positions("pg-sink") == {}

    # The restarted worker finds the pending plan and re-runs it with the same ranges.
    pending = store.pending_plan("pg-sink", 0)
    assert pending == plan
    task = bound(PostgresSinkTask(config(stack_config, store.schema), 0), store)
    tasks.append(task)
    task.write(records, store.record_plan(pending))

    expected = [
        (i, f"name-{i}", Decimal(f"{i}.25"), [f"t{i}", "x"], T0 + dt.timedelta(seconds=i))
        for i in [*range(6), *range(100, 104)]
    ]
    assert (
        rows_of(pg_engine, store.schema, "SELECT id, name, amount, tags, seen FROM {t} ORDER BY id")
        == expected
    )
    assert offsets(store.committed_positions("pg-sink")) == {"orders/broker-a:0": 6, "orders/broker-a:1": 4}
    assert [(b.batch_id, b.status, b.attempts) for b in store.batches("pg-sink")] == [(0, "COMMITTED", 2)]

    # A third run of the same plan is refused as a whole: no duplicate rows.
    with pytest.raises(BatchAlreadyCommittedError, match="task 0 batch 0 is already committed"):
        task.write(records, plan)
    assert rows_of(pg_engine, store.schema, "SELECT count(*) FROM {t}") == [(10,)]


def test_upsert_keeps_the_last_record_per_key(
    stack_config: StackConfig,
    store: OffsetStore,
    pg_engine: Engine,
    tasks: list[PostgresSinkTask],
) -> None:
    task = bound(
        PostgresSinkTask(
            config(stack_config, store.schema, **{"insert.mode": "upsert", "pk.fields": "id"}), 0
        ),
        store,
    )
    tasks.append(task)
    batches = [
        [
            Record("broker-a:0", 0, order(1, "a")),
            Record("broker-a:0", 1, order(2, "")),
            Record("broker-a:0", 2, order(1, "b")),
        ],
        [
            Record("broker-a:0", 3, order(2, 'quote " comma , newline \n end')),
            Record("broker-a:0", 4, order(3)),
        ],
    ]
    for batch_id, recs in enumerate(batches):
        recs = [Record(r.partition, r.offset, r.value, topic="orders") for r in recs]
        start = recs[0].offset
        plan = BatchPlan(
            "pg-sink", 0, batch_id, (PartitionRange("broker-a:0", start, start + len(recs), "orders"),)
        )
        store.record_plan(plan)
        task.write(records_table(recs, VALUE), plan)

    assert rows_of(pg_engine, store.schema, "SELECT id, name FROM {t} ORDER BY id") == [
        (1, "b"),
        (2, 'quote " comma , newline \n end'),
        (3, "name-3"),
    ]
    assert offsets(store.committed_positions("pg-sink")) == {"orders/broker-a:0": 5}


def test_string_values_are_written_with_their_record_coordinates(
    stack_config: StackConfig,
    store: OffsetStore,
    pg_engine: Engine,
    tasks: list[PostgresSinkTask],
) -> None:
    task = bound(
        PostgresSinkTask(config(stack_config, store.schema, **{"pk.fields": "topic,partition,offset"}), 1),
        store,
    )
    tasks.append(task)
    recs = [
        Record("broker-a:2", 7, '{"a": 1}', topic="orders", key="k1", timestamp=dt.datetime(2024, 1, 1)),
        Record("broker-a:2", 8, "", topic="orders"),
        Record("broker-a:2", 9, None, topic="orders", key=""),
    ]
    plan = BatchPlan("pg-sink", 1, 0, (PartitionRange("broker-a:2", 7, 10, "orders"),))
    store.record_plan(plan)
    task.write(records_table(recs), plan)
    assert rows_of(
        pg_engine, store.schema, 'SELECT topic, "partition", "offset", key, value FROM {t} ORDER BY 3'
    ) == [
        ("orders", "broker-a:2", 7, "k1", '{"a": 1}'),
        ("orders", "broker-a:2", 8, None, ""),
        ("orders", "broker-a:2", 9, "", None),
    ]
    assert offsets(store.committed_positions("pg-sink", task_id=1)) == {"orders/broker-a:2": 10}


def test_missing_table_without_auto_create_fails_naming_it(
    stack_config: StackConfig, store: OffsetStore, tasks: list[PostgresSinkTask]
) -> None:
    task = bound(PostgresSinkTask(config(stack_config, store.schema, **{"auto.create": "false"}), 0), store)
    tasks.append(task)
    plan = BatchPlan("pg-sink", 0, 0, (PartitionRange("broker-a:0", 0, 1, "orders"),))
    store.record_plan(plan)
    recs = records_table([Record("broker-a:0", 0, order(1), topic="orders")], VALUE)
    with pytest.raises(ConfigError, match=r"task 0 batch 0 table '.*\.orders_out': the table does not exist"):
        task.write(recs, plan)
    assert store.committed_positions("pg-sink") == {}


# ---- configuration (pure) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"insert.mode": "upsert"}, "field 'pk.fields' is required when insert.mode=upsert"),
        ({"insert.mode": "merge"}, "field 'insert.mode': must be one of insert, upsert, update"),
        ({"connection.url": "mysql://u:hunter2@h/db"}, "not a PostgreSQL URL"),
        ({"connection.url": "::hunter2::"}, "connection.url must look like"),
        ({"table": ""}, "field 'table.name.format': must not be empty"),
    ],
)
def test_config_errors_name_the_field_and_hide_secrets(extra: dict[str, str], message: str) -> None:
    raw = {
        "name": "pg-sink",
        "connector.class": "postgres-sink",
        "topics": "orders",
        "connection.url": "postgresql://u:hunter2@localhost/db",
        "table": "t",
        **extra,
    }
    errors = PostgresSinkConnector().validate(raw)
    text_ = "\n".join(e.message for e in errors)
    assert message in text_
    assert "connector 'pg-sink'" in text_
    assert "hunter2" not in text_


def test_task_refuses_upsert_without_keys_and_a_store_in_another_database(stack_config: StackConfig) -> None:
    base = {
        "name": "pg-sink",
        "connection.url": "jdbc:postgresql://u:hunter2@127.0.0.1:15432/sluice",
        "table": "t",
    }
    with pytest.raises(ConfigError, match="pk.fields"):
        PostgresSinkTask({**base, "insert.mode": "upsert"}, 0)
    elsewhere = OffsetStore(stack_config.database_url.rsplit("/", 1)[0] + "/elsewhere")
    task = PostgresSinkTask(base, 0)
    with pytest.raises(PostgresSinkError, match="task 0: no position committer bound"):
        task._positions()
    # another database: accepted, positions go through the target's own ledger (test_jdbc_sink_*)
    task.bind_positions(elsewhere.committer())
    assert task._own_ledger
    same = PostgresSinkTask(base, 0)
    same.bind_positions(OffsetStore(stack_config.database_url).committer())
    assert not same._own_ledger
    assert "hunter2" not in repr(elsewhere)


def test_auto_create_types_and_values_round_trip(
    stack_config: StackConfig,
    store: OffsetStore,
    pg_engine: Engine,
    tasks: list[PostgresSinkTask],
) -> None:
    value = pa.struct(
        [
            pa.field("id", pa.int32()),
            pa.field("ok", pa.bool_()),
            pa.field("day", pa.date32()),
            pa.field("ratio", pa.float64()),
            pa.field("raw", pa.binary()),
            pa.field("attrs", pa.map_(pa.string(), pa.string())),
            pa.field("inner", pa.struct([pa.field("x", pa.int64())])),
        ]
    )
    recs = [
        Record(
            "broker-a:0", 0, (1, True, dt.date(2024, 2, 29), 0.5, b"\x00\xffA", {"k": "v"}, (7,)), topic="o"
        ),
        Record("broker-a:0", 1, (2, None, None, None, None, None, None), topic="o"),
    ]
    task = bound(PostgresSinkTask(config(stack_config, store.schema, **{"pk.fields": "id"}), 0), store)
    tasks.append(task)
    plan = BatchPlan("pg-sink", 0, 0, (PartitionRange("broker-a:0", 0, 2, "o"),))
    store.record_plan(plan)
    task.write(records_table(recs, value), plan)

    types = rows_of(
        pg_engine,
        store.schema,
        "SELECT column_name, data_type FROM information_schema.columns "
        f"WHERE table_schema = '{store.schema}' AND table_name = 'orders_out' ORDER BY ordinal_position",
    )
    assert types == [
        ("id", "integer"),
        ("ok", "boolean"),
        ("day", "date"),
        ("ratio", "double precision"),
        ("raw", "bytea"),
        ("attrs", "jsonb"),
        ("inner", "jsonb"),
    ]
    got = rows_of(pg_engine, store.schema, "SELECT * FROM {t} ORDER BY id")
    assert got == [
        (1, True, dt.date(2024, 2, 29), 0.5, b"\x00\xffA", {"k": "v"}, {"x": 7}),
        (2, None, None, None, None, None, None),
    ]
