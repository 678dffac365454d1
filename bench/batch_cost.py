"""What one micro-batch costs each side at a given size: the fixed cost a batch pays (a benchmark).

The side-by-side job's table and configs (Confluent JDBC keys, JSON converters with schemas,
upsert into PostgreSQL): for each size, one warm-up batch then ``RUNS`` batches of exactly that
many rows through the source runner (read, convert, send to RocketMQ, commit) and as many through
the sink runner (pull, decode, write, commit), each timed alone; the median is printed. At 1 row a
batch is all fixed cost (plan building, Spark job scheduling, Python workers, store commits); the
difference to 1,500 rows is what the rows themselves cost.

Usage: ``python -m bench.batch_cost [size ...]`` (default 1 and 1,500); ``bench.db_bench`` runs it
too. Last line: ``bench batch_cost: source_1_rows_ms=… sink_1_rows_ms=… …``.
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench import db_job
from sluice.activities.context import RuntimeContext
from sluice.activities.runner import TaskSetup
from sluice.activities.sink_runner import SinkRunner
from sluice.activities.source_runner import SourceRunner
from sluice.connectors.api import open_sink_task, open_source_task
from sluice.connectors.converters import converter_for
from sluice.connectors.jdbc.sink import JdbcSinkConnector
from sluice.connectors.jdbc.source import JdbcSourceConnector
from sluice.connectors.transforms import build_chain
from sluice.worker.settings import settings_or_exit

if TYPE_CHECKING:
    from bench.bench_databases import Databases

SIZES = (1, 1_500)
RUNS = 5


@dataclass(frozen=True)
class BatchCost:
    """Median wall milliseconds of one batch of ``rows`` rows, per side."""

    rows: int
    source_ms: float
    sink_ms: float


def rows_needed(sizes: Sequence[int], runs: int = RUNS) -> int:
    """Source rows the measurement consumes (a warm-up batch and ``runs`` batches per size)."""
    return sum(size * (runs + 1) for size in sizes)


def batch_costs(
    ctx: RuntimeContext, dbs: Databases, sizes: Sequence[int] = SIZES, runs: int = RUNS
) -> list[BatchCost]:
    """Each size's batch costs, on the job table of ``dbs.mariadb`` (``db_job.fill``, at least
    ``rows_needed`` rows) copied into a new PostgreSQL table."""
    name = uuid.uuid4().hex[:8]
    src_cfg, dst_cfg = db_job.confluent_configs(dbs.mariadb, dbs.pg_target, name)
    source = source_runner(ctx, {**src_cfg, "name": f"cost-src-{name}"})
    sink = sink_runner(ctx, {**dst_cfg, "name": f"cost-dst-{name}"})
    costs = []
    try:
        for size in sizes:
            source.config["batch.max.records"] = str(size)
            sink.config["batch.max.records"] = str(size)
            source_s, sink_s = [], []
            for _ in range(runs + 1):
                source_s.append(_one_batch(source))
                sink_s.append(_one_batch(sink))
            # the first batch of each size warms its paths (and the first of all, Spark's)
            costs.append(
                BatchCost(size, statistics.median(source_s[1:]) * 1000, statistics.median(sink_s[1:]) * 1000)
            )
    finally:
        source.close()
        sink.close()
    return costs


def _one_batch(runner: SourceRunner | SinkRunner) -> float:
    runner.planned = 1  # full-size batches: a task's first one is small (planning.ramped_budget)
    plan, rerun = runner.next_plan()
    if plan is None:
        raise RuntimeError("batch cost: nothing to plan (the job table is too short?)")
    t0 = time.perf_counter()
    runner.run(plan, rerun)
    return time.perf_counter() - t0


def source_runner(ctx: RuntimeContext, config: dict[str, str]) -> SourceRunner:
    """A jdbc-source task's runner as the worker builds it (``config`` names it), topics made."""
    parsed = JdbcSourceConnector().parse(config)
    setup = TaskSetup(ctx, config["name"], parsed, converter_for(parsed), build_chain(parsed))
    runner = SourceRunner(setup, open_source_task(JdbcSourceConnector, config, 0))
    runner.ensure_topic()
    return runner


def sink_runner(ctx: RuntimeContext, config: dict[str, str]) -> SinkRunner:
    """A jdbc-sink task's runner as the worker builds it (positions committed with the data)."""
    parsed = JdbcSinkConnector().parse(config)
    setup = TaskSetup(ctx, config["name"], parsed, converter_for(parsed), build_chain(parsed))
    task = open_sink_task(JdbcSinkConnector, config, 0)
    task.bind_positions(ctx.store.committer())  # type: ignore[attr-defined]
    runner = SinkRunner(setup, task, 1)
    runner.ensure_topic()
    return runner


def summary(costs: Sequence[BatchCost]) -> str:
    """The benchmark's key=value fields (also part of ``bench db``'s summary)."""
    return " ".join(
        f"source_{c.rows}_rows_ms={c.source_ms:.0f} sink_{c.rows}_rows_ms={c.sink_ms:.0f}" for c in costs
    )


def report(costs: Sequence[BatchCost]) -> None:
    for c in costs:
        print(
            f"one batch of {c.rows:,} rows: source {c.source_ms:,.0f} ms, sink {c.sink_ms:,.0f} ms",
            flush=True,
        )


def main() -> None:
    from bench.bench_databases import drop_databases, make_databases

    sizes = [int(a) for a in sys.argv[1:]] or list(SIZES)
    run = uuid.uuid4().hex[:8]
    settings = settings_or_exit().model_copy(update={"store_schema": f"bench_{run}"})
    dbs = make_databases(settings, run)
    ctx = RuntimeContext(settings.runtime)
    try:
        db_job.fill(dbs.mariadb, rows_needed(sizes))
        costs = batch_costs(ctx, dbs, sizes)
    finally:
        ctx.close()
        drop_databases(settings, dbs)
    report(costs)
    print(f"bench batch_cost: {summary(costs)}")


if __name__ == "__main__":
    main()
