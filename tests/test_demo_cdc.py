"""`make demo-cdc` end to end on the real stack, at a small size (a real `sluice worker`, MariaDB's
binlog, RocketMQ, PostgreSQL): the replica ends EQUAL after a load with inserts, updates and
deletes, under a database name of its own (the user's ``shop`` is left alone). About 3 minutes,
most of it the worker's Spark start before the first change arrives.
"""

from __future__ import annotations

import contextlib
import re
import signal
import socket
import time
import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from bench import db_latency
from bench.bench_databases import Databases
from bench.cdc_bench import configs
from bench.db_baselines import MARIADB_DDL
from sluice.deploy.local.config import StackConfig
from sluice.worker.demo.cdc import connector_configs, main, shop_size
from sluice.worker.demo.db import demo_databases, drop_databases
from sluice.worker.demo.shop import LoadGenerator, ShopSize, connect_url, create_shop, create_tables
from tests.databases import TestDatabase

DEFAULT_METRICS_PORT = 9464


def test_load_generator_deletes_only_when_asked(mariadb_db: TestDatabase) -> None:
    engine = connect_url(mariadb_db.url)
    try:
        create_shop(engine, ShopSize(customers=100, products=20, orders=1_000))
        plain = LoadGenerator(engine, ShopSize(100, 20, 1_000), orders_per_s=0, updates_per_s=50).start()
        time.sleep(1)
        assert plain.stop().deletes == 0
        with engine.connect() as conn:
            assert conn.execute(text("SELECT COUNT(*) FROM orders")).scalar_one() == 1_000
        load = LoadGenerator(engine, ShopSize(100, 20, 1_000), orders_per_s=0, deletes_per_s=100).start()
        time.sleep(1.5)
        stats = load.stop()
        assert not stats.errors, stats.errors
        with engine.connect() as conn:
            left = conn.execute(text("SELECT COUNT(*) FROM orders")).scalar_one()
        assert stats.deletes > 0 and left == 1_000 - stats.deletes
    finally:
        engine.dispose()


def test_demo_and_bench_configs_validate(mariadb_db: TestDatabase, stack_config: StackConfig) -> None:
    """The configs `make demo-cdc` and `make bench-cdc` create pass the real connectors' checks
    (mysql-cdc connects to MariaDB and checks binlog settings, privileges and include lists)."""
    from sluice.activities.connector_activities import validate_config

    engine = connect_url(mariadb_db.url)
    try:
        create_tables(engine)
        with engine.begin() as conn:
            conn.execute(text(db_latency.MARIADB_DDL))
            conn.execute(text(MARIADB_DDL))
    finally:
        engine.dispose()
    dbs = demo_databases(stack_config, mariadb_db.name)
    source, sink = connector_configs("20260101000000", dbs)
    source["database.password"] = dbs.mariadb_password  # the worker resolves ${env:...}; this test does not
    pg = make_url(stack_config.database_url)
    bench_source, bench_sink = configs(
        Databases(make_url(mariadb_db.url), pg.set(database="s"), pg.set(database="d")), "Bx"
    )
    for name, config in {"demo-source": source, "demo-sink": sink, "bench-source": bench_source,
                         "bench-sink": bench_sink}.items():  # fmt: skip
        result = validate_config(name, config)
        assert not result.errors, (name, result.errors)
    assert source["snapshot.mode"] == "never" and sink["delete.enabled"] == "true"
    assert sink["topics.regex"] == f"cdc20260101000000_{mariadb_db.name}_.*"


def test_shop_size_keeps_proportions() -> None:
    assert shop_size(20_000) == ShopSize(customers=2_000, products=200, orders=20_000)
    assert shop_size(500) == ShopSize(customers=100, products=20, orders=500)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_demo_cdc_ends_equal(stack_config: StackConfig, capsys: pytest.CaptureFixture[str]) -> None:
    name = f"demo_cdc_{uuid.uuid4().hex[:8]}"
    handler = signal.getsignal(signal.SIGTERM)
    try:
        # Another worker (or demo) serves metrics on the default port: the demo's worker starts anyway.
        with contextlib.closing(socket.socket()) as taken:
            with contextlib.suppress(OSError):
                taken.bind(("127.0.0.1", DEFAULT_METRICS_PORT))
                taken.listen()
            code = main(
                ["--orders", "500", "--load-seconds", "5", "--catch-up-seconds", "300", "--database", name]
            )
        out = capsys.readouterr().out
    finally:
        signal.signal(signal.SIGTERM, handler)
        drop_databases(demo_databases(stack_config, name))
    assert re.search(
        r"sluice worker ready on task queue \S+, metrics on http://127\.0\.0\.1:\d+/metrics", out
    )
    assert f":{DEFAULT_METRICS_PORT}/metrics" not in out
    assert "capture is live after" in out and "loaded 100 customers, 20 products, 500 orders" in out
    load = re.search(r"load generator: ([\d,]+) inserts, ([\d,]+) updates, ([\d,]+) deletes", out)
    assert load, out[-3000:]
    assert all(int(n.replace(",", "")) > 0 for n in load.groups())  # deletes flowed, not only upserts
    assert "VERDICT: MariaDB shop and PostgreSQL shop are EQUAL (3 tables" in out, out[-3000:]
    assert code == 0
