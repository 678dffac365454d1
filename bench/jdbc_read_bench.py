"""Measure the JDBC source's read path choices on this machine (a benchmark, not a test).

For N rows of about 100 bytes (id, customer, amount DECIMAL, note, created) in MariaDB and in
PostgreSQL it prints rows/s of:

- ``driver``: the source's read run in-process (``SourceRead.to_table``): one DB-API connection
  on the driver, rows -> Arrow records (PyMySQL / psycopg), no Spark;
- ``spark-1``: the source's read path (``JdbcSourceTask.read`` bound by ``source_frame``: its splits
  read in Spark tasks by mapInArrow) with the range in one split;
- ``spark-split``: the same range split into ``read.split.rows`` sub-ranges read in parallel;
- ``copy`` (PostgreSQL only): ``COPY (SELECT …) TO STDOUT`` bytes, unparsed: the database's own
  bulk path as the upper bound.

Usage: ``python -m bench.jdbc_read_bench [rows]``; the last line is ``bench jdbc-read: …``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from sluice.activities.spark_binding import source_frame
from sluice.connectors.api import open_source_task
from sluice.connectors.jdbc import read as db
from sluice.connectors.jdbc.source import JdbcSourceConnector
from sluice.connectors.model import PartitionRange
from sluice.worker.settings import settings
from tests.connectors.jdbc_dbs import Db
from tests.databases import mariadb_database, postgres_database


def _fill(d: Db, rows: int) -> None:
    ddl_ts = "DATETIME(3)" if d.dialect == "mysql" else "timestamp(3)"
    d.run(
        f"CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR(20) NOT NULL, "
        f"amount DECIMAL(14,2) NOT NULL, note VARCHAR(60), created {ddl_ts} NOT NULL)"
    )
    chunk = 5000
    for lo in range(1, rows + 1, chunk):
        values = ", ".join(
            f"({i}, 'customer-{i % 997}', {i % 100000}.25, 'a note of some forty characters {i:08d}', "
            f"'2024-01-01 00:00:00.{i % 1000:03d}')"
            for i in range(lo, min(rows + 1, lo + chunk))
        )
        d.run(f"INSERT INTO orders VALUES {values}")


def _rate(rows: int, run: Callable[[], int | None]) -> float:
    start = time.perf_counter()
    got = run()
    elapsed = time.perf_counter() - start
    assert got in (None, rows), f"read {got} rows, expected {rows}"
    return rows / elapsed


def _materialise(records: Any) -> int | None:
    """Compute every record column once in the JVM (the noop sink), without pulling rows into
    Python; the row count is checked by the tests, not here (counting would read twice)."""
    records.write.format("noop").mode("overwrite").save()
    return None


def bench(d: Db, rows: int, spark: object) -> dict[str, float]:
    _fill(d, rows)
    cfg = {
        "connector.class": "jdbc-source",
        "name": "bench",
        "connection.url": d.jdbc_url,
        "connection.user": d.user,
        "connection.password": d.password,
        "mode": "incrementing",
        "incrementing.column.name": "id",
        "table.whitelist": "orders",
        "topic.prefix": "b-",
    }
    out: dict[str, float] = {}
    one = open_source_task(JdbcSourceConnector, {**cfg, "read.split.rows": str(rows + 1)}, 0)
    split = open_source_task(JdbcSourceConnector, {**cfg, "read.split.rows": str(rows // 4 + 1)}, 0)
    start, end = one.earliest_positions()["orders"], one.latest_positions({})["orders"]
    r = PartitionRange("orders", start, end)
    out["driver"] = _rate(rows, lambda: one.read([r]).to_table().num_rows)
    _materialise(source_frame(spark, one.read([r])))  # warm up Python workers
    out["spark-1"] = _rate(rows, lambda: _materialise(source_frame(spark, one.read([r]))))
    out["spark-split"] = _rate(rows, lambda: _materialise(source_frame(spark, split.read([r]))))
    if d.dialect == "postgresql":
        conn = db.connect(one.params, "bench")

        def copy() -> int:
            with conn.cursor() as cur, cur.copy("COPY (SELECT * FROM orders) TO STDOUT") as cp:
                return sum(bytes(chunk).count(b"\n") for chunk in cp)

        out["copy"] = _rate(rows, copy)
        conn.close()
    one.close()
    split.close()
    return out


def main() -> None:
    from sluice.activities.spark import get_spark

    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    env = settings()
    spark = get_spark(env.spark_master, driver_memory=env.spark_driver_memory, app_name="jdbc-bench")
    results: dict[str, dict[str, float]] = {}
    with mariadb_database(env.stack) as m:
        results["mariadb"] = bench(Db.of(m), rows, spark)
    with postgres_database(env.stack) as p:
        results["postgresql"] = bench(Db.of(p), rows, spark)
    for dialect, figures in results.items():
        for name, rate in figures.items():
            print(f"{dialect:<11} {name:<12} {rate:>12,.0f} rows/s")
    summary = ", ".join(
        f"{dialect} {name} {rate:,.0f} rows/s"
        for dialect, figures in results.items()
        for name, rate in figures.items()
    )
    print(f"bench jdbc-read: {rows} rows of ~100 bytes; {summary} (this machine)")


if __name__ == "__main__":
    main()
