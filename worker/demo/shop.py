"""The demo's ``shop`` database on MariaDB: schema, a realistic initial load, and a load generator.

Why these tables: they carry what a real migration trips over — DECIMAL money (exact, scale 2
and 3), DATETIME(6) and TIMESTAMP(6) columns, nullable columns that are really NULL in some rows,
text beyond ASCII (including characters outside the Basic Multilingual Plane), a BOOLEAN, and an
``updated_at`` column the database itself maintains (``ON UPDATE CURRENT_TIMESTAMP(6)``) with an
index on ``(updated_at, id)``, which is what ``jdbc-source``'s ``timestamp+incrementing`` mode
reads by.

The data is generated from a seed, so two runs load the same rows. Times are written and read
with the session time zone at UTC (``SET time_zone = '+00:00'``): a TIMESTAMP is an instant, and
the equality proof compares instants in UTC.

The load generator deletes only when asked (``deletes_per_s``, used by `make demo-cdc`): timestamp
and incrementing modes cannot see deletes (docs/connectors.md, "Database pipelines"), so `make demo`'s
generator must not delete, or its proof would fail by design; change data capture sees every delete.
"""

from __future__ import annotations

import random
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url

#: Table name -> MariaDB DDL. Every table has ``id`` as its primary key and ``updated_at``.
SHOP_DDL: Final = {
    "customers": """
        CREATE TABLE customers (
            id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
            name VARCHAR(100) NOT NULL,
            email VARCHAR(200) NULL,
            country CHAR(2) NULL,
            vip BOOLEAN NOT NULL DEFAULT 0,
            created_at DATETIME(6) NOT NULL,
            updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
                ON UPDATE CURRENT_TIMESTAMP(6),
            KEY customers_updated (updated_at, id)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin""",
    "products": """
        CREATE TABLE products (
            id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
            sku VARCHAR(32) NOT NULL UNIQUE,
            title VARCHAR(200) NOT NULL,
            price DECIMAL(10,2) NOT NULL,
            weight_kg DECIMAL(8,3) NULL,
            stock INT NOT NULL,
            updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
                ON UPDATE CURRENT_TIMESTAMP(6),
            KEY products_updated (updated_at, id)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin""",
    "orders": """
        CREATE TABLE orders (
            id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
            customer_id BIGINT NOT NULL,
            product_id INT NOT NULL,
            quantity INT NOT NULL,
            unit_price DECIMAL(10,2) NOT NULL,
            total DECIMAL(12,2) NOT NULL,
            status VARCHAR(16) NOT NULL,
            note VARCHAR(255) NULL,
            ordered_at DATETIME(6) NOT NULL,
            shipped_at DATETIME(6) NULL,
            updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
                ON UPDATE CURRENT_TIMESTAMP(6),
            KEY orders_updated (updated_at, id)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin""",
}
TABLES: Final = tuple(SHOP_DDL)

_FIRST = ("Ada", "Grace", "Linus", "Zoë", "José", "Søren", "Aiko", "李", "Олег", "Fatima", "Émile", "Nnamdi")
_LAST = ("Lovelace", "Hopper", "Müller", "García", "O'Brien", "Nguyễn", "王", "Иванова", "Okafor", "Dubois")
_COUNTRIES = ("DE", "FR", "US", "CN", "JP", "BR", "NG", "SE", "ES", None)
_WORDS = ("kettle", "lamp", "chair", "bike", "tent", "mug", "desk", "pen", "scarf", "drone", "piano")
_NOTES = (None, None, None, "gift wrap 🎁", "leave at the door", "call before delivery ☎", "fragile — 易碎")
_STATUSES = ("new", "paid", "shipped", "delivered", "cancelled")
_NEXT_STATUS: Final = {"new": "paid", "paid": "shipped", "shipped": "delivered"}
_EPOCH: Final = datetime(2023, 1, 1)
# MariaDB evaluates SET assignments left to right, later ones seeing the new ``status``.
_ADVANCE_ORDER: Final = (
    "UPDATE orders SET status = CASE status WHEN 'new' THEN 'paid' WHEN 'paid' THEN 'shipped' "
    "WHEN 'shipped' THEN 'delivered' ELSE status END, "
    "shipped_at = IF(status = 'shipped' AND shipped_at IS NULL, UTC_TIMESTAMP(6), shipped_at), "
    "note = IF(status = 'delivered', CONCAT('delivered at ', UTC_TIMESTAMP(6)), note) WHERE id = %s"
)


def connect_url(url: URL | str) -> Engine:
    """An engine whose connections read and write times in UTC (MariaDB or PostgreSQL)."""
    backend = (url if isinstance(url, URL) else make_url(url)).get_backend_name()
    # LOAD DATA LOCAL INFILE (create_shop) must be allowed by the client as well as the server.
    connect_args = {"local_infile": True} if backend in ("mysql", "mariadb") else {}
    engine = create_engine(url, pool_pre_ping=True, connect_args=connect_args)

    @event.listens_for(engine, "connect")
    def _utc(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("SET time_zone = '+00:00'" if backend in ("mysql", "mariadb") else "SET TIME ZONE 'UTC'")
        cur.close()
        if backend not in ("mysql", "mariadb"):
            dbapi_conn.commit()

    return engine


def _chunks(rows: Iterator[tuple[Any, ...]], size: int) -> Iterator[list[tuple[Any, ...]]]:
    chunk: list[tuple[Any, ...]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _customer(rng: random.Random, i: int) -> tuple[Any, ...]:
    name = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
    email = None if rng.random() < 0.1 else f"user{i}@example.{rng.choice(('com', 'de', 'cn'))}"
    created = _EPOCH + timedelta(seconds=rng.randrange(0, 700 * 86400), microseconds=rng.randrange(10**6))
    updated = created + timedelta(days=rng.randrange(0, 30))
    return (i, name, email, rng.choice(_COUNTRIES), rng.random() < 0.05, created, updated)


def _product(rng: random.Random, i: int) -> tuple[Any, ...]:
    title = f"{rng.choice(_WORDS).title()} {rng.choice(_WORDS)} #{i}"
    price = Decimal(rng.randrange(99, 250_000)) / 100
    weight = None if rng.random() < 0.2 else Decimal(rng.randrange(1, 40_000)) / 1000
    updated = _EPOCH + timedelta(seconds=rng.randrange(0, 700 * 86400), microseconds=rng.randrange(10**6))
    return (i, f"SKU-{i:06d}", title, price, weight, rng.randrange(0, 500), updated)


def _order(
    rng: random.Random, i: int, customers: int, products: int, prices: Sequence[Decimal]
) -> tuple[Any, ...]:
    product = rng.randrange(1, products + 1)
    quantity = rng.choice((1, 1, 1, 2, 2, 3, 5, 10))
    unit = prices[product - 1]
    ordered = _EPOCH + timedelta(seconds=rng.randrange(0, 700 * 86400), microseconds=rng.randrange(10**6))
    status = rng.choice(_STATUSES)
    shipped = ordered + timedelta(hours=rng.randrange(2, 96)) if status in ("shipped", "delivered") else None
    updated = (shipped or ordered) + timedelta(minutes=rng.randrange(0, 600))
    return (
        i, rng.randrange(1, customers + 1), product, quantity, unit, unit * quantity,
        status, rng.choice(_NOTES), ordered, shipped, updated,
    )  # fmt: skip


@dataclass(frozen=True)
class ShopSize:
    customers: int = 20_000
    products: int = 2_000
    orders: int = 300_000


def _tsv_value(value: Any) -> str:
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="microseconds")
    if isinstance(value, str):
        return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
    return str(value)


def create_tables(engine: Engine) -> None:
    """(Re)create the three empty tables in ``engine``'s database.

    Apart from ``load_shop`` because change data capture (``snapshot.mode=never``) must see the
    tables before it starts, and the rows only after: then every row flows through the binlog.
    """
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        for table, ddl in SHOP_DDL.items():
            cur.execute(f"DROP TABLE IF EXISTS {table}")
            cur.execute(ddl)
        raw.commit()
        cur.close()
    finally:
        raw.close()


def load_shop(engine: Engine, size: ShopSize = ShopSize(), seed: int = 7) -> dict[str, int]:
    """Load the generated rows into the (empty) tables ``create_tables`` made; rows per table.

    Rows are written to a tab-separated file and loaded with ``LOAD DATA LOCAL INFILE`` (about 3x
    faster than PyMySQL's multi-row INSERTs here, where Python's escaping is the bottleneck), one
    transaction per table.
    """
    rng = random.Random(seed)
    products = [_product(rng, i) for i in range(1, size.products + 1)]
    prices = [p[3] for p in products]
    plan: dict[str, tuple[str, Iterator[tuple[Any, ...]]]] = {
        "customers": (
            "id, name, email, country, vip, created_at, updated_at",
            (_customer(rng, i) for i in range(1, size.customers + 1)),
        ),
        "products": ("id, sku, title, price, weight_kg, stock, updated_at", iter(products)),
        "orders": (
            "id, customer_id, product_id, quantity, unit_price, total, status, note, ordered_at, shipped_at, "
            "updated_at",
            (_order(rng, i, size.customers, size.products, prices) for i in range(1, size.orders + 1)),
        ),
    }
    counts: dict[str, int] = {}
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        with tempfile.TemporaryDirectory(prefix="sluice-shop-") as tmp:
            for table, (columns, rows) in plan.items():
                path = Path(tmp) / f"{table}.tsv"
                with path.open("w", encoding="utf-8") as out:
                    counts[table] = 0
                    for row in rows:
                        out.write("\t".join(_tsv_value(v) for v in row) + "\n")
                        counts[table] += 1
                cur.execute(
                    f"LOAD DATA LOCAL INFILE %s INTO TABLE {table} CHARACTER SET utf8mb4 ({columns})",
                    (str(path),),
                )
                raw.commit()
        cur.close()
    finally:
        raw.close()
    return counts


def create_shop(engine: Engine, size: ShopSize = ShopSize(), seed: int = 7) -> dict[str, int]:
    """Create the three tables in ``engine``'s (empty) database and load them; rows per table."""
    create_tables(engine)
    return load_shop(engine, size, seed)


@dataclass
class LoadStats:
    """What the generator did so far (read by the live view from another thread)."""

    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    transactions: int = 0
    errors: list[str] = field(default_factory=list)


class LoadGenerator:
    """Inserts and updates (and, if asked, deletes) shop rows at a steady rate in short transactions,
    on its own thread.

    Each tick (``tick_s``) is one transaction: new orders, status changes of existing orders (a
    shipped order gets ``shipped_at``), the occasional new customer, customer and product
    changes, and ``deletes_per_s`` deleted orders (none by default: see the module docstring).
    ``updated_at`` is set by MariaDB. ``stop()`` returns once the last transaction has
    committed, so everything it wrote is in the source before the demo waits for catch-up.
    """

    def __init__(
        self,
        engine: Engine,
        size: ShopSize,
        *,
        orders_per_s: float = 150,
        updates_per_s: float = 250,
        deletes_per_s: float = 0,
        tick_s: float = 0.1,
        seed: int = 11,
    ) -> None:
        self._engine, self._size, self._tick = engine, size, tick_s
        self._orders_per_tick = orders_per_s * tick_s
        self._updates_per_tick = updates_per_s * tick_s
        self._deletes_per_tick = deletes_per_s * tick_s
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="shop-load", daemon=True)
        self.stats = LoadStats()

    def start(self) -> LoadGenerator:
        self._thread.start()
        return self

    def stop(self) -> LoadStats:
        self._stop.set()
        self._thread.join(timeout=30)
        return self.stats

    def _count(self, per_tick: float) -> int:
        whole = int(per_tick)
        return whole + (1 if self._rng.random() < per_tick - whole else 0)

    def _tick_once(self, cur: Any, ids: dict[str, int]) -> None:
        rng = self._rng
        new_orders = []
        for _ in range(self._count(self._orders_per_tick)):
            product = rng.randrange(1, self._size.products + 1)
            quantity = rng.choice((1, 2, 3))
            unit = Decimal(rng.randrange(99, 250_000)) / 100
            new_orders.append(
                (rng.randrange(1, ids["customers"] + 1), product, quantity, unit, unit * quantity,
                 "new", rng.choice(_NOTES), datetime.now(UTC).replace(tzinfo=None))
            )  # fmt: skip
        if new_orders:
            cur.executemany(
                "INSERT INTO orders (customer_id, product_id, quantity, unit_price, total, status, note, "
                "ordered_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                new_orders,
            )
            ids["orders"] += len(new_orders)
        updates = 0
        for _ in range(self._count(self._updates_per_tick)):
            kind = rng.random()
            if kind < 0.8:
                updates += cur.execute(_ADVANCE_ORDER, (rng.randrange(1, ids["orders"] + 1),))
            elif kind < 0.9:
                updates += cur.execute(
                    "UPDATE products SET price = price + 0.01 * %s, stock = GREATEST(stock - 1, 0) + %s "
                    "WHERE id = %s",
                    (rng.choice((-7, 3, 11)), rng.randrange(0, 3), rng.randrange(1, self._size.products + 1)),
                )
            else:
                updates += cur.execute(
                    "UPDATE customers SET vip = NOT vip, email = IF(email IS NULL, %s, NULL) WHERE id = %s",
                    (f"new{rng.randrange(10**6)}@example.org", rng.randrange(1, ids["customers"] + 1)),
                )
        deletes = 0
        # No draw when deletes are off: `make demo`'s load stays the sequence it always was.
        for _ in range(self._count(self._deletes_per_tick) if self._deletes_per_tick else 0):
            deletes += cur.execute("DELETE FROM orders WHERE id = %s", (rng.randrange(1, ids["orders"] + 1),))
        if rng.random() < 0.5:
            cur.execute(
                "INSERT INTO customers (name, email, country, vip, created_at) VALUES (%s, %s, %s, 0, %s)",
                (f"{rng.choice(_FIRST)} {rng.choice(_LAST)}", None, rng.choice(_COUNTRIES),
                 datetime.now(UTC).replace(tzinfo=None)),
            )  # fmt: skip
            ids["customers"] += 1
            self.stats.inserts += 1
        self.stats.inserts += len(new_orders)
        self.stats.updates += updates
        self.stats.deletes += deletes

    def _run(self) -> None:
        raw = self._engine.raw_connection()
        try:
            cur = raw.cursor()
            cur.execute("SELECT (SELECT MAX(id) FROM orders), (SELECT MAX(id) FROM customers)")
            max_orders, max_customers = cur.fetchone() or (0, 0)
            ids = {"orders": int(max_orders or 0), "customers": int(max_customers or 0)}
            next_tick = time.monotonic()
            while not self._stop.is_set():
                try:
                    self._tick_once(cur, ids)
                    raw.commit()
                    self.stats.transactions += 1
                except Exception as exc:  # shown by the live view; the demo decides what it means
                    raw.rollback()
                    self.stats.errors.append(f"load generator: {exc}")
                    if len(self.stats.errors) > 20:
                        return
                next_tick += self._tick
                self._stop.wait(max(0.0, next_tick - time.monotonic()))
        finally:
            raw.close()
