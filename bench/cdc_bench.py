"""`make bench-cdc`: change data capture end to end, next to the binlog read rate it is bounded by.

Printed side by side in one run against the local stack (a benchmark: nothing is asserted):
1. end to end, change events/s: ROWS rows of about 100 bytes (``bench_rows``, filled before capture
   starts, so they are not captured) are each updated once (``UPDATE … WHERE id BETWEEN`` in
   transactions of 10,000 rows); ``mysql-cdc`` -> RocketMQ -> ``jdbc-sink`` with
   ``ExtractNewRecordState`` (upsert on the record key, the CDC replica config of docs/connectors.md).
   Timed from the first UPDATE until the target holds every row (an update's ``after`` image upserts its row,
   so the target's row count is the number of updates applied). The source's own UPDATE rate is
   printed too: with a fast pipeline, the source is the limit;
2. the limit: the same binlog range (positions before and after the update load) read alone by
   ``pymysqlreplication``, the connector's own reader (``sluice.connectors.cdc.mysql.binlog.events``),
   decoding every row: what capture could do with nothing else to do;
3. latency p50/p99, row committed in MariaDB -> visible in PostgreSQL, at a steady 1,000 changes/s
   (inserts) for 30 s after a 5 s warm-up, through the same connectors (``bench.db_latency``); then
   the same from a PostgreSQL source table (``bench_pg_latency``): ``postgres-cdc`` (Debezium's
   PostgreSQL keys, ``pgoutput``) -> RocketMQ -> the same sink config;
4. snapshot rows/s: once the connectors above are deleted, a new ``mysql-cdc`` with
   ``snapshot.mode=initial_only`` reads the ROWS rows of ``bench_rows`` in primary-key chunks
   (``snapshot.chunk.size``, ``--snapshot-chunk``, default the connector's own) through RocketMQ
   into a new target table ``snapshot_bench_rows`` (same sink config). Timed from the connectors'
   creation until the target holds every row, so their start (topics, first plan) is included;
   the seconds until the first row showed are printed too.

Before the timed load, a probe update is repeated until it reaches the target: capture is live
(``snapshot.mode=never`` starts at the binlog end of the source's first planning) and the
worker's Spark session is warm.

``--snapshot-only`` runs step 4 alone, beside the databases' own path for the same rows (MariaDB's
client ``SELECT`` piped into PostgreSQL ``COPY``, ``bench.db_baselines.mariadb_to_postgres``), and
prints its own summary line (``bench cdc-snapshot: …``).

Usage: ``python -m bench.cdc_bench [--rows N] [--snapshot-only]`` (default 1,000,000; ``make
bench-cdc BENCH_ARGS='--rows 100000'``). The last line is the summary; every key names its unit.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass

import psycopg
import pymysql
from sqlalchemy.engine import URL

from bench import db_baselines, db_latency
from bench.bench_databases import Databases, drop_databases, make_databases
from bench.db_baselines import BENCH_TABLE, Timed, count_rows, pg_dsn
from sluice.activities.context import RuntimeContext
from sluice.connectors.cdc.mysql import binlog
from sluice.connectors.cdc.mysql.changes import ROWS, file_index
from sluice.connectors.cdc.snapshot import CHUNK_SIZE
from sluice.worker.client import SluiceClient
from sluice.worker.demo.cdc import JSON_WITH_SCHEMAS, cdc_replica_sink, debezium_mysql_source
from sluice.worker.main import build_worker, store_listener
from sluice.worker.settings import Settings, settings_or_exit
from sluice.worker.temporal_client import connect

UPDATE_CHUNK = 10_000  # rows per UPDATE transaction of the load
LATENCY_RATE = 1_000  # changes/s of the latency run
READER_ID = 0x5B1CE  # the raw reader's replica id (unique on the server while it reads)


SNAPSHOT_TABLE = f"snapshot_{BENCH_TABLE}"  # the snapshot run's target table
PG_LATENCY_TABLE = "bench_pg_latency"  # the PostgreSQL latency run's source (and target) table
BATCH = {"batch.max.records": "100000", "poll.interval.ms": "100"}  # both sides of every run


def _replica_sink(dbs: Databases, topics: str) -> dict[str, str]:
    """docs/connectors.md's CDC replica sink of topics ``<topics><table>`` into the target."""
    connection = {"connection.url": dbs.jdbc(dbs.pg_target), "connection.user": dbs.pg_target.username or ""}
    return cdc_replica_sink(topics, connection, **BATCH)


def configs(
    dbs: Databases, prefix: str, tables: Sequence[str] = (BENCH_TABLE, db_latency.LATENCY_TABLE)
) -> tuple[dict[str, str], dict[str, str]]:
    """``mysql-cdc`` for ``tables`` and docs/connectors.md's CDC replica sink into the target."""
    source = debezium_mysql_source(dbs.mariadb, dbs.mariadb.password or "", prefix, tables, **BATCH)
    return source, _replica_sink(dbs, f"{prefix}_{dbs.mariadb.database}_")


def pg_configs(dbs: Databases, prefix: str) -> tuple[dict[str, str], dict[str, str]]:
    """``postgres-cdc`` of ``PG_LATENCY_TABLE`` in the PostgreSQL source, as a Debezium user writes
    it (its own slot), and the CDC replica sink of ``configs`` into the same target."""
    url = dbs.pg_source
    source = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": str(url.host),
        "database.port": str(url.port),
        "database.user": url.username or "",
        "database.password": url.password or "",
        "database.dbname": str(url.database),
        "topic.prefix": prefix,
        "plugin.name": "pgoutput",
        "slot.name": f"{prefix.lower()}_slot",
        "table.include.list": f"public.{PG_LATENCY_TABLE}",
        "snapshot.mode": "never",
        **JSON_WITH_SCHEMAS,
        **BATCH,
    }
    return source, _replica_sink(dbs, f"{prefix}_public_")


def _params(url: URL) -> binlog.Params:
    return binlog.Params(str(url.host), int(url.port or 3306), url.username or "", url.password or "")


def _end(url: URL) -> tuple[str, int]:
    conn = binlog.connect(_params(url), "bench cdc")
    try:
        return binlog.binlog_end(conn)
    finally:
        conn.close()


def _execute(url: URL, sql: str, args: Sequence[object] = ()) -> None:
    conn = pymysql.connect(
        host=url.host, port=url.port or 3306, user=url.username, password=url.password or "",
        database=url.database, autocommit=True,
    )  # fmt: skip
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
    finally:
        conn.close()


def update_load(url: URL, rows: int) -> Timed:
    """Update every row once, ``UPDATE_CHUNK`` rows per transaction; the source's own rate."""
    t0 = time.perf_counter()
    for low in range(1, rows + 1, UPDATE_CHUNK):
        high = min(rows, low + UPDATE_CHUNK - 1)
        _execute(url, f"UPDATE {BENCH_TABLE} SET k = k + 1 WHERE id BETWEEN %s AND %s", (low, high))
    return Timed(rows, time.perf_counter() - t0)


def read_binlog(url: URL, start: tuple[str, int], end: tuple[str, int]) -> Timed:
    """Rows of ``bench_rows``' row events in ``[start, end)``, read and decoded alone."""
    stop = (file_index(end[0]), end[1])
    rows = 0
    t0 = time.perf_counter()
    for ev in binlog.events(_params(url), READER_ID, start[0], start[1], [str(url.database)]):
        if (ev.file_index, ev.start) >= stop:
            break
        if ev.kind == ROWS and ev.payload.table == BENCH_TABLE:
            rows += len(ev.payload.rows)
    return Timed(rows, time.perf_counter() - t0)


async def _until(predicate_rows: int, dsn: str, table: str, timeout_s: float) -> float:
    """Seconds (perf counter) at which the target's ``table`` holds ``predicate_rows`` rows."""
    deadline = time.monotonic() + timeout_s
    while (n := await asyncio.to_thread(count_rows, dsn, table)) < predicate_rows:
        if time.monotonic() > deadline:
            raise SystemExit(
                f"bench cdc: the target holds {n:,} of {predicate_rows:,} rows after {timeout_s:.0f} s"
            )
        await asyncio.sleep(0.2)
    return time.perf_counter()


async def _probe(dbs: Databases, timeout_s: float = 900) -> float:
    """Repeat an update of row 1 until it reaches the target; seconds it took."""
    t0 = time.monotonic()
    dsn = pg_dsn(dbs.pg_target)
    while await asyncio.to_thread(count_rows, dsn, BENCH_TABLE) < 1:
        if time.monotonic() - t0 > timeout_s:
            raise SystemExit(f"bench cdc: no change reached the target within {timeout_s:.0f} s")
        await asyncio.to_thread(_execute, dbs.mariadb, f"UPDATE {BENCH_TABLE} SET k = k + 1 WHERE id = 1")
        await asyncio.sleep(1)
    return time.monotonic() - t0


@dataclass(frozen=True)
class Snapshot:
    timed: Timed  # from the connectors' creation until the target holds every row
    first_row_s: float  # from their creation until the first row showed in the target
    chunk: int


async def snapshot_run(sluice: SluiceClient, dbs: Databases, rows: int, chunk: int) -> Snapshot:
    """``bench_rows`` read by an ``initial_only`` snapshot into ``snapshot_bench_rows``."""
    name = uuid.uuid4().hex[:8]
    source, sink = configs(dbs, f"S{name}", (BENCH_TABLE,))
    source.update({"snapshot.mode": "initial_only", "snapshot.chunk.size": str(chunk)})
    sink["table.name.format"] = "snapshot_${topic}"
    dsn = pg_dsn(dbs.pg_target)
    t0 = time.perf_counter()
    await sluice.create(f"bench-snap-dst-{name}", sink)
    await sluice.create(f"bench-snap-src-{name}", source)
    first = await _until(1, dsn, SNAPSHOT_TABLE, 900)
    done = await _until(rows, dsn, SNAPSHOT_TABLE, max(900, rows / 500))
    for connector in (f"bench-snap-src-{name}", f"bench-snap-dst-{name}"):
        await sluice.delete(connector)
    return Snapshot(Timed(rows, done - t0), first - t0, chunk)


async def pg_latency_run(sluice: SluiceClient, dbs: Databases) -> db_latency.Latency:
    """Latency at ``LATENCY_RATE`` from the PostgreSQL source table, through ``pg_configs``."""
    name = uuid.uuid4().hex[:8]
    source, sink = pg_configs(dbs, f"P{name}")
    await asyncio.to_thread(db_latency.create_table, dbs.pg_source, PG_LATENCY_TABLE)
    await sluice.create(f"bench-pgcdc-dst-{name}", sink)
    await sluice.create(f"bench-pgcdc-src-{name}", source)
    # capture starts where the slot is made (snapshot.mode=never): the primer row waits for it
    await _until_slot(dbs.pg_source, source["slot.name"], 300)
    latency = await asyncio.to_thread(
        db_latency.measure, dbs.pg_source, pg_dsn(dbs.pg_target), PG_LATENCY_TABLE,
        rate=LATENCY_RATE, seconds=35, warm_up_s=5, source_table=PG_LATENCY_TABLE,
    )  # fmt: skip
    for connector in (f"bench-pgcdc-src-{name}", f"bench-pgcdc-dst-{name}"):
        await sluice.delete(connector)
    return latency


async def _until_slot(url: URL, slot: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    query = "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s"
    while not await asyncio.to_thread(lambda: _fetch_one(pg_dsn(url), query, slot)):
        if time.monotonic() > deadline:
            raise SystemExit(f"bench cdc: postgres-cdc made no slot {slot!r} within {timeout_s:.0f} s")
        await asyncio.sleep(0.2)


def _fetch_one(dsn: str, query: str, *args: object) -> object:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(query, args).fetchone()


@dataclass(frozen=True)
class Latencies:
    mariadb: db_latency.Latency
    postgres: db_latency.Latency


@asynccontextmanager
async def in_process_worker(ctx: RuntimeContext, settings: Settings) -> AsyncIterator[SluiceClient]:
    """A worker in this process (its Spark session already up) and a client of its task queue."""
    client = await connect(settings.temporal_address, settings.temporal_namespace)
    with ThreadPoolExecutor(max_workers=8) as pool, store_listener(ctx):
        async with build_worker(client, settings, ctx, pool):
            yield SluiceClient(client, settings.task_queue)


async def snapshot_alone(
    ctx: RuntimeContext, settings: Settings, dbs: Databases, rows: int, chunk: int
) -> Snapshot:
    """Step 4 alone, on one in-process worker."""
    async with in_process_worker(ctx, settings) as sluice:
        return await snapshot_run(sluice, dbs, rows, chunk)


async def pipeline(
    ctx: RuntimeContext, settings: Settings, dbs: Databases, rows: int, chunk: int
) -> tuple[Timed, Timed, tuple[tuple[str, int], tuple[str, int]], Latencies, Snapshot]:
    """Capture live, the timed update load, then the latency run; one in-process worker."""
    name = uuid.uuid4().hex[:8]
    source, sink = configs(dbs, f"B{name}")
    async with in_process_worker(ctx, settings) as sluice:
        await sluice.create(f"bench-cdc-dst-{name}", sink)
        await sluice.create(f"bench-cdc-src-{name}", source)
        print(f"capture live after {await _probe(dbs):.1f} s (probe update reached the target)", flush=True)
        before = await asyncio.to_thread(_end, dbs.mariadb)
        t0 = time.perf_counter()
        source_rate = await asyncio.to_thread(update_load, dbs.mariadb, rows)
        after = await asyncio.to_thread(_end, dbs.mariadb)
        print(f"source UPDATE load: {rows:,} rows in {source_rate.seconds:.1f} s", flush=True)
        done = await _until(rows, pg_dsn(dbs.pg_target), BENCH_TABLE, max(600, rows / 500))
        e2e = Timed(rows, done - t0)
        print(f"e2e MariaDB -> RocketMQ -> PostgreSQL: {e2e.rows_per_s:,.0f} events/s", flush=True)
        latency = await asyncio.to_thread(
            db_latency.measure, dbs.mariadb, pg_dsn(dbs.pg_target), db_latency.LATENCY_TABLE,
            rate=LATENCY_RATE, seconds=35, warm_up_s=5,
        )  # fmt: skip
        for connector in (f"bench-cdc-src-{name}", f"bench-cdc-dst-{name}"):
            await sluice.delete(connector)
        pg_latency = await pg_latency_run(sluice, dbs)
        print(f"PostgreSQL CDC latency: p50 {pg_latency.p50_ms:.0f} ms, p99 {pg_latency.p99_ms:.0f} ms",
              flush=True)  # fmt: skip
        snapshot = await snapshot_run(sluice, dbs, rows, chunk)
        print(
            f"snapshot (initial_only, chunks of {chunk:,}): {snapshot.timed.rows_per_s:,.0f} rows/s",
            flush=True,
        )
    return e2e, source_rate, (before, after), Latencies(latency, pg_latency), snapshot


def snapshot_main(ctx: RuntimeContext, settings: Settings, dbs: Databases, rows: int, chunk: int) -> None:
    """``--snapshot-only``: the snapshot beside MariaDB ``SELECT`` -> PostgreSQL ``COPY`` alone."""
    baseline = db_baselines.mariadb_to_postgres(dbs.mariadb, dbs.pg_target)
    print(f"MariaDB SELECT -> PostgreSQL COPY alone: {baseline.rows_per_s:,.0f} rows/s", flush=True)
    snap = asyncio.run(snapshot_alone(ctx, settings, dbs, rows, chunk))
    ratio = snap.timed.rows_per_s / baseline.rows_per_s
    print(
        f"snapshot (initial_only, chunks of {chunk:,}): {snap.timed.rows_per_s:,.0f} rows/s "
        f"({rows:,} rows in {snap.timed.seconds:.1f} s; first row after {snap.first_row_s:.1f} s), "
        f"{ratio:.2f} of the databases' own path"
    )
    print(
        f"bench cdc-snapshot: snapshot_rows_per_s={snap.timed.rows_per_s:.0f} "
        f"select_copy_rows_per_s={baseline.rows_per_s:.0f} ratio_snapshot_vs_select_copy={ratio:.3f} "
        f"first_row_s={snap.first_row_s:.1f} rows={rows} snapshot_chunk_rows={chunk}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cdc_bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=int, default=1_000_000, help="rows updated once each (default 1,000,000)"
    )
    parser.add_argument(
        "--snapshot-chunk", type=int, default=CHUNK_SIZE,
        help=f"snapshot.chunk.size of the snapshot run (default the connector's, {CHUNK_SIZE:,})",
    )  # fmt: skip
    parser.add_argument(
        "--snapshot-only", action="store_true", help="the snapshot run alone, beside SELECT -> COPY"
    )
    args = parser.parse_args(argv)
    rows: int = args.rows
    run = uuid.uuid4().hex[:8]
    settings = settings_or_exit().model_copy(
        update={"task_queue": f"bench-cdc-{run}", "store_schema": f"bench_{run}"}
    )
    dbs = make_databases(settings, run)
    ctx = RuntimeContext(settings.runtime)
    try:
        print(
            f"bench cdc: {rows:,} rows of ~100 bytes updated once each; "
            f"databases bench_{run}, bench_dst_{run}"
        )
        db_baselines.fill_mariadb(dbs.mariadb, rows)
        db_latency.create_table(dbs.mariadb)
        ctx.spark  # noqa: B018 - start Spark before timing anything
        if args.snapshot_only:
            snapshot_main(ctx, settings, dbs, rows, args.snapshot_chunk)
            return
        e2e, source_rate, (before, after), latencies, snap = asyncio.run(
            pipeline(ctx, settings, dbs, rows, args.snapshot_chunk)
        )
        lat, pg_lat = latencies.mariadb, latencies.postgres
        raw = read_binlog(dbs.mariadb, before, after)
    finally:
        ctx.close()
        drop_databases(settings, dbs)
    print(
        f"raw binlog read (pymysqlreplication alone, {before[0]}:{before[1]} -> {after[0]}:{after[1]}): "
        f"{raw.rows:,} row changes in {raw.seconds:.1f} s, {raw.rows_per_s:,.0f} events/s"
    )
    print(
        f"latency at 1,000 changes/s (MariaDB commit -> visible in PostgreSQL): p50 {lat.p50_ms:.0f} ms, "
        f"p99 {lat.p99_ms:.0f} ms, max {lat.max_ms:.0f} ms over {lat.rows:,} rows "
        f"(observer polls every {lat.poll_ms:.0f} ms; {lat.unseen} never seen)"
    )
    print(
        f"latency at 1,000 changes/s (PostgreSQL commit -> visible in PostgreSQL, postgres-cdc): "
        f"p50 {pg_lat.p50_ms:.0f} ms, p99 {pg_lat.p99_ms:.0f} ms, max {pg_lat.max_ms:.0f} ms over "
        f"{pg_lat.rows:,} rows ({pg_lat.unseen} never seen)"
    )
    print(
        f"snapshot rows/s (snapshot.mode=initial_only, MariaDB -> RocketMQ -> PostgreSQL, chunks of "
        f"{snap.chunk:,}): {snap.timed.rows_per_s:,.0f} rows/s ({snap.timed.rows:,} rows in "
        f"{snap.timed.seconds:.1f} s from the connectors' creation; first row after {snap.first_row_s:.1f} s)"
    )
    if e2e.rows_per_s < LATENCY_RATE:
        print(
            f"note: the pipeline moved {e2e.rows_per_s:,.0f} events/s, less than the latency load's "
            f"{LATENCY_RATE:,}/s: the latency figures measure a growing backlog, not a steady state"
        )
    ratio = e2e.rows_per_s / raw.rows_per_s if raw.rows_per_s else float("nan")
    print(f"\n  {'path':<44} {'events/s':>10}")
    print(
        f"  {'MariaDB -> RocketMQ -> PostgreSQL (e2e)':<44} {e2e.rows_per_s:>10,.0f}"
        f"   {ratio:.2f} of the binlog read"
    )
    print(f"  {'binlog read alone (pymysqlreplication)':<44} {raw.rows_per_s:>10,.0f}")
    print(f"  {'source UPDATE rate (MariaDB alone)':<44} {source_rate.rows_per_s:>10,.0f}")
    print(f"  {'snapshot, rows/s (initial_only)':<44} {snap.timed.rows_per_s:>10,.0f}")
    print(
        f"bench cdc: e2e_events_per_s={e2e.rows_per_s:.0f} binlog_read_events_per_s={raw.rows_per_s:.0f} "
        f"ratio_e2e_vs_binlog_read={ratio:.3f} source_update_rows_per_s={source_rate.rows_per_s:.0f} "
        f"ratio_e2e_vs_source_update={e2e.rows_per_s / source_rate.rows_per_s:.3f} "
        f"latency_p50_ms={lat.p50_ms:.0f} latency_p99_ms={lat.p99_ms:.0f} latency_max_ms={lat.max_ms:.0f} "
        f"latency_rows={lat.rows} latency_unseen_rows={lat.unseen} pg_latency_p50_ms={pg_lat.p50_ms:.0f} "
        f"pg_latency_p99_ms={pg_lat.p99_ms:.0f} pg_latency_max_ms={pg_lat.max_ms:.0f} "
        f"pg_latency_unseen_rows={pg_lat.unseen} binlog_rows={raw.rows} rows={rows} "
        f"snapshot_rows_per_s={snap.timed.rows_per_s:.0f} snapshot_chunk_rows={snap.chunk}"
    )


if __name__ == "__main__":
    main()
