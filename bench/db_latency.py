"""End-to-end latency of a database pipeline: row committed in the source -> row visible in the target.

A writer thread inserts into the source table at a steady rate (``rate`` rows/s in small
transactions every ``tick_s``) and notes each transaction's commit time (after ``COMMIT``
returns) for its ids. An observer polls the target every ``poll_s`` for ids above the lowest one
not yet seen and notes when each first appears. Latency = seen − committed; the observer's poll
adds at most ``poll_s`` (reported). Rows committed during the first ``warm_up_s`` are left out.
A row not seen by the end of the drain counts as an infinite latency in the percentiles (``inf``
when more than 1 % never arrived), so a backlog cannot make p99 look good by leaving rows out.
Both clocks are this process's ``time.monotonic()``. The source is MariaDB or PostgreSQL (by
its URL), the target PostgreSQL.

The steady state is what is measured, not a new connector's start (topic and table creation, its
first Spark jobs): one primer row is inserted first and the rate starts once it is visible in the
target (``prime_s`` at most).
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any

import psycopg
import pymysql
from sqlalchemy.engine import URL

from bench.db_baselines import pg_dsn

LATENCY_TABLE = "bench_latency"
#: The source table in MariaDB, and in PostgreSQL (``created`` as ``TIMESTAMP(6)``, as DATETIME(6) maps).
MARIADB_TABLE_DDL = (
    "CREATE TABLE {table} (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, "
    "payload VARCHAR(64) NOT NULL, created DATETIME(6) NOT NULL DEFAULT NOW(6))"
)
MARIADB_DDL = MARIADB_TABLE_DDL.format(table=LATENCY_TABLE)
POSTGRES_DDL = (
    "CREATE TABLE {table} (id BIGSERIAL PRIMARY KEY, payload VARCHAR(64) NOT NULL, "
    "created TIMESTAMP(6) NOT NULL DEFAULT now())"
)


@dataclass(frozen=True)
class Latency:
    rows: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    unseen: int  # committed rows never seen before the deadline
    poll_ms: float


def create_table(url: URL, table: str = LATENCY_TABLE) -> None:
    """The source table, made anew."""
    conn = _connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {table}")
            cur.execute((POSTGRES_DDL if _is_postgres(url) else MARIADB_TABLE_DDL).format(table=table))
        conn.commit()
    finally:
        conn.close()


def _is_postgres(url: URL) -> bool:
    return url.get_backend_name().startswith("postgres")


def _connect(url: URL) -> Any:
    """A DB-API connection to the source, not in autocommit (each insert is its own transaction)."""
    if _is_postgres(url):
        return psycopg.connect(pg_dsn(url))
    return pymysql.connect(
        host=url.host, port=url.port or 3306, user=url.username, password=url.password or "",
        database=url.database, autocommit=False,
    )  # fmt: skip


def _insert(cur: Any, table: str, payloads: list[str]) -> list[int]:
    """Insert one row per payload; their ids (PostgreSQL's RETURNING, MariaDB's consecutive
    AUTO_INCREMENT ids from the first)."""
    if isinstance(cur, psycopg.Cursor):
        cur.execute(f"INSERT INTO {table} (payload) SELECT unnest(%s::varchar[]) RETURNING id", (payloads,))
        return [int(row[0]) for row in cur.fetchall()]
    cur.executemany(f"INSERT INTO {table} (payload) VALUES (%s)", [(p,) for p in payloads])
    first = int(cur.lastrowid)
    return list(range(first, first + len(payloads)))


def _prime(source: URL, table: str, target_dsn: str, target_table: str, prime_s: float, poll_s: float) -> int:
    """Insert one row and wait until the target shows it; its id (the observer starts above it)."""
    conn = _connect(source)
    try:
        with conn.cursor() as cur:
            (primer,) = _insert(cur, table, ["primer"])
        conn.commit()
    finally:
        conn.close()
    deadline = time.monotonic() + prime_s
    with psycopg.connect(target_dsn, autocommit=True) as target:
        while time.monotonic() < deadline:
            try:
                if target.execute(f'SELECT 1 FROM "{target_table}" WHERE id = %s', (primer,)).fetchone():
                    return primer
            except psycopg.errors.UndefinedTable:
                pass  # auto.create has not created it yet
            time.sleep(poll_s)
    raise TimeoutError(f"latency bench: the primer row never reached {target_table} in {prime_s:.0f} s")


def measure(
    source: URL,
    target_dsn: str,
    target_table: str,
    *,
    rate: int = 1000,
    seconds: float = 25,
    warm_up_s: float = 5,
    tick_s: float = 0.01,
    poll_s: float = 0.02,
    drain_s: float = 30,
    prime_s: float = 300,
    source_table: str = LATENCY_TABLE,
) -> Latency:
    committed: dict[int, float] = {}
    seen: dict[int, float] = {}
    done = threading.Event()
    per_tick = max(1, round(rate * tick_s))
    low = _prime(source, source_table, target_dsn, target_table, prime_s, poll_s)
    start = time.monotonic()

    def write() -> None:
        conn = _connect(source)
        try:
            with conn.cursor() as cur:
                next_tick = time.monotonic()
                while time.monotonic() - start < seconds:
                    ids = _insert(cur, source_table, ["x" * 64] * per_tick)
                    conn.commit()
                    at = time.monotonic()
                    for i in ids:
                        committed[i] = at
                    next_tick += tick_s
                    time.sleep(max(0.0, next_tick - time.monotonic()))
        finally:
            conn.close()
            done.set()

    writer = threading.Thread(target=write, name="latency-writer", daemon=True)
    writer.start()
    with psycopg.connect(target_dsn, autocommit=True) as conn:
        deadline = None
        while True:
            if done.is_set() and deadline is None:
                deadline = time.monotonic() + drain_s
            if deadline is not None and (time.monotonic() > deadline or len(seen) >= len(committed)):
                break
            try:
                ids = conn.execute(f'SELECT id FROM "{target_table}" WHERE id > %s', (low,)).fetchall()
            except psycopg.errors.UndefinedTable:
                ids = []  # auto.create has not created it yet
            now = time.monotonic()
            for (i,) in ids:
                seen.setdefault(int(i), now)
            while low + 1 in seen:
                low += 1
            time.sleep(poll_s)
    writer.join()
    counted = [i for i, at in committed.items() if at - start >= warm_up_s]
    # a row never seen counts as slower than any seen one (not left out: that would flatter p99)
    latencies = sorted((seen[i] - committed[i]) * 1000 if i in seen else float("inf") for i in counted)
    if not latencies:
        return Latency(0, float("nan"), float("nan"), float("nan"), 0, poll_s * 1000)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    unseen = sum(1 for i in counted if i not in seen)
    return Latency(
        len(latencies) - unseen, statistics.median(latencies), p99, latencies[-1], unseen, poll_s * 1000,
    )  # fmt: skip
