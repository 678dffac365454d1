"""The JDBC sink's MariaDB write path, measured: LOAD DATA LOCAL INFILE + merge vs multi-row INSERT.

Run with ``.venv/bin/python -m bench.mysql_write_bench [rows]`` (the local stack's MariaDB must be
up). Both paths start from what the sink holds — an Arrow table of the rows in their load form
(text), ~100 bytes a row — and end with the rows committed in a keyed InnoDB table, upserting:

1. ``load_data``: ``sluice.connectors.jdbc.write_mysql.apply`` — Arrow builds the tab-separated file,
   ``LOAD DATA LOCAL INFILE`` into a temporary stage, ``INSERT … SELECT … ON DUPLICATE KEY UPDATE``
   of the last record per key (what the sink runs).
2. ``multirow``: the rows as Python tuples, PyMySQL's ``executemany`` of
   ``INSERT … VALUES (…), (…) … ON DUPLICATE KEY UPDATE`` (it packs ~1 MB statements).

Each path runs twice, into an empty table then over the same keys (updates); the figure is rows
per second over both passes. The last line is the machine-readable summary. Numbers depend on the
machine's load: compare the ratio of one run.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Connection, create_engine, text

from sluice.connectors.jdbc import write_mysql as my
from sluice.connectors.jdbc.writes import OP_COLUMN, ORD_COLUMN, TableWrite
from sluice.worker.settings import settings_or_exit

COLUMNS = ("id", "customer", "amount", "status", "note", "created_at")
CREATE = (
    "CREATE TABLE orders (id BIGINT NOT NULL PRIMARY KEY, customer VARCHAR(64) NOT NULL, "
    "amount DECIMAL(12,2) NOT NULL, status VARCHAR(16) NOT NULL, note VARCHAR(255) NULL, "
    "created_at DATETIME(6) NOT NULL)"
)


def rows_table(n: int) -> pa.Table:
    """``n`` rows of about 100 bytes, as the sink's wire form (all text), plus order and op."""
    ids = list(range(n))
    return pa.table(
        {
            "id": [str(i) for i in ids],
            "customer": [f"customer-{i % 9973:05d}@example.com" for i in ids],
            "amount": [f"{(i * 37) % 100000 / 100:.2f}" for i in ids],
            "status": [("new", "paid", "shipped")[i % 3] for i in ids],
            "note": [None if i % 5 == 0 else f"note {i}: leave the parcel at the back door" for i in ids],
            "created_at": [f"2026-11-{1 + i % 28:02d} 12:{i % 60:02d}:00.{i % 1000000:06d}" for i in ids],
            ORD_COLUMN: pa.array(ids, type=pa.int64()),
            OP_COLUMN: ["u"] * n,
        }
    )


def load_data(conn: Connection, rows: pa.Table) -> None:
    write = TableWrite("", "orders", COLUMNS, ("id",), "upsert", False)
    my.apply(conn, write, rows, {c: "" for c in COLUMNS})


def multirow(conn: Connection, rows: pa.Table) -> None:
    data = list(zip(*(rows.column(c).to_pylist() for c in COLUMNS), strict=True))
    cols = ", ".join(COLUMNS)
    marks = ", ".join(["%s"] * len(COLUMNS))
    sets = ", ".join(f"{c} = VALUES({c})" for c in COLUMNS[1:])
    raw: Any = conn.connection.driver_connection
    with raw.cursor() as cur:
        cur.executemany(f"INSERT INTO orders ({cols}) VALUES ({marks}) ON DUPLICATE KEY UPDATE {sets}", data)


def measure(url: str, rows: pa.Table, path: Callable[[Connection, pa.Table], None]) -> float:
    """Rows/s of ``path`` over two passes (insert, then update) into a fresh table."""
    engine = create_engine(url, connect_args=dict(my.CONNECT_ARGS))
    try:
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE IF EXISTS orders"))
            conn.execute(text(CREATE))
        started = time.perf_counter()
        for _ in range(2):
            with engine.begin() as conn:
                path(conn, rows)
        elapsed = time.perf_counter() - started
        with engine.connect() as conn:
            count = conn.execute(text("SELECT count(*) FROM orders")).scalar_one()
        if count != rows.num_rows:
            raise AssertionError(f"{path.__name__}: {count} rows in the table, expected {rows.num_rows}")
        return 2 * rows.num_rows / elapsed
    finally:
        engine.dispose()


def main(argv: list[str]) -> int:
    n = int(argv[1]) if len(argv) > 1 else 200_000
    cfg = settings_or_exit().stack
    name = f"bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(cfg.mariadb_url())
    with admin.begin() as conn:
        conn.execute(text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
    try:
        rows = rows_table(n)
        per_row = sum(pc.sum(pc.utf8_length(rows.column(c))).as_py() or 0 for c in COLUMNS) / n
        print(f"{n} rows of ~{per_row:.0f} bytes of values, upsert, 2 passes each")
        url = cfg.mariadb_url(name)
        load = measure(url, rows, load_data)
        print(f"LOAD DATA LOCAL INFILE + merge: {load:,.0f} rows/s")
        multi = measure(url, rows, multirow)
        print(f"multi-row INSERT ... ON DUPLICATE KEY UPDATE: {multi:,.0f} rows/s")
        print(
            f"bench mysql-write: load_data_rows_per_s={load:.0f} multirow_rows_per_s={multi:.0f} "
            f"ratio={load / multi:.2f}"
        )
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
        admin.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
