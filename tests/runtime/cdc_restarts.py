"""Shared pieces of the CDC restart tests (``test_mysql_cdc_restarts``, ``test_postgres_cdc_restarts``).

Why two sinks on the same change topics:

- the *replica* (``ExtractNewRecordState`` tombstones, upsert + delete on the record key) must end
  equal to the source by content — a lost change leaves a row behind, missing or stale;
- the *change log* (``delete.handling.mode=rewrite``, ``add.fields=op``, keyless ``insert``) keeps
  one row per change event as it reached the sink. Every change of a row adds one to its
  ``version`` column, so each event of a row carries its own ``(id, version, __deleted)``: a doubled
  change is a repeated triple, a change lost in the middle (invisible in the replica's final state)
  is a gap in a row's versions.

The load runs in a thread through the restart (``LiveLoad``): a round that fails because its database
is restarting is skipped — its transaction either committed whole or not at all, and the comparison
is with whatever the source holds.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.stack import restart_service, services
from sluice.worker.client import SluiceClient
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase, table_rows
from tests.runtime.helpers import FAST_RETRY

TABLES = ("orders", "customers")
MOVED = 1_000_000  # a primary-key change moves an order to id + MOVED


def rows(url: str, table: str) -> list[tuple[Any, ...]]:
    try:
        return table_rows(url, table)
    except Exception:  # auto-created by the sink's first batch
        return []


def equal(src: TestDatabase, dst: TestDatabase) -> bool:
    return all(rows(dst.url, t) == rows(src.url, t) for t in TABLES)


def sinks(target: TestDatabase, topics: str) -> tuple[dict[str, str], dict[str, str]]:
    """The replica (tables ``<table>``) and the change log (tables ``log_<table>``) of the topics
    ``<topics><table>``."""
    common = {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "connection.url": target.jdbc_url,
        "connection.user": target.user,
        "connection.password": target.password,
        "topics.regex": f"{topics}.*",
        "transforms": "unwrap,route",
        "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": f"{topics}(.*)",
        "transforms.route.replacement": "$1",
        "auto.create": "true",
        "batch.max.records": "2000",
        "poll.interval.ms": "200",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        **FAST_RETRY,
    }
    replica = {
        **common,
        "transforms.unwrap.delete.handling.mode": "none",
        "insert.mode": "upsert",
        "pk.mode": "record_key",
        "pk.fields": "id",
        "delete.enabled": "true",
    }
    log = {
        **common,
        "transforms.unwrap.delete.handling.mode": "rewrite",
        "transforms.unwrap.add.fields": "op",
        "table.name.format": "log_${topic}",
        "insert.mode": "insert",
        "pk.mode": "none",
    }
    return replica, log


def schema(src: Db) -> None:
    """Two tables, each with a ``version`` every change increments (the same DDL on both dialects)."""
    src.run(
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer_id INT NOT NULL, amount DECIMAL(12,2), "
        "note VARCHAR(40), version INT NOT NULL DEFAULT 1)",
        "CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, orders INT NOT NULL "
        "DEFAULT 0, version INT NOT NULL DEFAULT 1)",
    )


def insert_orders(src: Db, ids: range) -> None:
    values = ", ".join(f"({i}, {i % 13}, {i * 7 % 1000}.{i % 100:02d}, 'n{i}')" for i in ids)
    src.run(f"INSERT INTO orders (id, customer_id, amount, note) VALUES {values}")


def load_round(src: Db, k: int) -> None:
    """Round ``k`` (1, 2, ...) of the live load: its own fresh ids, so a failed round is skipped, not
    retried. Inserts, updates of earlier rounds' rows, a primary-key change, deletes, and one
    transaction over both tables."""
    base = 10_000 + 100 * k
    insert_orders(src, range(base, base + 30))
    older = ", ".join(str(base - 100 * r + 3) for r in (1, 2, 3))
    src.run(
        "INSERT INTO customers (id, name) VALUES "
        + ", ".join(f"({4 * k + j}, 'c{4 * k + j}')" for j in range(4)),
        "UPDATE orders SET amount = amount + 1, note = 'updated', version = version + 1 "
        f"WHERE id IN ({older})",
        f"UPDATE orders SET id = id + {MOVED}, version = version + 1 WHERE id = {base + 7}",
        f"DELETE FROM orders WHERE id IN ({base + 14}, {base + 21}, {base - 100 + 28})",
        "BEGIN",
        "UPDATE customers SET orders = orders + 1, name = CONCAT(name, '+'), version = version + 1 "
        f"WHERE id BETWEEN {4 * k - 8} AND {4 * k + 3}",
        f"UPDATE orders SET note = 'both', version = version + 1 WHERE id BETWEEN {base} AND {base + 9}",
        "COMMIT",
    )


class LiveLoad:
    """``load_round`` over and over in a thread, until the ``with`` block ends; rounds that fail (the
    database is restarting) are counted and skipped."""

    def __init__(self, src: Db, first_round: int = 1, pause_s: float = 0.3) -> None:
        self.src, self.next_round, self.pause_s = src, first_round, pause_s
        self.done = self.failed = 0
        self.last_error = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cdc-live-load", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            k, self.next_round = self.next_round, self.next_round + 1
            try:
                load_round(self.src, k)
                self.done += 1
            except Exception as exc:  # the database restarting: the round is skipped
                self.failed += 1
                self.last_error = str(exc)[:200]
                time.sleep(0.5)
            time.sleep(self.pause_s)

    def __enter__(self) -> LiveLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


def log_problems(url: str) -> list[str]:
    """Doubled changes and gaps in the change log's versions (empty when every change arrived once).

    An order moved by a primary-key change continues its versions under ``id + MOVED``; a
    rewritten delete carries the row's last version (``__deleted='true'``). Snapshot reads
    (``op='r'``) may repeat a state the log also carries, as Debezium's may, and are not counted as
    doubles (the load never touches the rows present before capture started).
    """
    from sqlalchemy import create_engine, inspect

    engine = create_engine(url)
    try:
        tables = set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    problems: list[str] = [f"log_{t} not written yet" for t in TABLES if f"log_{t}" not in tables]
    for table in TABLES:
        if f"log_{table}" not in tables:
            continue
        events: dict[tuple[int, int, str], int] = defaultdict(int)
        versions: dict[int, set[tuple[int, str]]] = defaultdict(set)
        quote = "`" if url.startswith("mysql") else '"'
        select = (
            f"SELECT id, version, {quote}__deleted{quote}, {quote}__op{quote} FROM {quote}log_{table}{quote}"
        )
        for ident, version, deleted, op in _fetch(url, select):
            if op != "r":
                events[(ident, version, str(deleted))] += 1
            if str(deleted) != "true":
                versions[ident % MOVED if table == "orders" else ident].add((version, op))
        problems += [f"{table} change {e} arrived {n} times" for e, n in sorted(events.items()) if n > 1]
        problems += [
            f"{table} row {ident} has versions (with ops) {sorted(vs)}: a change is missing"
            for ident, vs in sorted(versions.items())
            if {v for v, _ in vs} != set(range(1, max(v for v, _ in vs) + 1))
        ]
    return problems


async def settle_log(url: str, timeout_s: float, what: str) -> None:
    """Wait until the change log holds every change once (its sink is a connector of its own, which
    may still be catching up after a restart when the replica is equal); fail with what is wrong.
    A doubled change never heals, so it fails once the time is up."""
    import asyncio

    deadline = time.monotonic() + timeout_s
    while problems := log_problems(url):
        assert time.monotonic() < deadline, f"{what}: the change log after {timeout_s:.0f} s: {problems}"
        await asyncio.sleep(1)


def _fetch(url: str, select: str) -> list[tuple[Any, ...]]:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(select)).all()]
    finally:
        engine.dispose()


async def failed_tasks(sluice: SluiceClient, connectors: list[str]) -> list[str]:
    """``connector/task: error`` of every FAILED task (a restart must be retried, never fail a task)."""
    out = []
    for name in connectors:
        status = await sluice.status(name)
        out += [f"{name}/{t.task_id}: {t.error}" for t in status.tasks if t.state == "FAILED"]
        if status.state == "FAILED":
            out.append(f"{name}: {status.error}")
    return out


async def settle(
    sluice: SluiceClient,
    connectors: list[str],
    src: TestDatabase,
    dst: TestDatabase,
    timeout_s: float,
    what: str,
) -> float:
    """Wait until the replica equals the source; fail at once when a task FAILED. Seconds taken."""
    import asyncio

    t0 = time.monotonic()
    while not equal(src, dst):
        failed = await failed_tasks(sluice, connectors)
        assert not failed, f"{what}: tasks FAILED instead of retrying: {failed}"
        if time.monotonic() - t0 > timeout_s:
            counts = {t: (len(rows(src.url, t)), len(rows(dst.url, t))) for t in TABLES}
            raise AssertionError(f"{what}: replica not equal to the source after {timeout_s:.0f} s {counts}")
        await asyncio.sleep(1)
    return time.monotonic() - t0


async def through_restarts(
    sluice: SluiceClient,
    name: str,
    capture: tuple[dict[str, str], str],
    source: TestDatabase,
    target: TestDatabase,
    stack: StackConfig,
    service: str,
    after_restart: Callable[[], None] = lambda: None,
) -> None:
    """The scenario both CDC restart tests share, with a worker started: ``capture`` (the source's
    config and its topics' prefix) and the two ``sinks`` are created; the snapshot's 100 rows
    arrive; a live load runs through a restart of ``service`` (then ``after_restart`` checks what
    must have survived it), and another through a restart of the broker. After each, the replica
    equals the source with no task FAILED and the change log shows no doubled or lost change; at
    the end the load's key change, delete and two-table transaction are in the replica."""
    import asyncio

    from tests.runtime.helpers import wait_for

    source_config, topics = capture
    replica, log = sinks(target, topics)
    connectors = [f"src-{name}", f"dst-{name}", f"log-{name}"]
    for connector, config in zip(connectors, (source_config, replica, log), strict=True):
        await sluice.create(connector, config)
    src = Db.of(source)
    await wait_for(lambda: len(rows(target.url, "orders")) >= 100, 300, "the snapshot replicated")
    with LiveLoad(src) as load:
        await wait_for(lambda: len(rows(target.url, "orders")) > 150, 300, "the live load replicated")
        # Mid-run, and down until the load has seen it: a restart quicker than a load round could
        # otherwise pass unseen (it did once on a quiet machine), and the fault would not be real.
        down = services(stack)[service]
        down.stop()
        try:
            await wait_for(lambda: load.failed >= 1, 60, f"the load to see {service} down")
        finally:
            down.start()
        await asyncio.sleep(2)
    assert load.failed >= 1, f"the load did not see {service} restart"
    after_restart()
    took = await settle(sluice, connectors, source, target, 300, f"after the {service} restart")
    print(f"{service} restart: {load.done} load rounds ({load.failed} failed), equal {took:.0f} s after")
    await settle_log(target.url, 120, f"after the {service} restart")

    with LiveLoad(src, first_round=load.next_round) as load2:
        await asyncio.sleep(2)
        restart_service(stack, "broker")  # mid-run: sends and pulls fail until it is back
        await asyncio.sleep(2)
    assert load2.done >= 5
    took = await settle(sluice, connectors, source, target, 300, "after the broker restart")
    print(f"broker restart: {load2.done} load rounds, equal {took:.0f} s after")
    await settle_log(target.url, 120, "after the broker restart")

    orders = rows(target.url, "orders")
    ids = {row[0] for row in orders}
    assert set(range(1, 101)) <= ids and 10_107 not in ids and 1_010_107 in ids  # snapshot, key change
    assert 10_114 not in ids and any(row[3] == "both" for row in orders)  # delete, the two-table transaction
    assert any(row[-1] > 2 for row in rows(target.url, "customers"))
    for connector in connectors:
        assert (await sluice.status(connector)).state == "RUNNING"
        await sluice.delete(connector)
