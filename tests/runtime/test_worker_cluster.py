"""Workers as a cluster: several `sluice worker` processes on one task queue share connectors'
tasks, with Temporal's task queue as the only balancer.

Three workers run a six-task jdbc-source (six PostgreSQL tables) and a two-task jdbc-sink (upsert
into another PostgreSQL database). The worker running the most tasks is SIGKILLed mid-run; its
tasks are failed by a survivor, which sees the victim's process gone from this machine
(activities.leases, activities.processes; a worker elsewhere waits for the lease, which
tests/store/test_leases.py covers), and retried on the two others, and the target tables end equal
to the source tables, by content. A worker started later then takes every task when the two
survivors are stopped gracefully, and the tables stay equal through that too.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from typing import Any

import pytest

from sluice.worker.client import SluiceClient
from sluice.workflows.types import ConnectorState
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase, table_rows
from tests.runtime.helpers import FAST_HEARTBEAT, FAST_RETRY, wait_for
from tests.runtime.workers import WorkerProcess

TABLES = [f"t{i}" for i in range(6)]
JSON_WITH_SCHEMAS = {
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "true",
}
ROWS_PER_STEP = 200


def _insert(db: Db, start: int) -> None:
    for table in TABLES:
        db.run(
            f"INSERT INTO {table} (id, note, amount) SELECT g, '{table} ' || g || ' ü', g / 100.0 "
            f"FROM generate_series({start}, {start + ROWS_PER_STEP - 1}) AS g"
        )


def _rows(url: str, table: str) -> list[tuple[Any, ...]]:
    try:
        return table_rows(url, table)
    except Exception:  # created by the sink's first batch
        return []


def _identity(worker: WorkerProcess) -> str:
    """The worker's Temporal identity: the SDK's default, ``<pid>@<host>``."""
    return f"{worker.proc.pid}@"


async def _placement(sluice: SluiceClient, connectors: list[str]) -> list[str]:
    """The identity of the worker running each started task activity (pending, with a worker)."""
    found = []
    for name in connectors:
        described = await sluice.handle(name).describe()
        found += [a.last_worker_identity for a in described.raw_description.pending_activities
                  if a.activity_type.name == "run_connector_task" and a.last_worker_identity]  # fmt: skip
    return found


def _on(workers: list[WorkerProcess], identities: list[str]) -> Counter[int]:
    """How many tasks each worker (by index) runs; -1 counts identities of none of them."""
    where: Counter[int] = Counter()
    for identity in identities:
        index = next((i for i, w in enumerate(workers) if identity.startswith(_identity(w))), -1)
        where[index] += 1
    return where


@pytest.mark.fault
@pytest.mark.private_worker  # its own three workers, one SIGKILLed
@pytest.mark.slow
@pytest.mark.timeout(1200)
async def test_three_workers_share_tasks_survive_a_sigkill_and_a_later_worker_takes_over(
    start_worker, sluice: SluiceClient, postgres_db: TestDatabase, target_pg: TestDatabase
) -> None:
    src = Db.of(postgres_db)
    for table in TABLES:
        src.run(f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, note TEXT, amount NUMERIC(12,2))")
    _insert(src, 1)
    workers = [start_worker() for _ in range(3)]
    name, prefix = uuid.uuid4().hex[:8], f"W{uuid.uuid4().hex[:8]}-"
    source, sink = f"src-{name}", f"dst-{name}"
    common = {"poll.interval.ms": "200", **JSON_WITH_SCHEMAS, **FAST_RETRY, **FAST_HEARTBEAT}
    await sluice.create(source, {
        "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector", "connection.url": src.jdbc_url,
        "connection.user": src.user, "connection.password": src.password, "mode": "incrementing",
        "incrementing.column.name": "id", "table.whitelist": ",".join(TABLES), "topic.prefix": prefix,
        "tasks.max": "6", "batch.max.rows": "100", **common,
    })  # fmt: skip
    await sluice.create(sink, {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "connection.url": target_pg.jdbc_url,
        "connection.user": target_pg.user, "connection.password": target_pg.password,
        "topics.regex": f"{prefix}.*", "transforms": "route",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": f"{prefix}(.*)", "transforms.route.replacement": "$1",
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id", "auto.create": "true",
        "tasks.max": "2", "batch.max.records": "300", **common,
    })  # fmt: skip
    connectors = [source, sink]
    assert len((await sluice.wait_for(source, ConnectorState.RUNNING)).tasks) == 6
    tasks = 6 + len((await sluice.wait_for(sink, ConnectorState.RUNNING)).tasks)

    def equal() -> bool:
        return all(_rows(target_pg.url, t) == _rows(src.url, t) for t in TABLES)

    async def all_on(group: list[WorkerProcess]) -> bool:
        placed = _on(group, await _placement(sluice, connectors))
        return sum(placed.values()) == tasks and -1 not in placed

    await wait_for(equal, 300, "the six tables copied by three workers")
    await wait_for(lambda: all_on(workers), 60, "every task running")
    spread = _on(workers, await _placement(sluice, connectors))
    assert len(spread) >= 2, f"Temporal gave every task to one worker of three: {spread}"

    # SIGKILL the busiest worker mid-run, with rows arriving.
    victim = spread.most_common(1)[0][0]
    _insert(src, 1 + ROWS_PER_STEP)
    workers[victim].kill()
    killed_at = time.monotonic()
    survivors = [w for i, w in enumerate(workers) if i != victim]

    await wait_for(lambda: all_on(survivors), 120, "every task running on the two surviving workers")
    print(f"tasks resumed on the survivors {time.monotonic() - killed_at:.1f} s after the SIGKILL "
          f"(lease timeout {FAST_HEARTBEAT['task.heartbeat.timeout.s']} s)")  # fmt: skip
    # Moved by a survivor, each once: not by Temporal's heartbeat timeout (a 5-minute backstop).
    lost = [t.last_error for c in connectors for t in (await sluice.status(c)).tasks
            if "has ended (its process is gone" in t.last_error]  # fmt: skip
    assert len(lost) == spread[victim], f"{spread[victim]} tasks were on the victim; failed as ended: {lost}"
    await wait_for(equal, 300, "the tables equal after the SIGKILL")

    # A worker started later takes the tasks the others hand back as they stop gracefully.
    late = start_worker()
    for worker in survivors:
        worker.terminate()
    _insert(src, 1 + 2 * ROWS_PER_STEP)
    await wait_for(lambda: all_on([late]), 120, "every task running on the worker started later")
    await wait_for(equal, 300, "the tables equal after the handover")
    assert len(_rows(target_pg.url, "t5")) == 3 * ROWS_PER_STEP
    for connector in connectors:
        assert (await sluice.status(connector)).state == "RUNNING"
        await sluice.delete(connector)


#: The SDK's wait for running activities when a worker stops (worker.main); an idle task that
#: noticed the stop only at its heartbeat thread's backstop look (a minute) would take longer.
GRACEFUL_SHUTDOWN_S = 20


@pytest.mark.private_worker  # stops its worker
async def test_a_stopping_worker_hands_its_idle_task_over_at_once(start_worker, sluice, topic_name) -> None:
    """SIGTERM: the worker wakes its idle tasks' heartbeat threads (worker.main.shut_down), so an idle
    task ends its attempt within seconds and runs on the other worker."""
    first = start_worker()
    name = f"idle-{uuid.uuid4().hex[:8]}"
    # idle polls an hour apart (an aligned wait is at least 2 % of that, 72 s): the task thread
    # itself does not look for the stop meanwhile
    config = {"connector.class": "dummy-source", "topic": topic_name, "records.per.partition": "10",
              "poll.interval.ms": "3600000", "poll.idle.max.ms": "3600000"}  # fmt: skip
    await sluice.create(name, config)

    async def committed() -> bool:
        tasks = (await sluice.status(name)).tasks
        return bool(tasks) and tasks[0].metrics is not None and tasks[0].metrics.records == 10

    await wait_for(committed, 180, "the connector's records committed; it idles after them")
    second = start_worker()
    stopping = time.monotonic()
    await asyncio.to_thread(first.terminate)
    stopped_s = time.monotonic() - stopping
    print(f"stopped in {stopped_s:.1f} s")
    assert stopped_s < GRACEFUL_SHUTDOWN_S, f"the worker took {stopped_s:.1f} s to stop an idle task"

    async def on_second() -> bool:
        return _on([second], await _placement(sluice, [name])) == Counter({0: 1})

    await wait_for(on_second, 120, "the task running on the other worker")
    assert (await sluice.status(name)).state == ConnectorState.RUNNING
    await sluice.delete(name)
