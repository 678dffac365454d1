"""Smoke tests of `make demo`'s pieces on the real MariaDB and PostgreSQL (no Spark, < 60 s).

The shop generator loads what it says; the load generator inserts and updates; and the equality
proof says EQUAL for a faithful copy whose types differ (NUMERIC without scale, timestamptz,
boolean) and names exactly what differs when one decimal cent, one microsecond, one row is off.
"""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
from sqlalchemy import text

from sluice.deploy.local.config import StackConfig
from sluice.worker.demo.shop import TABLES, LoadGenerator, ShopSize, connect_url, create_shop
from sluice.worker.demo.table_equality import Kind, canonical, compare_table, compare_tables
from tests.databases import TestDatabase

SMALL = ShopSize(customers=300, products=40, orders=3_000)

# The target as a migration tool might create it: other types, same content.
PG_DDL = {
    "customers": "CREATE TABLE customers (id bigint PRIMARY KEY, name text NOT NULL, email text, "
    "country text, vip boolean NOT NULL, created_at timestamp NOT NULL, updated_at timestamptz NOT NULL)",
    "products": "CREATE TABLE products (id integer PRIMARY KEY, sku text, title text, price numeric, "
    "weight_kg numeric(12,5), stock integer, updated_at timestamptz)",
    "orders": "CREATE TABLE orders (id bigint PRIMARY KEY, customer_id bigint, product_id integer, "
    "quantity integer, unit_price numeric, total numeric(14,4), status text, note text, "
    "ordered_at timestamp, shipped_at timestamp, updated_at timestamptz)",
}


def _copy(source_url: str, target_url: str) -> None:
    source, target = connect_url(source_url), connect_url(target_url)
    try:
        with source.connect() as src, target.begin() as dst:
            for table in TABLES:
                dst.execute(text(PG_DDL[table]))
                result = src.execute(text(f"SELECT * FROM {table}"))
                columns = list(result.keys())
                rows = [dict(zip(columns, r, strict=True)) for r in result]
                if table == "customers":
                    for r in rows:
                        r["vip"] = bool(r["vip"])
                placeholders = ", ".join(f":{c}" for c in columns)
                dst.execute(text(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders})"), rows)
    finally:
        source.dispose()
        target.dispose()


def test_canonical_text_per_kind() -> None:
    assert canonical("10.50", Kind.DECIMAL) == canonical("10.5", Kind.DECIMAL) == "10.5"
    assert canonical("100.000", Kind.DECIMAL) == "100" and canonical("-0.00", Kind.DECIMAL) == "0"
    assert canonical("100", Kind.DECIMAL) == "100"
    assert canonical("2024-01-02 03:04:05+00", Kind.INSTANT) == "2024-01-02 03:04:05.000000"
    assert canonical("2024-01-02 03:04:05.12+00", Kind.INSTANT) == "2024-01-02 03:04:05.120000"
    assert canonical("2024-01-02 03:04:05.000001", Kind.INSTANT) != canonical(
        "2024-01-02 03:04:05", Kind.INSTANT
    )
    assert canonical("t", Kind.INTEGER) == canonical("1", Kind.INTEGER) == "1"
    assert canonical("\\xDEAD", Kind.BINARY) == canonical("dead", Kind.BINARY)
    assert canonical(None, Kind.TEXT) is None and canonical("NULL", Kind.TEXT) == "NULL"


def test_shop_load_and_generator(mariadb_db: TestDatabase) -> None:
    engine = connect_url(mariadb_db.url)
    try:
        assert create_shop(engine, SMALL) == {"customers": 300, "products": 40, "orders": 3_000}
        with engine.connect() as conn:
            nulls = conn.execute(text("SELECT COUNT(*) FROM orders WHERE note IS NULL")).scalar_one()
            beyond_bmp = conn.execute(text("SELECT COUNT(*) FROM orders WHERE note LIKE '%🎁%'")).scalar_one()
            price = conn.execute(text("SELECT price FROM products WHERE id = 1")).scalar_one()
            before = conn.execute(text("SELECT MAX(updated_at) FROM orders")).scalar_one()
        assert 0 < nulls < 3_000 and beyond_bmp > 0
        assert isinstance(price, Decimal) and price.as_tuple().exponent == -2
        load = LoadGenerator(engine, SMALL, orders_per_s=200, updates_per_s=200).start()
        time.sleep(1.5)
        stats = load.stop()
        assert not stats.errors, stats.errors
        assert stats.inserts > 0 and stats.updates > 0
        with engine.connect() as conn:
            orders, after = conn.execute(text("SELECT COUNT(*), MAX(updated_at) FROM orders")).one()
        assert orders > 3_000 and after > before  # updated_at is maintained by MariaDB itself
    finally:
        engine.dispose()


def test_equality_proof_across_databases(mariadb_db: TestDatabase, postgres_db: TestDatabase) -> None:
    source = connect_url(mariadb_db.url)
    try:
        create_shop(source, SMALL)
    finally:
        source.dispose()
    _copy(mariadb_db.url, postgres_db.url)
    source, target = connect_url(mariadb_db.url), connect_url(postgres_db.url)
    try:
        results = compare_tables(source, target, TABLES)
        assert all(r.equal for r in results), [(r.summary(), r.examples) for r in results]
        assert [r.source_rows for r in results] == [300, 40, 3_000]
        assert all(r.source_digest == r.target_digest for r in results)
        # Without MariaDB's client on PATH the rows come through PyMySQL: the same canonical rows.
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("sluice.worker.demo.table_equality.shutil.which", lambda _name: None)
            again = compare_tables(source, target, TABLES)
        assert [r.source_digest for r in again] == [r.source_digest for r in results]

        with target.begin() as conn:
            conn.execute(text("UPDATE orders SET total = total + 0.01 WHERE id = 5"))
            conn.execute(
                text("UPDATE orders SET updated_at = updated_at + interval '1 microsecond' WHERE id = 6")
            )
            conn.execute(text("DELETE FROM orders WHERE id = 7"))
            conn.execute(text("INSERT INTO orders (id, customer_id) VALUES (999999, 1)"))
            conn.execute(text("UPDATE customers SET email = NULL WHERE email IS NOT NULL AND id = "
                              "(SELECT MIN(id) FROM customers WHERE email IS NOT NULL)"))  # fmt: skip
        orders = compare_table(source, target, "orders")
        assert not orders.equal
        assert (orders.missing, orders.extra, orders.differing) == (1, 1, 2)
        assert any("id=5: total:" in e for e in orders.examples), orders.examples
        assert any("id=6: updated_at:" in e for e in orders.examples), orders.examples
        assert "1 missing, 1 extra, 2 differing" in orders.summary()
        customers = compare_table(source, target, "customers")
        assert customers.differing == 1 and "email" in customers.examples[0]

        with target.begin() as conn:
            conn.execute(text("DROP TABLE products"))
        assert compare_table(source, target, "products").problem == "the table does not exist in the target"
    finally:
        source.dispose()
        target.dispose()


def test_unknown_source_table_is_named(mariadb_db: TestDatabase, postgres_db: TestDatabase) -> None:
    source, target = connect_url(mariadb_db.url), connect_url(postgres_db.url)
    try:
        with pytest.raises(ValueError, match="table nope does not exist in the source"):
            compare_table(source, target, "nope")
    finally:
        source.dispose()
        target.dispose()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_demo_db_ends_equal_with_its_proof_by_sluice_verify(
    stack_config: StackConfig, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make demo` at a small size, under a database name of its own: the proof is `sluice verify`
    of its own connectors, which resolves the source's ${env:...} password in the demo's process
    (unset here beforehand: only the demo may set it)."""
    import signal
    import uuid

    from sluice.worker.demo.db import PASSWORD_ENV, demo_databases, drop_databases, main

    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    name = f"demo_db_{uuid.uuid4().hex[:8]}"
    handler = signal.getsignal(signal.SIGTERM)
    try:
        code = main(
            ["--orders", "2000", "--load-seconds", "3", "--catch-up-seconds", "300", "--database", name]
        )
        out = capsys.readouterr().out
    finally:
        signal.signal(signal.SIGTERM, handler)
        drop_databases(demo_databases(stack_config, name))
    assert "proof: sluice verify SOURCE SINK" in out, out[-3000:]
    assert "VERDICT: MariaDB shop and PostgreSQL shop are EQUAL (3 tables" in out, out[-3000:]
    assert code == 0
