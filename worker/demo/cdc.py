"""`make demo-cdc`: replicate a live MariaDB shop into PostgreSQL by change data capture, and prove it.

1. creates the MariaDB database ``shop`` with its three tables *empty* (``sluice.worker.demo.shop``)
   and an empty PostgreSQL database ``shop``;
2. starts a `sluice worker` process and creates two connectors through the Python client:
   ``mysql-cdc`` (a Debezium MySQL config, ``snapshot.mode=never``) reading the binary log into one
   RocketMQ topic per table, and ``jdbc-sink`` with Debezium's ``ExtractNewRecordState`` (upsert on
   the record key ``id``, deletes by tombstone, tables created from the records' schemas);
3. waits until capture is live (a probe customer, inserted until it shows in the target, then
   deleted), and only then loads the shop's rows: with ``snapshot.mode=never`` every row reaches
   the replica through the binlog — ``LOAD DATA`` is row events like any INSERT;
4. runs the load generator with inserts, updates *and deletes* (which only a log-based capture
   sees), with the live view of changes/s and lag per table (``sluice.worker.demo.live_view``);
5. stops the load, waits for catch-up and compares every table by content with `sluice verify`
   (following the CDC source and sink's configs): prints the verdict and exits 1 unless all tables
   are equal.

The second half (live view, catch-up, proof) is `make demo`'s (``sluice.worker.demo.db.watch_and_prove``).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial

from sqlalchemy import inspect, text
from sqlalchemy.engine import URL, Engine

from sluice.deploy.local.config import StackConfig
from sluice.worker.client import SluiceClient
from sluice.worker.demo.db import (
    PASSWORD_ENV,
    SHOP,
    DemoDatabases,
    create_connectors,
    demo_databases,
    demo_parser,
    failed_tasks,
    recreate_databases,
    run_on_stack,
    watch_and_prove,
)
from sluice.worker.demo.file import started_worker
from sluice.worker.demo.shop import TABLES, LoadGenerator, ShopSize, connect_url, create_tables, load_shop

JSON_WITH_SCHEMAS = {
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "true",
}
PROBE_ID = -1  # outside AUTO_INCREMENT's range: never one of the shop's own customers


def shop_size(orders: int) -> ShopSize:
    """A shop of ``orders`` orders with customers and products in `make demo`'s proportions."""
    return ShopSize(customers=max(100, orders // 10), products=max(20, orders // 100), orders=orders)


def topic_prefix(run_id: str) -> str:
    return f"cdc{run_id}"


def debezium_mysql_source(
    url: URL, password: str, prefix: str, tables: Sequence[str], **extra: str
) -> dict[str, str]:
    """A Debezium MySQL connector config capturing ``tables`` of ``url``'s database from now on."""
    db = str(url.database)
    return {
        "connector.class": "io.debezium.connector.mysql.MySqlConnector",
        "database.hostname": str(url.host),
        "database.port": str(url.port),
        "database.user": url.username or "",
        "database.password": password,
        "topic.prefix": prefix,
        "database.include.list": db,
        "table.include.list": ",".join(f"{db}.{t}" for t in tables),
        "snapshot.mode": "never",
        **JSON_WITH_SCHEMAS,
        **extra,
    }


def cdc_replica_sink(topics: str, connection: Mapping[str, str], **extra: str) -> dict[str, str]:
    """The CDC replica of docs/connectors.md: topics ``<topics><table>`` into tables ``<table>``, new
    row state upserted by the record key ``id``, deletes by tombstone, tables created from the records."""
    return {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        **connection,
        "topics.regex": f"{topics}.*",
        "transforms": "unwrap,route",
        "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
        "transforms.unwrap.delete.handling.mode": "none",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": f"{topics}(.*)",
        "transforms.route.replacement": "$1",
        "insert.mode": "upsert",
        "pk.mode": "record_key",
        "pk.fields": "id",
        "delete.enabled": "true",
        "auto.create": "true",
        **JSON_WITH_SCHEMAS,
        **extra,
    }


def connector_configs(run_id: str, dbs: DemoDatabases) -> tuple[dict[str, str], dict[str, str]]:
    """The source and sink configs: Debezium's MySQL connector config and docs/connectors.md's CDC replica.

    Topics are ``<prefix>_<db>_<table>`` (Debezium's ``<prefix>.<db>.<table>``, dots as ``_``),
    the prefix named after the run: a fresh sink on fresh topics.
    """
    dst, prefix = dbs.target, topic_prefix(run_id)
    source = debezium_mysql_source(
        dbs.source, f"${{env:{PASSWORD_ENV}}}", prefix, TABLES,
        **{"batch.max.records": "20000", "poll.interval.ms": "500"},
    )  # fmt: skip
    url = f"jdbc:postgresql://{dst.host}:{dst.port}/{dst.database}?user={dst.username}"
    sink = cdc_replica_sink(
        f"{prefix}_{dbs.name}_", {"connection.url": url},
        **{"auto.evolve": "true", "batch.max.records": "50000", "poll.interval.ms": "500"},
    )  # fmt: skip
    return source, sink


def write_probe(source_db: Engine) -> None:
    """Write the probe customer (again: each call is a new change to capture)."""
    with source_db.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO customers (id, name, created_at) VALUES (:id, 'capture probe', :now) "
                "ON DUPLICATE KEY UPDATE vip = NOT vip"
            ),
            {"id": PROBE_ID, "now": datetime.now(UTC).replace(tzinfo=None)},
        )


def probe_in_postgres(target_db: Engine) -> bool:
    """True once the PostgreSQL replica holds the probe customer."""
    if not inspect(target_db).has_table("customers"):
        return False  # auto-created by the sink's first batch
    with target_db.connect() as conn:
        found = conn.execute(text("SELECT 1 FROM customers WHERE id = :id"), {"id": PROBE_ID}).first()
    return found is not None


async def await_capture(
    client: SluiceClient,
    names: Sequence[str],
    source_db: Engine,
    probe_landed: Callable[[], bool],
    timeout_s: float,
) -> float:
    """Seconds until a change made now reaches the target (``probe_landed``: the target holds the
    probe customer); then the probe row is deleted (a delete that flows like the others). With
    ``snapshot.mode=never`` capture starts at the binlog end of the source task's first planning,
    which comes after the worker's Spark session is up: rows loaded before that would never be seen."""
    t0 = time.monotonic()
    print("waiting until capture is live (a probe row inserted until it reaches the target)", flush=True)
    while True:
        await asyncio.to_thread(write_probe, source_db)
        if await asyncio.to_thread(probe_landed):
            break
        if time.monotonic() - t0 > timeout_s:
            raise SystemExit(f"demo: no change reached the target within {timeout_s:.0f} s")
        failed = await failed_tasks(client, names)
        if failed:
            raise SystemExit("demo: a connector failed:\n  " + "\n  ".join(failed))
        await asyncio.sleep(2)
    with source_db.begin() as conn:
        conn.execute(text("DELETE FROM customers WHERE id = :id"), {"id": PROBE_ID})
    return time.monotonic() - t0


async def run_demo(
    cfg: StackConfig, size: ShopSize, load_seconds: float, catch_up_s: float, database: str = SHOP
) -> bool:
    run_id = time.strftime("%Y%m%d%H%M%S")
    dbs = demo_databases(cfg, database)
    print(f"creating MariaDB {dbs.source.render_as_string()} and PostgreSQL {dbs.target.render_as_string()}")
    recreate_databases(dbs)
    source_db, target_db = connect_url(dbs.source), connect_url(dbs.target)
    create_tables(source_db)
    queue = f"sluice-demo-cdc-{run_id}"
    env = {"SLUICE_TASK_QUEUE": queue, PASSWORD_ENV: dbs.mariadb_password}
    # The client checks the source config (it connects to MariaDB) before the worker runs it.
    os.environ.setdefault(PASSWORD_ENV, dbs.mariadb_password)
    try:
        async with started_worker(cfg, f"demo-cdc-worker-{run_id}", env):
            client = await SluiceClient.connect(cfg.temporal_address, cfg.temporal_namespace, queue)
            source_config, sink_config = connector_configs(run_id, dbs)
            names = (f"shop-cdc-sink-{run_id}", f"shop-cdc-source-{run_id}")
            await create_connectors(client, cfg, ((names[0], sink_config), (names[1], source_config)))
            landed = partial(probe_in_postgres, target_db)
            live = await await_capture(client, names, source_db, landed, catch_up_s)
            print(f"capture is live after {live:.1f} s; loading the shop (through the binlog)", flush=True)
            t0 = time.monotonic()
            counts = await asyncio.to_thread(load_shop, source_db, size)
            loaded = ", ".join(f"{n:,} {t}" for t, n in counts.items())
            print(f"loaded {loaded} in {time.monotonic() - t0:.1f} s", flush=True)
            load = LoadGenerator(
                source_db, size, orders_per_s=100, updates_per_s=200, deletes_per_s=30
            ).start()
            equal = await watch_and_prove(
                client, names, (source_db, target_db), load, load_seconds, catch_up_s
            )
            for name in names:
                await client.delete(name)
            print(f"connectors deleted; both databases are kept: {dbs.source.render_as_string()}, "
                  f"{dbs.target.render_as_string()}")  # fmt: skip
    finally:
        source_db.dispose()
        target_db.dispose()
    return equal


def main(argv: Sequence[str] | None = None) -> int:
    args = demo_parser("python -m worker.demo.cdc", __doc__, 20_000, 30, 900).parse_args(argv)
    size = shop_size(args.orders)
    return run_on_stack(
        lambda cfg: run_demo(cfg, size, args.load_seconds, args.catch_up_seconds, args.database)
    )


if __name__ == "__main__":
    sys.exit(main())
