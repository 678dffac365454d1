"""Where a database pipeline's time goes: one batch of the bench table, stage by stage (a benchmark).

For ROWS rows of ``bench_rows`` (``bench.db_baselines``) in MariaDB and in PostgreSQL, each line
is the wall time of one stage *including every stage before it* (Spark runs them fused), so the
difference between two lines is what the later stage costs:

1. ``read``: ``JdbcSourceTask.read`` bound by ``source_frame``, computed by Spark's noop sink;
2. ``+convert``: the read made in this process (``SourceRead.to_table``, as a split's task reads
   it) and its messages by the JSON converter's Arrow encoder (Connect envelope, schemas on);
3. ``+send``: the source runner's whole batch (read, convert, send to RocketMQ, sorted);
4. ``pull+decode``: the sink side's pull of exactly those messages, decoded to records in Arrow;
5. ``+write``: the sink's whole batch (pull, decode, shape, COPY into PostgreSQL, commit).

Usage: ``python -m bench.db_profile [rows]`` (default 200,000); it prints rows/s per stage.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from bench import batch_cost, db_baselines
from bench.bench_databases import Databases, drop_databases, make_databases
from bench.db_bench import sink_config, source_config
from sluice.activities.context import RuntimeContext
from sluice.activities.spark_binding import source_frame
from sluice.connectors.converters import TOMBSTONE_PROPERTY
from sluice.connectors.model import PartitionRange
from sluice.connectors.sink_stages import envelope_prefixes_of
from sluice.worker.settings import settings_or_exit


def _timed(label: str, rows: int, fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    seconds = time.perf_counter() - t0
    print(f"  {label:<14} {seconds:6.2f} s  {rows / seconds:>10,.0f} rows/s", flush=True)
    return seconds


def _noop(frame: Any) -> None:
    frame.write.format("noop").mode("overwrite").save()


def profile(ctx: RuntimeContext, dbs: Databases, source: Any, rows: int, label: str) -> None:
    name = uuid.uuid4().hex[:8]
    src_cfg = {**source_config(dbs, source, db_baselines.BENCH_TABLE, name), "name": f"prof-src-{name}"}
    dst_cfg = {
        **sink_config(dbs, db_baselines.BENCH_TABLE, f"copy_{name}", name),
        "name": f"prof-dst-{name}",
        "connection.password": dbs.pg_target.password or "",
    }
    src_cfg.pop("batch.max.rows", None)
    src_cfg["batch.max.records"] = dst_cfg["batch.max.records"] = str(rows)
    runner = batch_cost.source_runner(ctx, src_cfg)
    task, setup = runner.task, runner.setup
    part = db_baselines.BENCH_TABLE
    r = PartitionRange(part, task.earliest_positions()[part], task.latest_positions({})[part])
    spark = ctx.spark
    print(f"{label}: {rows:,} rows", flush=True)

    def records() -> Any:
        return source_frame(spark, task.read([r]))

    _noop(records())  # Python workers warm
    _timed("read", rows, lambda: _noop(records()))

    def converted() -> None:
        table = task.read([r]).to_table()
        setup.converter.arrow_encoder(table.schema).encode(table, {"sluice.batch": "x"})

    _timed("+convert", rows, converted)
    # Full-size batches: a task's first batch is small (planning.ramped_budget), not what this
    # profile measures (it once timed 1,000-row batches as if they held all the rows).
    runner.planned = sink_planned = 1
    plan, rerun = runner.next_plan()
    assert plan is not None
    _timed("+send", rows, lambda: runner.run(plan, rerun))
    runner.close()

    sink_runner = batch_cost.sink_runner(ctx, dst_cfg)
    sink_runner.planned = sink_planned
    sink_plan, sink_rerun = sink_runner.next_plan()
    assert sink_plan is not None and sink_plan.record_span == rows, sink_plan

    def pull_decode() -> None:  # as the sink's stages pull and decode a batch in the worker
        converter = sink_runner.setup.converter
        messages = sink_runner._pulled(sink_plan)
        found = envelope_prefixes_of(messages, keys=converter.key_envelopes, tombstone=TOMBSTONE_PROPERTY)
        converter.seen_prefixes.remember(found)
        converter.arrow_records().records(messages, barriers_once=True)

    _timed("pull+decode", rows, pull_decode)
    _timed("+write", rows, lambda: sink_runner.run(sink_plan, sink_rerun))
    sink_runner.close()


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    run = uuid.uuid4().hex[:8]
    settings = settings_or_exit().model_copy(update={"store_schema": f"bench_{run}"})
    dbs = make_databases(settings, run)
    ctx = RuntimeContext(settings.runtime)
    try:
        db_baselines.fill_mariadb(dbs.mariadb, rows)
        db_baselines.fill_postgres(dbs.pg_source, rows)
        profile(ctx, dbs, dbs.mariadb, rows, "MariaDB -> RocketMQ -> PostgreSQL")
        profile(ctx, dbs, dbs.pg_source, rows, "PostgreSQL -> RocketMQ -> PostgreSQL")
    finally:
        ctx.close()
        drop_databases(settings, dbs)


if __name__ == "__main__":
    main()
