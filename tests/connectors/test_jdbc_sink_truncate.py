"""jdbc-sink ``truncate.enabled`` against the real databases: one batch of change events unwrapped
by ExtractNewRecordState (``drop.truncates=false``) — rows, a TRUNCATE, more rows — leaves the
target holding only what followed the truncate (and nothing of what was there before the batch),
for PostgreSQL in the offset store's database (rows, truncate and positions in one transaction: a
crash before the commit leaves the table as it was), PostgreSQL elsewhere and MariaDB (ledger).
Without ``truncate.enabled`` the truncate is ignored and the batch is written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from sluice.activities.spark_binding import batch_table, chain_frame, table_frame
from sluice.activities.store import OffsetStore
from sluice.connectors.api import open_sink_task
from sluice.connectors.cdc.envelope import ChangeRecord, change_table, envelope
from sluice.connectors.jdbc.sink import JdbcSinkConnector, JdbcSinkTask
from sluice.connectors.jdbc.types import MappedColumn
from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.transforms import build_chain
from tests.connectors.contract import _Crash, _CrashingCommitter

COLUMNS = (MappedColumn("id", "int4", "INT", False), MappedColumn("name", "text", "STRING", True))
SOURCE = (("table", "STRING"), ("lsn", "BIGINT"))
TOPIC, PARTITION = "shop_public_items", "public.items"


def _batch(spark: Any, changes: list[tuple[str, int | None, str | None]]) -> Any:
    """Change events of table ``items`` (op, id, name) as the replica sink of docs/connectors.md sees them."""
    records = []
    for offset, (op, key, name) in enumerate(changes):
        row = None if key is None else {"id": key, "name": name}
        before, after = (row, None) if op == "d" else (None, None if op == "t" else row)
        value = envelope(op, before, after, {"table": "items", "lsn": offset}, 7)
        records.append(ChangeRecord(offset, None if key is None else {"id": key}, value, 7000))
    table = change_table(records, columns=COLUMNS, key_columns=["id"], source_fields=SOURCE,
                         topic=TOPIC, partition=PARTITION)  # fmt: skip
    (unwrap,) = build_chain(
        {
            "transforms": "unwrap",
            "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
            "transforms.unwrap.delete.handling.mode": "none",
            "transforms.unwrap.drop.truncates": "false",
        }
    )
    return batch_table(chain_frame([unwrap], table_frame(spark, table)))


BEFORE = [("c", 7, "old"), ("c", 8, "old")]  # an earlier batch
BATCH = [("c", 1, "a"), ("c", 2, "b"), ("t", None, None), ("c", 3, "c"), ("c", 1, "a2"), ("c", 4, "x"),
         ("d", 4, None)]  # fmt: skip
AFTER_TRUNCATE = [(1, "a2"), (3, "c")]
IGNORED = [(1, "a2"), (2, "b"), (3, "c"), (7, "old"), (8, "old")]


def _config(url: str, user: str, password: str, schema: str, **extra: str) -> dict[str, str]:
    return {
        "name": "replica",
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "topics": TOPIC,
        "connection.url": url,
        "connection.user": user,
        "connection.password": password,
        "schema": schema,
        "table.name.format": "items",
        "insert.mode": "upsert",
        "pk.mode": "record_key",
        "pk.fields": "id",
        "delete.enabled": "true",
        "auto.create": "true",
        **extra,
    }


def _plan(task: JdbcSinkTask, batch_id: int, start: int, end: int) -> BatchPlan:
    bare = BatchPlan("replica", 0, batch_id, (PartitionRange("broker-a:0", start, end, TOPIC),))
    return BatchPlan("replica", 0, batch_id, bare.ranges, task.prepare(bare))


def _rows(url: str, table: str) -> list[tuple[Any, ...]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(f"SELECT id, name FROM {table} ORDER BY id"))]
    finally:
        engine.dispose()


def _run(
    spark: Any, store: OffsetStore, config: dict[str, str], crashed: Callable[[], None] | None = None
) -> JdbcSinkTask:
    """Batch 1 (BEFORE), then batch 2 (BATCH) crashing before the positions commit (``crashed``
    looks at the target then) and run again, as the runtime does."""
    raw = config
    assert JdbcSinkConnector().validate(raw) == []
    task = open_sink_task(JdbcSinkConnector, JdbcSinkConnector().parse(raw), 0)
    assert isinstance(task, JdbcSinkTask)
    task.bind_positions(store.committer())
    first = _plan(task, 1, 0, len(BEFORE))
    store.record_plan(first)
    task.write(_batch(spark, BEFORE), first)
    second = _plan(task, 2, len(BEFORE), len(BEFORE) + len(BATCH))
    store.record_plan(second)
    if crashed is not None:
        task.bind_positions(_CrashingCommitter(store))
        with pytest.raises(_Crash):
            task.write(_batch(spark, BATCH), second)
        crashed()
        task.bind_positions(store.committer())
    task.write(_batch(spark, BATCH), second)
    return task


@pytest.fixture
def store(stack_config: Any, fresh_schema: str, pg_engine: Any) -> OffsetStore:
    s = OffsetStore(stack_config.database_url, schema=fresh_schema, engine=pg_engine)
    s.migrate()
    return s


def test_postgres_in_the_store_database_truncates_in_order_in_the_batch_transaction(
    spark, stack_config: Any, fresh_schema: str, store: OffsetStore
) -> None:
    from sqlalchemy.engine import make_url

    url = make_url(stack_config.database_url)
    config = _config(stack_config.database_url, url.username or "", url.password or "", fresh_schema,
                     **{"truncate.enabled": "true"})  # fmt: skip
    table = f'"{fresh_schema}".items'

    def rolled_back() -> None:  # the truncate went back with the rows and positions
        assert _rows(stack_config.database_url, table) == [(7, "old"), (8, "old")]

    task = _run(spark, store, config, rolled_back)
    assert _rows(stack_config.database_url, table) == AFTER_TRUNCATE
    task.close()


@pytest.mark.stack  # the target database through getfixturevalue
@pytest.mark.parametrize("target", ["postgres_db", "mariadb_db"])
@pytest.mark.parametrize(("enabled", "expected"), [("true", AFTER_TRUNCATE), ("false", IGNORED)])
def test_another_database_truncates_in_order_or_ignores_the_truncate(
    spark, request: pytest.FixtureRequest, store: OffsetStore, target: str, enabled: str, expected: Any
) -> None:
    db = request.getfixturevalue(target)
    schema = "" if target == "mariadb_db" else "public"
    config = _config(db.jdbc_url, db.user, db.password, schema, **{"truncate.enabled": enabled})
    task = _run(spark, store, config, lambda: None)  # the data committed, the re-run writes nothing
    assert _rows(db.url, "items") == expected
    task.close()
