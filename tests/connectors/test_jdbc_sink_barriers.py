"""jdbc-sink ``truncate.enabled`` with a table spread over four queues and two tasks, against the
real databases: a truncate's copies (one per queue, connectors.barriers) are met in different
batches of different tasks, some queues far behind the others, and the target still ends as
applying every change in source order would — the truncate applied once, rows before it gone,
rows after it kept, whichever queue or task they came through. The barrier state commits with the
rows: a batch that crashes before its commit and runs again decides the same."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import create_engine, text

from sluice.activities.store import OffsetStore
from sluice.connectors.api import open_sink_task
from sluice.connectors.jdbc.sink import JdbcSinkConnector, JdbcSinkTask
from sluice.connectors.model import BatchPlan, PartitionRange
from tests.connectors.contract import _Crash, _CrashingCommitter
from tests.connectors.test_jdbc_sink_truncate import _config as replica_config
from tests.connectors.test_jdbc_sink_truncate import _rows

TOPIC, SOURCE = "shop_items", "shop.items"
QUEUES = [f"broker-a:{i}" for i in range(4)]
RECORD = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.string()),
        ("offset", pa.int64()),
        ("key", pa.struct([("id", pa.int32())])),
        ("value", pa.struct([("id", pa.int32()), ("name", pa.string())])),
        ("headers", pa.map_(pa.string(), pa.string())),
        ("timestamp", pa.timestamp("us", tz="UTC")),
    ]
)

# The source's changes in order: (op, id, name); a truncate goes to every queue, a row to id % 4.
HISTORY = [("c", i, f"v{i}") for i in range(1, 13)] + [("u", 3, "v3b"), ("t", None, None)]
HISTORY += [("c", i, f"w{i}") for i in range(5, 17)] + [("u", 9, "w9b"), ("d", 6, None)]


def _queues() -> dict[str, list[dict[str, Any]]]:
    """Each queue's records as the sink reads them (ExtractNewRecordState done: a truncate is a null
    value with ``__op=t``), with the properties the source runner set."""
    out: dict[str, list[dict[str, Any]]] = {q: [] for q in QUEUES}
    for src_offset, (op, key, name) in enumerate(HISTORY):
        targets = range(4) if op == "t" else [key % 4]
        for i in targets:
            q = QUEUES[i]
            headers = {"sluice.partition": SOURCE, "sluice.offset": str(src_offset)}
            if op == "t":
                headers |= {
                    "__op": "t",
                    "sluice.barrier": f"{i}/4",
                    "sluice.barrier.queues": ",".join(QUEUES),
                }
            out[q].append(
                {
                    "topic": TOPIC,
                    "partition": q,
                    "offset": len(out[q]),
                    "key": None if key is None else {"id": key},
                    "value": None if op in ("t", "d") else {"id": key, "name": name},
                    "headers": list(headers.items()),
                    "timestamp": None,
                }
            )
    return out


def _expected() -> list[tuple[int, str]]:
    table: dict[int, str] = {}
    for op, key, name in HISTORY:
        if op == "t":
            table.clear()
        elif op == "d":
            table.pop(key, None)
        else:
            table[key] = name
    return sorted(table.items())


def _config(url: str, user: str, password: str, schema: str) -> dict[str, str]:
    """test_jdbc_sink_truncate's replica sink, with truncates, two tasks and a name of its own."""
    spread = {"truncate.enabled": "true", "tasks.max": "2", "topics": TOPIC}
    return {**replica_config(url, user, password, schema, **spread), "name": f"spread-{uuid.uuid4().hex[:8]}"}


# Batches: (task, {queue: how many more of its records}). Task 0 reads queues 0 and 1, task 1
# queues 2 and 3. The truncate is each queue's fourth or fifth record.
SCHEDULES = {
    "copies met one batch at a time": [
        (0, {QUEUES[0]: 9, QUEUES[1]: 2}),  # q0 past its copy: the truncate applies here
        (1, {QUEUES[2]: 2, QUEUES[3]: 9}),  # q2 still before its copy: those rows are gone
        (0, {QUEUES[1]: 9}),  # q1's copy, met after its rows were left out last time
        (1, {QUEUES[2]: 9}),
    ],
    "the last queue far behind": [
        (1, {QUEUES[3]: 9}),
        (0, {QUEUES[0]: 9, QUEUES[1]: 9}),
        (1, {QUEUES[2]: 1}),
        (1, {QUEUES[2]: 1}),
        (1, {QUEUES[2]: 9}),
    ],
}


@pytest.fixture
def store(stack_config: Any, fresh_schema: str, pg_engine: Any) -> OffsetStore:
    s = OffsetStore(stack_config.database_url, schema=fresh_schema, engine=pg_engine)
    s.migrate()
    return s


@pytest.mark.stack  # the target database through getfixturevalue
@pytest.mark.parametrize("target", ["store", "postgres_db", "mariadb_db"])
@pytest.mark.parametrize("schedule", SCHEDULES.values(), ids=SCHEDULES.keys())
def test_a_truncate_spread_over_queues_and_tasks_applies_once_in_order(
    request: pytest.FixtureRequest, store: OffsetStore, target: str, schedule: list[Any]
) -> None:
    """``store``: the offset store's database (rows, barrier state and positions in one transaction,
    so the crash rolls all of it back); the others keep the sink's ledger (the re-run writes nothing)."""
    if target == "store":
        from sqlalchemy.engine import make_url

        url, schema = (
            request.getfixturevalue("stack_config").database_url,
            request.getfixturevalue("fresh_schema"),
        )
        parsed_url = make_url(url)
        config = _config(url, parsed_url.username or "", parsed_url.password or "", schema)
        read_url, table = url, f'"{schema}".items'
    else:
        db = request.getfixturevalue(target)
        config = _config(db.jdbc_url, db.user, db.password, "" if target == "mariadb_db" else "public")
        read_url, table = db.url, "items"
    assert JdbcSinkConnector().validate(config) == []
    parsed = JdbcSinkConnector().parse(config)
    tasks = [open_sink_task(JdbcSinkConnector, parsed, i) for i in range(2)]
    for task in tasks:
        assert isinstance(task, JdbcSinkTask) and task.orders_barriers()
        task.bind_positions(store.committer())
    queues = _queues()
    read = dict.fromkeys(QUEUES, 0)
    batches = [0, 0]
    for task_id, takes in [*schedule, (0, dict.fromkeys(QUEUES[:2], 99)), (1, dict.fromkeys(QUEUES[2:], 99))]:
        task = tasks[task_id]
        ranges, rows = [], []
        for q, n in takes.items():
            part = queues[q][read[q] : read[q] + n]
            ranges.append(PartitionRange(q, read[q], read[q] + len(part), TOPIC))
            rows += part
            read[q] += len(part)
        batches[task_id] += 1
        bare = BatchPlan("spread", task_id, batches[task_id], tuple(ranges))
        plan = store.record_plan(
            BatchPlan("spread", task_id, batches[task_id], bare.ranges, task.prepare(bare))
        )
        batch = pa.Table.from_pylist(rows, RECORD)
        # each batch first crashes before its commit, then runs again (the runtime's re-run)
        assert isinstance(task, JdbcSinkTask)
        task.bind_positions(_CrashingCommitter(store))
        with pytest.raises(_Crash):
            task.write(batch, plan)
        task.bind_positions(store.committer())
        task.write(batch, plan)
    assert read == {q: len(queues[q]) for q in QUEUES}
    assert _rows(read_url, table) == _expected()
    with create_engine(read_url).connect() as conn:  # every queue passed the truncate: nothing owed
        query = text("SELECT state FROM sluice_sink_barriers WHERE connector = :c")  # the ledger's schema
        (state,) = conn.execute(query, {"c": config["name"]}).one()
    assert json.loads(state)["barriers"]["pending"] == []
    for task in tasks:
        task.close()
