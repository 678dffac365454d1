"""RocketMQ -> delta-sink / iceberg-sink -> lake tables on the local filesystem, through real workers.

Producers write Kafka's JsonConverter envelopes (and tombstones) into topics keyed by id, each id
to its own queue, as a CDC pipeline's source would. The tables are read back with the test's own
SparkSession (the same lake jars) and compared by content:

* **upserts, deletes and a new field**: the same topic into a Delta table (Sluice's keys) and an
  Iceberg table (Apache Iceberg's Kafka Connect keys and class name), MERGEd on the key; a record
  carrying a field the table lacks adds the column. Both tables end equal to the last version of
  every id not deleted.
* **a SIGKILL between the table commit and the position commit**: the offset store's positions
  are locked from the test (a real PostgreSQL lock), so the worker commits a batch to a Delta
  table in append mode and then blocks committing its positions; it is SIGKILLed there. The next
  worker re-runs the batch, finds its commit in the table's history and writes nothing again: the
  append-only table holds every record exactly once, and no batch reference twice.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from sluice.connectors.rocketmq.client import MessageQueue
from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.connectors.rocketmq.values import OutgoingMessage
from sluice.workflows.types import TaskState
from tests.runtime.helpers import connect_envelope, failed_task_error, send_keyed_rows, wait_for

FIELDS = [
    {"type": "int64", "optional": False, "field": "id"},
    {"type": "string", "optional": True, "field": "name"},
    {"type": "float64", "optional": True, "field": "price"},
]
STOCK = {"type": "int32", "optional": True, "field": "stock"}
FAST = {"poll.interval.ms": "200"}
#: What reading a table that is not there yet says.
NOT_THERE = (
    "PATH_NOT_FOUND",
    "DELTA_TABLE_NOT_FOUND",
    "TABLE_OR_VIEW_NOT_FOUND",
    "not a Delta table",
    "NoSuchTable",
    "does not exist",
)
JSON_CONVERTERS = {
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
}


def _send(client: SyncRocketMQClient, topic: str, rows: list[tuple[int, dict[str, object] | None]]) -> None:
    """A row with ``stock`` carries the wider schema."""
    send_keyed_rows(
        client, topic, rows, FIELDS[:1], lambda row: [*FIELDS, STOCK] if "stock" in row else FIELDS
    )


#: A table's rows as last read, by (format, path), with the commit log they were read at.
_READ: dict[tuple[str, str], tuple[tuple[tuple[str, int, int], ...], list[dict[str, Any]] | None]] = {}


def _log_files(path: str) -> tuple[tuple[str, int, int], ...]:
    """A table's commit log (Delta's ``_delta_log``, Iceberg's ``metadata``) as (file, size, mtime):
    it changes with every commit, column change, drop and purge."""
    files = []
    for log in (Path(path) / "_delta_log", Path(path) / "metadata"):
        if log.is_dir():
            files += [(f.name, (st := f.stat()).st_size, st.st_mtime_ns) for f in log.iterdir()]
    return tuple(sorted(files))


def _rows_list(spark: Any, path: str, fmt: str = "delta") -> list[dict[str, Any]] | None:
    """A lake table's rows (None while it does not exist), read through Spark again only once its
    commit log has changed: a wait polling twice a second would otherwise run Spark jobs in the
    test's JVM against the worker's on two cores."""
    log = _log_files(path)
    seen = _READ.get((fmt, path))
    if seen is None or seen[0] != log:
        try:
            rows = [r.asDict() for r in spark.read.format(fmt).load(path).collect()]
        except Exception as exc:  # noqa: BLE001 - not there yet
            if not any(m in str(exc) for m in NOT_THERE):
                raise
            rows = None
        seen = _READ[(fmt, path)] = (log, rows)
    return seen[1]


def _rows(spark: Any, fmt: str, path: str) -> dict[int, dict[str, Any]] | None:
    """A lake table's rows by id (None while it does not exist)."""
    rows = _rows_list(spark, path, fmt)
    return None if rows is None else {r["id"]: r for r in rows}


async def test_upserts_deletes_and_new_columns_into_delta_and_iceberg(
    start_worker, sluice, topic_name, rocketmq_admin, spark, tmp_path: Path
) -> None:
    name = uuid.uuid4().hex[:8]
    start_worker()
    first = [(i, {"id": i, "name": f"item {i}", "price": i + 0.25}) for i in range(40)]
    _send(rocketmq_admin, topic_name, first)
    delta_root, warehouse = tmp_path / "delta", tmp_path / "warehouse"
    await sluice.create(
        f"delta-{name}",
        {
            "connector.class": "delta-sink",
            "topics": topic_name,
            "delta.lake.tables.location": str(delta_root),
            "table.name.format": "items",
            "insert.mode": "upsert",
            **JSON_CONVERTERS,
            **FAST,
        },
    )
    await sluice.create(
        f"iceberg-{name}",
        {
            "connector.class": "org.apache.iceberg.connect.IcebergSinkConnector",
            "topics": topic_name,
            "iceberg.tables": "shop.items",
            "iceberg.tables.upsert-mode-enabled": "true",
            "iceberg.catalog.type": "hadoop",
            "iceberg.catalog.warehouse": str(warehouse),
            **JSON_CONVERTERS,
            **FAST,
        },
    )
    expected: dict[int, dict[str, Any]] = {i: {**row, "stock": None} for i, row in first}  # type: ignore[misc]
    tables = {"delta": str(delta_root / "items"), "iceberg": str(warehouse / "shop" / "items")}

    async def both_hold(want: dict[int, dict[str, Any]], what: str) -> None:
        for fmt, path in tables.items():

            def holds(fmt: str = fmt, path: str = path) -> bool:
                got = _rows(spark, fmt, path)
                return got is not None and {k: {**v, "stock": v.get("stock")} for k, v in got.items()} == want

            try:
                await wait_for(holds, 120, f"{what} in the {fmt} table")
            except AssertionError as exc:
                got = _rows(spark, fmt, path) or {}
                keys = set(want) | set(got)
                wrong = {k: (want.get(k), got.get(k)) for k in keys if want.get(k) != got.get(k)}
                raise AssertionError(f"{exc}: (want, got) {dict(list(wrong.items())[:4])}") from None

    await both_hold(expected, "the first version of every item")

    updates = [(i, {"id": i, "name": f"renamed {i} ✓", "price": None, "stock": i * 2}) for i in range(10)]
    deletes: list[tuple[int, dict[str, object] | None]] = [(i, None) for i in (10, 11, 12)]
    reinserted = [(11, {"id": 11, "name": "back", "price": 1.5})]
    _send(rocketmq_admin, topic_name, [*updates, *deletes, *reinserted])
    for i, row in updates:
        expected[i] = dict(row)
    for i, _ in deletes:
        del expected[i]
    expected[11] = {"id": 11, "name": "back", "price": 1.5, "stock": None}
    await both_hold(expected, "the updates, deletes and the new column")
    for connector in (f"delta-{name}", f"iceberg-{name}"):
        status = await sluice.status(connector)
        assert [t.state for t in status.tasks] == [TaskState.RUNNING], (connector, status.tasks)


@pytest.mark.private_worker  # SIGKILLs its worker
async def test_a_kill_between_table_and_position_commit_writes_nothing_twice(
    start_worker, sluice, topic_name, rocketmq_admin, spark, pg_engine, runtime_env, tmp_path: Path
) -> None:
    name = uuid.uuid4().hex[:8]
    worker = start_worker()
    path = str(tmp_path / "events")
    await sluice.create(
        f"delta-events-{name}",
        {
            "connector.class": "org.apache.rocketmq.connect.deltalake.connector.DeltalakeSinkConnector",
            "topics": topic_name,
            "tablePath": path,
            "partition.fields": "name",
            **JSON_CONVERTERS,
            **FAST,
        },
    )
    produced: list[dict[str, Any]] = []

    def send(ids: range) -> None:
        rows = [(i, {"id": i, "name": f"kind {i % 3}", "price": float(i)}) for i in ids]
        _send(rocketmq_admin, topic_name, rows)  # type: ignore[arg-type]
        produced.extend(r for _, r in rows)  # type: ignore[misc]

    def table_is(want: list[dict[str, Any]]) -> bool:
        got = _rows_list(spark, path)
        return got is not None and Counter(map(_key, got)) == Counter(map(_key, want))

    send(range(0, 20))
    await wait_for(lambda: table_is(produced), 120, "the first events in the table")

    def table_holds_more_than(count: int) -> bool:
        got = _rows_list(spark, path)
        return got is not None and len(got) > count

    # Positions locked: the next batch commits to the table, then waits on the store's lock. It
    # may hold only some of the events sent (the sink planned while they were being sent), and the
    # batches after it wait behind it: wait for the table to grow, not for all of them.
    with pg_engine.connect() as lock:
        lock.execute(text(f'LOCK TABLE "{runtime_env.store_schema}".positions IN SHARE MODE'))
        send(range(20, 45))
        await wait_for(lambda: table_holds_more_than(20), 120, "the second batch committed to the table")
        worker.kill()  # SIGKILL, its positions not committed
        lock.rollback()
    start_worker()
    send(range(45, 60))
    await wait_for(lambda: table_is(produced), 180, "every event exactly once after the re-run")
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    refs = Counter(r["userMetadata"] for r in history if r["userMetadata"])
    assert refs and max(refs.values()) == 1, f"a batch committed twice: {refs}"
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]
    assert list(detail["partitionColumns"]) == ["name"], "partitioned by partition.fields"
    status = await sluice.status(f"delta-events-{name}")
    assert [t.state for t in status.tasks] == [TaskState.RUNNING], status.tasks


def _key(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True)


async def test_a_table_changed_under_the_sink(
    start_worker, sluice, topic_name, rocketmq_admin, spark, tmp_path: Path
) -> None:
    """A column dropped under an iceberg-sink comes back (``auto.evolve``) and the rows after it
    carry it again; the table deleted under it fails the task naming the table, never re-created
    short."""
    name = uuid.uuid4().hex[:8]
    start_worker()
    warehouse = tmp_path / "warehouse"
    connector = f"iceberg-changed-{name}"
    await sluice.create(
        connector,
        {
            "connector.class": "iceberg-sink",
            "topics": topic_name,
            "iceberg.catalog.warehouse": str(warehouse),
            "iceberg.namespace": "shop",
            "table.name.format": "items",
            **JSON_CONVERTERS,
            **FAST,
        },
    )
    path = str(warehouse / "shop" / "items")
    spark.conf.set("spark.sql.catalog.changed", "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set("spark.sql.catalog.changed.type", "hadoop")
    spark.conf.set("spark.sql.catalog.changed.warehouse", str(warehouse))

    def rows(ids: range) -> list[tuple[int, dict[str, object] | None]]:
        return [(i, {"id": i, "name": f"item {i}", "price": i + 0.5}) for i in ids]

    def table_is(want: dict[int, dict[str, Any]]) -> bool:
        return _rows(spark, "iceberg", path) == want

    _send(rocketmq_admin, topic_name, rows(range(10)))
    want = {i: row for i, row in rows(range(10))}
    await wait_for(lambda: table_is(want), 120, "the first rows in the table")  # type: ignore[arg-type]

    spark.sql("ALTER TABLE changed.shop.items DROP COLUMN price")
    _send(rocketmq_admin, topic_name, rows(range(10, 20)))
    want = {i: {**row, "price": None} for i, row in want.items()}  # type: ignore[dict-item]
    want.update({i: row for i, row in rows(range(10, 20))})  # type: ignore[misc]
    await wait_for(lambda: table_is(want), 120, "the column added again, on the rows after the drop")

    spark.sql("DROP TABLE changed.shop.items PURGE")
    _send(rocketmq_admin, topic_name, rows(range(20, 25)))

    error = await failed_task_error(sluice, connector, 120, "the task FAILED on the deleted table")
    assert "table iceberg.shop.items" in error and "deleted under the sink" in error, error
    assert _rows(spark, "iceberg", path) is None, "not created again, short"


async def test_iceberg_routes_by_a_field_as_its_kafka_connect_sink_does(
    start_worker, sluice, topic_name, rocketmq_admin, spark, tmp_path: Path
) -> None:
    """Apache Iceberg's routing keys, unchanged: several ``iceberg.tables`` each taking the records
    whose ``region`` its ``route-regex`` matches (a record may go to several), and
    ``dynamic-enabled`` tables named by a field. Each table holds exactly its records; a record
    no table takes fails the task naming its value and position, rather than being dropped."""
    name = uuid.uuid4().hex[:8]
    start_worker()
    warehouse = tmp_path / "warehouse"
    region = {"type": "string", "optional": True, "field": "region"}
    table = {"type": "string", "optional": True, "field": "table"}
    regions = ["eu-west", "us-east", "eu-north", "us-west"]
    rows = [(i, {"id": i, "name": f"item {i}", "price": i + 0.5, "region": regions[i % 4],
                 "table": f"dyn.t{i % 3}"}) for i in range(30)]  # fmt: skip
    send = [*FIELDS, region, table]
    send_keyed_rows(rocketmq_admin, topic_name, rows, FIELDS[:1], lambda row: send)  # type: ignore[arg-type]
    common = {
        "connector.class": "org.apache.iceberg.connect.IcebergSinkConnector",
        "topics": topic_name,
        "iceberg.catalog.type": "hadoop",
        "iceberg.catalog.warehouse": str(warehouse),
        **JSON_CONVERTERS,
        **FAST,
    }
    static = f"iceberg-routed-{name}"
    await sluice.create(static, {
        **common,
        "iceberg.tables": "shop.eu,shop.us,shop.both",
        "iceberg.tables.route-field": "region",
        "iceberg.table.shop.eu.route-regex": "eu-.*",
        "iceberg.table.shop.us.route-regex": "us-.*",
        "iceberg.table.shop.both.route-regex": "(eu|us)-.*",
    })  # fmt: skip
    await sluice.create(f"iceberg-dynamic-{name}", {
        **common, "iceberg.tables.dynamic-enabled": "true", "iceberg.tables.route-field": "table",
    })  # fmt: skip

    def table_of(want: dict[int, dict[str, object]], path: Path) -> Callable[[], bool]:
        return lambda: _rows(spark, "iceberg", str(path)) == want

    everything = {i: row for i, row in rows}

    def only(take: Callable[[dict[str, object]], bool]) -> dict[int, dict[str, object]]:
        return {i: r for i, r in everything.items() if take(r)}

    expected = {
        warehouse / "shop" / "eu": only(lambda r: str(r["region"]).startswith("eu-")),
        warehouse / "shop" / "us": only(lambda r: str(r["region"]).startswith("us-")),
        warehouse / "shop" / "both": everything,
        **{warehouse / "dyn" / f"t{k}": only(lambda r, k=k: r["table"] == f"dyn.t{k}") for k in range(3)},
    }
    for path, want in expected.items():
        await wait_for(table_of(want, path), 120, f"exactly its records in {path.relative_to(warehouse)}")

    apac = (100, {"id": 100, "name": "far", "price": 1.0, "region": "apac-south", "table": "dyn.t0"})
    send_keyed_rows(rocketmq_admin, topic_name, [apac], FIELDS[:1], lambda row: send)  # type: ignore[arg-type]
    error = await failed_task_error(sluice, static, 120, "the routed task FAILED on a record no table takes")
    assert "no table takes route value 'apac-south' of field 'region'" in error, error
    assert f"topic '{topic_name}' partition '" in error and "offset 8" in error, error  # id 100: queue 0
    assert _rows(spark, "iceberg", str(warehouse / "shop" / "both")) == everything, "nothing of it written"


async def test_a_bad_record_fails_the_task_naming_it_and_commits_nothing(
    start_worker, sluice, topic_name, rocketmq_admin, spark, tmp_path: Path
) -> None:
    name = uuid.uuid4().hex[:8]
    start_worker()
    good = connect_envelope(FIELDS, {"id": 1, "name": "fine", "price": 1.0}).encode()
    broker = rocketmq_admin.queues(topic_name)[0].broker_name
    rocketmq_admin.send_batch(
        MessageQueue(topic_name, broker, 0), [OutgoingMessage(good), OutgoingMessage(b"{not json")]
    )
    path = str(tmp_path / "strict")
    connector = f"delta-strict-{name}"
    await sluice.create(
        connector,
        {"connector.class": "delta-sink", "topics": topic_name, "tablePath": path, **JSON_CONVERTERS, **FAST},
    )

    error = await failed_task_error(sluice, connector, 120, "the task FAILED on the record that is not JSON")
    assert f"topic '{topic_name}' partition '{broker}:0' offset 1" in error, error
    rows = _rows_list(spark, path)
    assert not rows, f"nothing of the batch committed: {rows}"
