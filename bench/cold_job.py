"""`make bench-cold-job`: the side-by-side job on a worker started as a user starts one.

``sluice worker`` is started as its own process and the job's connectors are created as soon as it
says it is ready (``sluice worker ready``), so the first batches pay whatever a new worker pays:
its Spark session still starting, the first jobs' JIT. Then the same job runs again on that worker,
warm, as the baseline measured in the same run. Both for the job through RocketMQ (Confluent's
configs, ``bench.db_job``) and as a direct pipeline (no topic), each on a worker of its own.

Printed: rows/s and the seconds from creating the connectors to the first row in PostgreSQL, cold
and warm, and their ratios. Nothing is asserted; the target is checked equal to the source after
each run. Usage: ``python -m bench.cold_job [ROWS]`` (default 200,000). The last line is the summary.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from sqlalchemy.engine import URL

from bench import db_job
from bench.bench_databases import drop_databases, make_databases
from sluice.worker.client import SluiceClient
from sluice.worker.settings import Settings, settings_or_exit

Job = Callable[[SluiceClient, URL, URL, int], Awaitable[db_job.JobRun]]


def _started_worker(settings: Settings, log: Path) -> subprocess.Popen[bytes]:
    """``sluice worker`` on the run's task queue and store schema, once it says it is ready."""
    env = {
        **os.environ,
        "SLUICE_TASK_QUEUE": settings.task_queue,
        "SLUICE_STORE_SCHEMA": settings.store_schema,
    }
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sluice.worker.cli", "worker"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    deadline = time.monotonic() + 180
    while b"sluice worker ready" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"bench cold-job: the worker did not start:\n{log.read_text()[-2000:]}")
        time.sleep(0.1)
    return proc


async def _cold_then_warm(
    settings: Settings, job: Job, source: URL, target: URL, rows: int, log: Path
) -> tuple[db_job.JobRun, db_job.JobRun]:
    proc = _started_worker(settings, log)
    try:
        sluice = await SluiceClient.connect(settings.temporal_address, task_queue=settings.task_queue)
        return await job(sluice, source, target, rows), await job(sluice, source, target, rows)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    run = uuid.uuid4().hex[:8]
    base = settings_or_exit()
    dbs = make_databases(base.model_copy(update={"store_schema": f"bench_{run}"}), run)
    log = Path(f"/tmp/bench-cold-job-{run}.log")
    figures = {}
    try:
        db_job.fill(dbs.mariadb, rows)
        for label, job in (("job", db_job.run_job), ("direct", db_job.run_direct_job)):
            settings = base.model_copy(
                update={"task_queue": f"bench-cold-{label}-{run}", "store_schema": f"bench_{run}"}
            )
            cold, warm = asyncio.run(_cold_then_warm(settings, job, dbs.mariadb, dbs.pg_target, rows, log))
            print(
                f"{label}: cold {cold.rows_per_s:,.0f} rows/s, first row after {cold.first_row_s:.1f} s; "
                f"warm {warm.rows_per_s:,.0f} rows/s, first row after {warm.first_row_s:.1f} s; "
                "targets equal",
                flush=True,
            )
            figures[label] = (cold, warm)
    finally:
        drop_databases(base, dbs)
    keys = []
    for label, (cold, warm) in figures.items():
        keys += [
            f"{label}_cold_first_row_s={cold.first_row_s:.1f}",
            f"{label}_cold_rows_per_s={cold.rows_per_s:.0f}",
            f"{label}_warm_first_row_s={warm.first_row_s:.1f}",
            f"{label}_warm_rows_per_s={warm.rows_per_s:.0f}",
            f"{label}_cold_vs_warm_ratio={cold.rows_per_s / warm.rows_per_s:.2f}",
        ]
    print(f"bench cold-job: {' '.join(keys)} rows={rows}")


if __name__ == "__main__":
    main()
