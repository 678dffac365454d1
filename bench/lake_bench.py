"""`make bench-lake`: records/s from a RocketMQ topic into Delta and Iceberg tables, next to Spark
writing the same rows to the same formats alone.

Printed side by side in one run against the local stack (a benchmark: nothing is asserted), for
Delta (``delta-sink``) and then Iceberg (``iceberg-sink``, a ``hadoop`` catalog):

1. end to end: RECORDS Kafka ``JsonConverter`` envelopes with schemas (an id, an account, a status,
   an amount, a note and a Debezium ``ZonedTimestamp``: about 590 bytes a message, the schema
   included) are produced into a fresh topic of 4 queues; then the sink is created (append mode,
   ``batch.max.records`` BATCH) in an in-process worker and timed from its creation until its
   table's commits hold every record. The wait reads the table's own metadata (the Delta log's
   commit infos, the Iceberg table's current metadata file), so it costs the two cores nothing a
   Spark query would. The table is then compared with the produced rows by content (Spark
   ``exceptAll`` both ways);
2. alone: the same rows as one cached DataFrame, appended by the same SparkSession (the worker's:
   one JVM) to a fresh table in batches of exactly the sizes the sink committed (its first batch is
   small: ``connectors.planning.ramped_budget``), timed over the appends only — the table is created
   before the clock starts, so the baseline is the stronger one; compared by content too.

A warm-up of both paths with a few thousand records comes first: the formats' classes load and
the JIT compiles once, as in a long-running worker.

Usage: ``python -m bench.lake_bench [--records N] [--batch B]`` (default 50,000 and 10,000;
``make bench-lake BENCH_ARGS='--records 200000'``). The last line is the summary; every key names
its unit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Final

from bench.db_baselines import Timed
from sluice.activities.context import RuntimeContext
from sluice.connectors.rocketmq.client import MessageQueue
from sluice.connectors.rocketmq.values import OutgoingMessage
from sluice.worker.client import SluiceClient
from sluice.worker.main import build_worker, store_listener
from sluice.worker.settings import Settings, settings_or_exit
from sluice.worker.temporal_client import connect
from sluice.workflows.types import TaskState

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DELTA: Final = "delta"
ICEBERG: Final = "iceberg"
WARM_UP_RECORDS: Final = 5_000
SEND_BATCH: Final = 1_000  # messages per send, round robin over the queues
#: The bench session's name for the Iceberg warehouse (each sink registers its own).
CATALOG: Final = "bench_lake"
NAMESPACE: Final = "bench"
_STATUSES: Final = ("new", "paid", "shipped", "delivered", "cancelled")
_EPOCH: Final = datetime(2026, 1, 1, tzinfo=UTC)
FIELDS: Final = [
    {"type": "int64", "optional": False, "field": "id"},
    {"type": "int64", "optional": False, "field": "account"},
    {"type": "string", "optional": False, "field": "status"},
    {"type": "float64", "optional": True, "field": "amount"},
    {"type": "string", "optional": True, "field": "note"},
    {
        "type": "string",
        "optional": False,
        "name": "io.debezium.time.ZonedTimestamp",
        "version": 1,
        "field": "at",
    },
]
JSON_VALUES: Final = {
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "true",
}
Record = tuple[int, int, str, float | None, str | None, datetime]


def record(i: int) -> Record:
    """Record ``i``: every field a function of ``i`` (nulls included), so both paths write the same rows."""
    amount = None if i % 17 == 0 else i * 0.25
    note = None if i % 5 == 0 else f"order {i} — gift wrap ✓ {'x' * (i % 23)}"
    return (i, i * 7919 % 100_003, _STATUSES[i % 5], amount, note, _EPOCH + timedelta(microseconds=i * 1_001))


def envelope(r: Record) -> bytes:
    """Kafka JsonConverter's ``{"schema", "payload"}`` of a record (the instant as Debezium writes it)."""
    payload = dict(zip(("id", "account", "status", "amount", "note"), r[:5], strict=True))
    payload["at"] = r[5].strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    schema = {"type": "struct", "fields": FIELDS, "optional": False, "name": "bench.order"}
    return json.dumps({"schema": schema, "payload": payload}, separators=(",", ":")).encode()


def produce(ctx: RuntimeContext, topic: str, count: int) -> None:
    """``count`` envelopes into a new topic of 4 queues, ``SEND_BATCH`` a send, round robin."""
    client = ctx.rocketmq
    client.create_topic(topic, queue_count=4)
    queues: list[MessageQueue] = []
    deadline = time.monotonic() + 60
    while not queues:  # the route shows up a moment after the topic is created
        try:
            queues = client.queues(topic)
        except Exception:  # noqa: BLE001 - no route yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    for n, start in enumerate(range(0, count, SEND_BATCH)):
        batch = [OutgoingMessage(envelope(record(i))) for i in range(start, min(start + SEND_BATCH, count))]
        client.send_batch(queues[n % len(queues)], batch)


def expected_frame(spark: SparkSession, count: int) -> DataFrame:
    """The produced rows as a cached DataFrame, typed as the sink types them (``ZonedTimestamp`` is
    a timestamp); materialised before any timing."""
    from pyspark.sql import types as T

    schema = T.StructType(
        [
            T.StructField("id", T.LongType(), False),
            T.StructField("account", T.LongType(), False),
            T.StructField("status", T.StringType(), False),
            T.StructField("amount", T.DoubleType(), True),
            T.StructField("note", T.StringType(), True),
            T.StructField("at", T.TimestampType(), False),
        ]
    )
    frame = spark.createDataFrame([record(i) for i in range(count)], schema).cache()
    frame.count()
    return frame


@dataclass
class LakeTarget:
    """One format's tables under the run's folder: where the sink and the alone path write, how
    far a table's commits got (from its metadata files), and how Spark reads it."""

    fmt: str
    root: Path

    def sink_config(self, table: str, topic: str, batch: int) -> dict[str, str]:
        common = {"topics": topic, "batch.max.records": str(batch), "poll.interval.ms": "100", **JSON_VALUES}
        if self.fmt == DELTA:
            return {"connector.class": "delta-sink", "delta.lake.tables.location": str(self.root),
                    "table.name.format": table, **common}  # fmt: skip
        return {"connector.class": "iceberg-sink", "iceberg.catalog.type": "hadoop",
                "iceberg.catalog.warehouse": str(self.root), "iceberg.tables": f"{NAMESPACE}.{table}",
                **common}  # fmt: skip

    def folder(self, table: str) -> Path:
        return self.root / table if self.fmt == DELTA else self.root / NAMESPACE / table

    def sql_name(self, table: str) -> str:
        return f"delta.`{self.folder(table)}`" if self.fmt == DELTA else f"{CATALOG}.{NAMESPACE}.{table}"

    def commits(self, table: str) -> list[int]:
        """Rows each commit added so far, oldest first (empty commits left out)."""
        try:
            return (
                delta_commits(self.folder(table))
                if self.fmt == DELTA
                else iceberg_commits(self.folder(table))
            )
        except (FileNotFoundError, json.JSONDecodeError):  # not created yet, or mid-write
            return []

    def create(self, spark: SparkSession, table: str, frame: DataFrame) -> None:
        empty = frame.limit(0)
        if self.fmt == DELTA:
            empty.write.format("delta").save(str(self.folder(table)))
        else:
            spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{NAMESPACE}")
            empty.writeTo(self.sql_name(table)).using("iceberg").create()

    def append(self, table: str, rows: DataFrame) -> None:
        if self.fmt == DELTA:
            rows.write.format("delta").mode("append").save(str(self.folder(table)))
        else:
            rows.writeTo(self.sql_name(table)).append()


def delta_commits(folder: Path) -> list[int]:
    """``numOutputRows`` of each commit in a Delta table's log (its JSON commit files)."""
    sizes = []
    for commit in sorted((folder / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            info = json.loads(line).get("commitInfo")
            if info is not None:
                sizes.append(int(info.get("operationMetrics", {}).get("numOutputRows", 0)))
    return [s for s in sizes if s]


def iceberg_commits(folder: Path) -> list[int]:
    """``added-records`` of each snapshot in an Iceberg table's newest metadata file (a ``hadoop``
    catalog writes ``v<N>.metadata.json``, N growing by one a commit)."""
    files = list((folder / "metadata").glob("v*.metadata.json"))
    if not files:
        return []
    newest = max(files, key=lambda f: int(f.name[1:].split(".")[0]))
    snapshots = json.loads(newest.read_text()).get("snapshots", [])
    sizes = [
        int(s["summary"].get("added-records", 0))
        for s in sorted(snapshots, key=lambda s: (s.get("sequence-number", 0), s["timestamp-ms"]))
    ]
    return [s for s in sizes if s]


def same_rows(spark: SparkSession, target: LakeTarget, table: str, expected: DataFrame) -> None:
    """Exit naming the difference unless the table holds exactly ``expected``'s rows (as a multiset)."""
    got = spark.table(target.sql_name(table)).select(*expected.columns)
    missing, extra = expected.exceptAll(got), got.exceptAll(expected)
    n_missing, n_extra = missing.count(), extra.count()
    if n_missing or n_extra:
        examples = [r.asDict() for r in missing.limit(2).collect()] + [
            r.asDict() for r in extra.limit(2).collect()
        ]
        raise SystemExit(f"bench lake: {target.fmt} table {table} differs from the produced rows: "
                         f"{n_missing:,} missing, {n_extra:,} extra; e.g. {examples}")  # fmt: skip


@dataclass(frozen=True)
class EndToEnd:
    timed: Timed  # from the sink's creation until its table's commits hold every record
    first_commit_s: float  # from its creation until its first rows were committed
    batches: list[int]  # rows of each commit, as the sink made them


async def end_to_end(
    sluice: SluiceClient, ctx: RuntimeContext, target: LakeTarget, count: int, batch: int, expected: DataFrame
) -> EndToEnd:
    """Produce ``count`` envelopes, then create the sink and time it until its table holds them."""
    name = uuid.uuid4().hex[:8]
    topic, table, connector = f"bench-lake-{name}", f"e2e_{name}", f"bench-{target.fmt}-{name}"
    await asyncio.to_thread(produce, ctx, topic, count)
    t0 = time.perf_counter()
    await sluice.create(connector, target.sink_config(table, topic, batch))
    first, next_status, deadline = 0.0, time.monotonic() + 5, time.monotonic() + max(600, count / 100)
    while sum(sizes := target.commits(table)) < count:
        if sizes and not first:
            first = time.perf_counter() - t0
        if time.monotonic() > next_status:
            next_status = time.monotonic() + 5
            status = await sluice.status(connector)
            failed = [f"task {t.task_id}: {t.error}" for t in status.tasks if t.state == TaskState.FAILED]
            if failed:
                raise SystemExit(f"bench lake: {connector} failed: {'; '.join(failed)}")
        if time.monotonic() > deadline:
            raise SystemExit(
                f"bench lake: {target.fmt} table {table} holds {sum(sizes):,} of {count:,} records"
            )
        await asyncio.sleep(0.1)
    elapsed = time.perf_counter() - t0
    await sluice.delete(connector)
    await asyncio.to_thread(same_rows, ctx.spark, target, table, expected)
    return EndToEnd(Timed(count, elapsed), first or elapsed, sizes)


def alone(spark: SparkSession, target: LakeTarget, expected: DataFrame, batches: Sequence[int]) -> Timed:
    """``expected`` appended to a fresh table in ``batches`` (by id ranges), timed over the appends."""
    from pyspark.sql import functions as F

    table = f"alone_{uuid.uuid4().hex[:8]}"
    target.create(spark, table, expected)
    slices, start = [], 0
    for size in batches:
        slices.append(expected.where((F.col("id") >= start) & (F.col("id") < start + size)))
        start += size
    t0 = time.perf_counter()
    for rows in slices:
        target.append(table, rows)
    elapsed = time.perf_counter() - t0
    same_rows(spark, target, table, expected)
    return Timed(sum(batches), elapsed)


@dataclass(frozen=True)
class Result:
    e2e: EndToEnd
    alone: Timed

    @property
    def ratio(self) -> float:
        return self.e2e.timed.rows_per_s / self.alone.rows_per_s


async def run(
    ctx: RuntimeContext, settings: Settings, work: Path, records: int, batch: int
) -> dict[str, Result]:
    """Warm-up, then per format: end to end, then alone with the sink's batch sizes; one worker."""
    spark = ctx.spark
    for key, value in {"": "org.apache.iceberg.spark.SparkCatalog", ".type": "hadoop",
                       ".warehouse": str(work / ICEBERG), ".cache-enabled": "false"}.items():  # fmt: skip
        spark.conf.set(f"spark.sql.catalog.{CATALOG}{key}", value)
    targets = [LakeTarget(DELTA, work / DELTA), LakeTarget(ICEBERG, work / ICEBERG)]
    client = await connect(settings.temporal_address, settings.temporal_namespace)
    results: dict[str, Result] = {}
    with ThreadPoolExecutor(max_workers=8) as pool, store_listener(ctx):
        async with build_worker(client, settings, ctx, pool):
            sluice = SluiceClient(client, settings.task_queue)
            warm = await asyncio.to_thread(expected_frame, spark, min(WARM_UP_RECORDS, records))
            for target in targets:
                e2e = await end_to_end(sluice, ctx, target, warm.count(), batch, warm)
                await asyncio.to_thread(alone, spark, target, warm, e2e.batches)
                print(
                    f"warm-up {target.fmt}: {warm.count():,} records in {e2e.timed.seconds:.1f} s", flush=True
                )
            warm.unpersist()
            expected = await asyncio.to_thread(expected_frame, spark, records)
            for target in targets:
                e2e = await end_to_end(sluice, ctx, target, records, batch, expected)
                print(f"{target.fmt} end to end: {records:,} records in {e2e.timed.seconds:.1f} s "
                      f"({e2e.timed.rows_per_s:,.0f} records/s; first rows committed after "
                      f"{e2e.first_commit_s:.1f} s; {len(e2e.batches)} commits: {describe(e2e.batches)})",
                      flush=True)  # fmt: skip
                solo = await asyncio.to_thread(alone, spark, target, expected, e2e.batches)
                print(f"{target.fmt} alone: {records:,} records in {solo.seconds:.1f} s "
                      f"({solo.rows_per_s:,.0f} records/s)", flush=True)  # fmt: skip
                results[target.fmt] = Result(e2e, solo)
            expected.unpersist()
    return results


def describe(batches: Sequence[int]) -> str:
    """``1,000 + 4 × 10,000 + 9,000``: batch sizes, runs of equal ones folded."""
    runs: list[list[int]] = []
    for size in batches:
        if runs and runs[-1][0] == size:
            runs[-1][1] += 1
        else:
            runs.append([size, 1])
    return " + ".join(f"{n} × {size:,}" if n > 1 else f"{size:,}" for size, n in runs)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.lake_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000, help="records per format (default 50,000)")
    parser.add_argument(
        "--batch", type=int, default=10_000, help="the sinks' batch.max.records (default 10,000)"
    )
    args = parser.parse_args(argv)
    records, batch = int(args.records), int(args.batch)
    run_id = uuid.uuid4().hex[:8]
    settings = settings_or_exit().model_copy(
        update={"task_queue": f"bench-lake-{run_id}", "store_schema": f"bench_{run_id}"}
    )
    if not settings.runtime.spark_jars:
        raise SystemExit(
            "bench lake: no lake jars (SLUICE_SPARK_JARS, else .sluice/spark-jars): run `make up`"
        )
    work = settings.stack.state_dir / "bench" / f"lake-{run_id}"
    work.mkdir(parents=True)
    ctx = RuntimeContext(settings.runtime)
    print(f"bench lake: {records:,} records per format, batch.max.records {batch:,}; tables under {work}")
    try:
        ctx.spark  # noqa: B018 - start Spark before timing anything
        results = asyncio.run(run(ctx, settings, work, records, batch))
    finally:
        ctx.close()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n  {'path':<40} {'records/s':>10}")
    for fmt, r in results.items():
        print(f"  {'RocketMQ -> ' + fmt + '-sink -> table (e2e)':<40} {r.e2e.timed.rows_per_s:>10,.0f}"
              f"   {r.ratio:.2f} of Spark alone")  # fmt: skip
        print(f"  {'Spark appends to ' + fmt + ' alone':<40} {r.alone.rows_per_s:>10,.0f}")
    keys: list[str] = []
    for fmt, r in results.items():
        keys += [
            f"{fmt}_e2e_records_per_s={r.e2e.timed.rows_per_s:.0f}",
            f"{fmt}_alone_records_per_s={r.alone.rows_per_s:.0f}",
            f"{fmt}_e2e_vs_alone_ratio={r.ratio:.3f}",
            f"{fmt}_e2e_s={r.e2e.timed.seconds:.1f}",
            f"{fmt}_alone_s={r.alone.seconds:.1f}",
            f"{fmt}_first_commit_s={r.e2e.first_commit_s:.1f}",
            f"{fmt}_commits={len(r.e2e.batches)}",
        ]
    print(f"bench lake: {' '.join(keys)} records={records} batch_max_records={batch}")


if __name__ == "__main__":
    main()
