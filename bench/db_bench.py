"""`make bench-db`: database pipelines end to end, next to the limits they are measured against.

Printed side by side in one run against the local stack (a benchmark: nothing is asserted):
1. end to end, rows/s: ROWS rows of about 100 bytes (``bench_rows``) copied by ``jdbc-source``
   (mode ``incrementing`` on ``id``) -> RocketMQ -> ``jdbc-sink`` (insert, ``auto.create``), timed
   from connector creation until the target holds every row; once from MariaDB and once from
   PostgreSQL, both into PostgreSQL. A first, smaller copy warms the Spark JVM and Python workers up
   (a long-running worker is past that), as in ``make bench-pipeline``;
2. the physical limit: the same rows through the databases' own bulk paths alone
   (``bench.db_baselines``: COPY out into COPY in; SELECT into LOAD DATA; MariaDB SELECT into COPY);
3. Sluice's raw RocketMQ round trip (batched send, then bulk pull) of pipeline-shaped messages
   (``bench.pipeline_bench.raw_rates``);
4. latency p50/p99, row committed in MariaDB -> row visible in PostgreSQL, at a steady 1,000
   rows/s (``bench.db_latency``);
5. the side-by-side job with RocketMQ Connect (``bench.db_job``): min(ROWS, 200,000) rows with
   Confluent JDBC configs and JSON converters with schemas, upsert on ``id``: rows/s, first-row
   seconds and CPU-seconds, the target checked equal to the source; then the same job as one
   direct pipeline (RocketMQ Connect's DirectTask keys, no topic between the databases), its ratio
   to the job through RocketMQ printed beside it;
6. the fixed cost of a batch (``bench.batch_cost``): one batch of 1 and of 1,500 rows of the job's
   table, each side (source: read, convert, send; sink: pull, decode, write, commit), median ms.

ROWS: first argument or ``BENCH_ROWS`` (default 1,000,000; e.g. ``make bench-db BENCH_ROWS=200000``).
The last line is the summary; every figure names its unit.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from sqlalchemy.engine import URL

from bench import batch_cost, db_baselines, db_job, db_latency
from bench.bench_databases import Databases, drop_databases, make_databases
from bench.db_baselines import BENCH_TABLE, Timed, count_rows, pg_dsn
from bench.pipeline_bench import RawRates, raw_rates
from sluice.activities.context import RuntimeContext
from sluice.worker.client import SluiceClient
from sluice.worker.main import build_worker, store_listener
from sluice.worker.settings import Settings, settings_or_exit
from sluice.worker.temporal_client import connect

ROWS = 1_000_000  # main() sets it from the first argument or BENCH_ROWS (not at import: tests import this)
WARM_UP_ROWS = 200_000
JOB_ROWS = 200_000
WARM_UP_TABLE = "bench_warm_up"
# Records keep their table's schema through RocketMQ in Connect's JSON envelope, as in the demo.
CONVERTER = {"value.converter": "json", "value.converter.schemas.enable": "true"}


def source_config(dbs: Databases, source: URL, table: str, name: str, poll_ms: int = 100) -> dict[str, str]:
    return {
        "connector.class": "jdbc-source",
        "connection.url": dbs.jdbc(source),
        "connection.user": source.username or "",
        "connection.password": source.password or "",
        "mode": "incrementing",
        "incrementing.column.name": "id",
        "table.whitelist": table,
        "topic.prefix": f"bench-{name}-",
        "batch.max.rows": "100000",
        "poll.interval.ms": str(poll_ms),
        **CONVERTER,
    }


def sink_config(
    dbs: Databases, table: str, target_table: str, name: str, poll_ms: int = 100
) -> dict[str, str]:
    return {
        "connector.class": "jdbc-sink",
        "connection.url": dbs.jdbc(dbs.pg_target),
        "connection.user": dbs.pg_target.username or "",
        "topics": f"bench-{name}-{table}",
        "insert.mode": "insert",
        "pk.mode": "record_value",
        "pk.fields": "id",
        "auto.create": "true",
        "table.name.format": target_table,
        "batch.max.records": "100000",
        "poll.interval.ms": str(poll_ms),
        **CONVERTER,
    }


async def copy_through(
    sluice: SluiceClient, dbs: Databases, source: URL, rows: int, table: str = BENCH_TABLE
) -> Timed:
    """Create a source and a sink for ``table`` of ``source``; seconds until the target has all rows."""
    name = uuid.uuid4().hex[:8]
    target_table = f"copy_{name}"
    t0 = time.perf_counter()
    await sluice.create(f"bench-dst-{name}", sink_config(dbs, table, target_table, name))
    await sluice.create(f"bench-src-{name}", source_config(dbs, source, table, name))
    dsn = pg_dsn(dbs.pg_target)
    while (done := await asyncio.to_thread(count_rows, dsn, target_table)) < rows:
        await asyncio.sleep(0.25)
    elapsed = time.perf_counter() - t0
    for connector in (f"bench-src-{name}", f"bench-dst-{name}"):
        await sluice.delete(connector)
    return Timed(done, elapsed)


async def latency_through(sluice: SluiceClient, dbs: Databases) -> db_latency.Latency:
    name = uuid.uuid4().hex[:8]
    target_table = f"latency_{name}"
    db_latency.create_table(dbs.mariadb)
    table = db_latency.LATENCY_TABLE
    await sluice.create(f"bench-lat-dst-{name}", sink_config(dbs, table, target_table, name, poll_ms=50))
    await sluice.create(f"bench-lat-src-{name}", source_config(dbs, dbs.mariadb, table, name, poll_ms=50))
    result = await asyncio.to_thread(db_latency.measure, dbs.mariadb, pg_dsn(dbs.pg_target), target_table)
    for connector in (f"bench-lat-src-{name}", f"bench-lat-dst-{name}"):
        await sluice.delete(connector)
    return result


@dataclass(frozen=True)
class PipelineRuns:
    maria: Timed
    pg: Timed
    latency: db_latency.Latency
    job: db_job.JobRun
    direct: db_job.JobRun


async def pipelines(ctx: RuntimeContext, settings: Settings, dbs: Databases) -> PipelineRuns:
    """Warm-up copy, then MariaDB -> PostgreSQL and PostgreSQL -> PostgreSQL, the latency run and
    the side-by-side job, in one worker."""
    client = await connect(settings.temporal_address, settings.temporal_namespace)
    with ThreadPoolExecutor(max_workers=8) as pool, store_listener(ctx):
        async with build_worker(client, settings, ctx, pool):
            sluice = SluiceClient(client, settings.task_queue)
            warm = await copy_through(sluice, dbs, dbs.mariadb, WARM_UP_ROWS, WARM_UP_TABLE)
            print(f"warm-up copy (MariaDB, {warm.rows:,} rows): {warm.seconds:.1f} s", flush=True)
            maria = await copy_through(sluice, dbs, dbs.mariadb, ROWS)
            print(f"e2e MariaDB -> RocketMQ -> PostgreSQL: {maria.rows_per_s:,.0f} rows/s", flush=True)
            pg = await copy_through(sluice, dbs, dbs.pg_source, ROWS)
            print(f"e2e PostgreSQL -> RocketMQ -> PostgreSQL: {pg.rows_per_s:,.0f} rows/s", flush=True)
            latency = await latency_through(sluice, dbs)
            job = await db_job.run_job(sluice, dbs.mariadb, dbs.pg_target, JOB_ROWS)
            print(
                f"side-by-side job (Confluent configs, {job.rows:,} rows): {job.rows_per_s:,.0f} rows/s, "
                f"first row after {job.first_row_s:.1f} s, {job.cpu_s:.0f} CPU-seconds; target equal",
                flush=True,
            )
            direct = await db_job.run_direct_job(sluice, dbs.mariadb, dbs.pg_target, JOB_ROWS)
            print(
                f"the same job direct (no topic, {direct.rows:,} rows): {direct.rows_per_s:,.0f} rows/s, "
                f"first row after {direct.first_row_s:.1f} s, {direct.cpu_s:.0f} CPU-seconds; target equal",
                flush=True,
            )
    return PipelineRuns(maria, pg, latency, job, direct)


def _timed(label: str, fn: Callable[[], Timed]) -> Timed:
    result = fn()
    print(
        f"{label}: {result.rows:,} rows in {result.seconds:.1f} s, {result.rows_per_s:,.0f} rows/s",
        flush=True,
    )
    return result


def main() -> None:
    global ROWS, WARM_UP_ROWS, JOB_ROWS
    ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("BENCH_ROWS") or 1_000_000)
    WARM_UP_ROWS = JOB_ROWS = min(ROWS, 200_000)
    run = uuid.uuid4().hex[:8]
    settings = settings_or_exit().model_copy(
        update={"task_queue": f"bench-db-{run}", "store_schema": f"bench_{run}"}
    )
    dbs = make_databases(settings, run)
    ctx = RuntimeContext(settings.runtime)
    try:
        print(
            f"bench db: {ROWS:,} rows of ~100 bytes; databases bench_{run}, bench_src_{run}, bench_dst_{run}"
        )
        db_baselines.fill_mariadb(dbs.mariadb, ROWS)
        db_baselines.fill_mariadb(dbs.mariadb, WARM_UP_ROWS, WARM_UP_TABLE)
        db_baselines.fill_postgres(dbs.pg_source, ROWS)
        db_job.fill(dbs.mariadb, JOB_ROWS)
        pg_copy = _timed(
            "db only, PostgreSQL COPY out -> COPY in",
            lambda: db_baselines.postgres_copy(dbs.pg_source, dbs.pg_target),
        )
        maria_load = _timed(
            "db only, MariaDB SELECT -> LOAD DATA",
            lambda: db_baselines.mariadb_select_load(dbs.mariadb, dbs.mariadb),
        )
        maria_pg = _timed(
            "db only, MariaDB SELECT -> PostgreSQL COPY in",
            lambda: db_baselines.mariadb_to_postgres(dbs.mariadb, dbs.pg_target),
        )
        ctx.spark  # noqa: B018 - start Spark before timing anything
        raw = raw_rates(ctx, settings.stack, min(ROWS, 500_000))
        trip = RawRates.round_trip(raw.send, raw.bulk_pull)
        print(
            f"raw RocketMQ (Sluice's client): send {raw.send:,.0f} msgs/s, pull {raw.bulk_pull:,.0f} msgs/s, "
            f"send+pull {trip:,.0f} msgs/s",
            flush=True,
        )
        runs = asyncio.run(pipelines(ctx, settings, dbs))
        maria, pg, lat, job, direct = runs.maria, runs.pg, runs.latency, runs.job, runs.direct
        costs = []  # the job's table must hold the batches (ROWS below ~10,000 leaves them out)
        if batch_cost.rows_needed(batch_cost.SIZES) <= JOB_ROWS:
            costs = batch_cost.batch_costs(ctx, dbs)
            batch_cost.report(costs)
    finally:
        ctx.close()
        drop_databases(settings, dbs)
    print(
        f"latency at 1,000 rows/s (MariaDB commit -> visible in PostgreSQL): p50 {lat.p50_ms:.0f} ms, "
        f"p99 {lat.p99_ms:.0f} ms, max {lat.max_ms:.0f} ms over {lat.rows:,} rows "
        f"(observer polls every {lat.poll_ms:.0f} ms; {lat.unseen} never seen)"
    )
    db_only = pg_copy.rows_per_s
    rows = [
        (
            "MariaDB -> RocketMQ -> PostgreSQL",
            maria.rows_per_s,
            maria_pg.rows_per_s,
            "MariaDB SELECT -> COPY in",
        ),
        ("PostgreSQL -> RocketMQ -> PostgreSQL", pg.rows_per_s, db_only, "COPY out -> COPY in"),
    ]
    print(f"\n  {'path':<38} {'rows/s':>10}   vs the databases' own path")
    for label, rate, limit, path in rows:
        print(f"  {label:<38} {rate:>10,.0f}   {rate / limit:.2f} of {path} ({limit:,.0f} rows/s)")
    print(f"  {'MariaDB SELECT -> LOAD DATA (db only)':<38} {maria_load.rows_per_s:>10,.0f}")
    print(f"  {'RocketMQ send+pull (msgs/s)':<38} {trip:>10,.0f}")
    print(
        f"bench db: e2e_mariadb_rows_per_s={maria.rows_per_s:.0f} e2e_pg_rows_per_s={pg.rows_per_s:.0f} "
        f"db_only_rows_per_s={db_only:.0f} db_only_mariadb_to_pg_rows_per_s={maria_pg.rows_per_s:.0f} "
        f"db_only_mariadb_rows_per_s={maria_load.rows_per_s:.0f} rocketmq_msgs_per_s={trip:.0f} "
        f"p50_ms={lat.p50_ms:.0f} p99_ms={lat.p99_ms:.0f} "
        f"ratio_vs_db_only={pg.rows_per_s / db_only:.3f} "
        f"ratio_mariadb_vs_db_only={maria.rows_per_s / maria_pg.rows_per_s:.3f} "
        f"ratio_pg_vs_rocketmq={pg.rows_per_s / trip:.3f} job_rows_per_s={job.rows_per_s:.0f} "
        f"job_first_row_s={job.first_row_s:.1f} job_cpu_s={job.cpu_s:.0f} "
        f"direct_job_rows_per_s={direct.rows_per_s:.0f} direct_job_first_row_s={direct.first_row_s:.1f} "
        f"direct_job_cpu_s={direct.cpu_s:.0f} ratio_direct_vs_job={direct.rows_per_s / job.rows_per_s:.2f} "
        f"{batch_cost.summary(costs)} "
        f"rows={ROWS}"
    )


if __name__ == "__main__":
    main()
