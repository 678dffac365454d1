"""What one change-capture batch costs each side: MariaDB binlog → RocketMQ → PostgreSQL (a benchmark).

``make bench-cdc`` times the whole pipeline, where the source's and the sink's batches overlap and
the broker's and databases' timing moves the figure by ±20 % from run to run. This times one batch
per side, alone and warm, through the runners the worker uses (``bench-cdc``'s configs: Debezium's
MySQL connector keys, JSON with schemas, the CDC replica sink with ``ExtractNewRecordState``):

1. ``source_plan``: the source task's planning of a batch of EVENTS updates (the binlog read and
   decoded into change records; ``mysql-cdc`` reads it ahead while the previous batch runs, so in a
   steady stream this is off the critical path — here, one burst, it is not);
2. ``source_run``: that batch's Spark job: records, Connect envelopes, the ordered send to RocketMQ;
3. ``sink_run``: the sink's batch of those messages: pull, decode, unwrap, upsert into PostgreSQL
   with the positions.

Before the timed batch, two batches of 10 updates warm both sides up (Spark's first jobs, Python
workers). The target is then checked equal to the source, row by row.

Usage: ``python -m bench.cdc_batch [events]`` (default 50,000). Last line: ``bench cdc_batch: …``.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from bench import db_baselines, db_job
from bench.bench_databases import drop_databases, make_databases
from bench.cdc_bench import UPDATE_CHUNK, _execute, configs
from bench.db_baselines import BENCH_TABLE
from sluice.activities.context import RuntimeContext
from sluice.activities.runner import TaskSetup
from sluice.activities.sink_runner import SinkRunner
from sluice.activities.source_runner import SourceRunner
from sluice.connectors.api import open_sink_task, open_source_task
from sluice.connectors.cdc.mysql.source import MySqlCdcConnector
from sluice.connectors.converters import converter_for
from sluice.connectors.jdbc.sink import JdbcSinkConnector
from sluice.connectors.transforms import build_chain
from sluice.worker.settings import settings_or_exit


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _batch(runner: SourceRunner | SinkRunner) -> tuple[float, float, int]:
    """Plan and run one batch: (plan seconds, run seconds, records)."""
    runner.planned = 1  # full-size batches (a task's first one is small: planning.ramped_budget)
    (plan, rerun), plan_s = _timed(runner.next_plan)
    if plan is None:
        return plan_s, 0.0, 0
    count, run_s = _timed(lambda: runner.run(plan, rerun))
    return plan_s, run_s, int(count)


def _update(url: Any, low: int, high: int) -> None:
    for start in range(low, high + 1, UPDATE_CHUNK):
        end = min(high, start + UPDATE_CHUNK - 1)
        _execute(url, f"UPDATE {BENCH_TABLE} SET k = k + 1 WHERE id BETWEEN %s AND %s", (start, end))


def main() -> None:
    events = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    run = uuid.uuid4().hex[:8]
    settings = settings_or_exit().model_copy(update={"store_schema": f"bench_{run}"})
    dbs = make_databases(settings, run)
    ctx = RuntimeContext(settings.runtime)
    print(f"bench cdc_batch: one batch of {events:,} updates per side; databases {dbs.mariadb.database}",
          flush=True)  # fmt: skip
    try:
        db_baselines.fill_mariadb(dbs.mariadb, events)
        src, dst = configs(dbs, f"cb{run}", (BENCH_TABLE,))
        size = {"batch.max.records": str(events * 2)}
        src = {**src, **size, "name": f"cb-src-{run}"}
        dst = {**dst, **size, "name": f"cb-dst-{run}", "connection.password": dbs.pg_target.password or ""}
        parsed_src = MySqlCdcConnector().parse(src)
        source = SourceRunner(
            TaskSetup(ctx, src["name"], parsed_src, converter_for(parsed_src), build_chain(parsed_src)),
            open_source_task(MySqlCdcConnector, src, 0),
        )
        source.ensure_topic()
        parsed_dst = JdbcSinkConnector().parse(dst)
        task = open_sink_task(JdbcSinkConnector, dst, 0)
        task.bind_positions(ctx.store.committer())  # type: ignore[attr-defined]
        setup = TaskSetup(ctx, dst["name"], parsed_dst, converter_for(parsed_dst), build_chain(parsed_dst))
        sink = SinkRunner(setup, task, 1)
        try:
            _batch(source)  # capture starts here
            for _ in range(2):
                _update(dbs.mariadb, 1, 10)
                _batch(source)
                sink.ensure_topic()
                _batch(sink)
            _update(dbs.mariadb, 1, events)
            source_plan, source_run, sent = _batch(source)
            _, sink_run, written = _batch(sink)
        finally:
            source.close()
            sink.close()
        if sent != events or written != events:
            raise RuntimeError(f"bench cdc_batch: {sent:,} sent and {written:,} written, not {events:,} each")
        db_job.check_equal(dbs.mariadb, dbs.pg_target, BENCH_TABLE, BENCH_TABLE, db_baselines.COLUMNS)
        print(f"  source: planning {source_plan:.2f} s, its job {source_run:.2f} s", flush=True)
        print(f"  sink: its batch {sink_run:.2f} s", flush=True)
        print(
            f"bench cdc_batch: source_plan_s={source_plan:.2f} source_run_s={source_run:.2f} "
            f"sink_run_s={sink_run:.2f} events_per_s={events / (source_plan + source_run + sink_run):.0f} "
            f"events={events}",
            flush=True,
        )
    finally:
        ctx.close()
        drop_databases(settings, dbs)


if __name__ == "__main__":
    main()
