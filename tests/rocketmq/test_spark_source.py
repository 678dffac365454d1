"""The ``rocketmq`` Spark data source against the real broker: writer, reader, plans, data loss."""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sluice.activities.sink_runner import QueueView
from sluice.connectors.model import DataLossPolicy, PartitionRange
from sluice.connectors.planner import PlanRequest, plan_next
from sluice.connectors.rocketmq.offsets import check_data_loss, earliest_offsets, latest_offsets
from sluice.connectors.rocketmq.spark_source import plan_from_json, plan_to_json, register
from sluice.connectors.rocketmq.spark_writer import read_write_summary
from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.deploy.local.config import StackConfig

# Spark's Python workers must run this interpreter (the venv has pyarrow and this project); set it
# before the session fixture starts Spark in case nothing else did.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

if TYPE_CHECKING:  # pyspark is imported lazily, by the fixtures
    from pyspark.sql import DataFrame, SparkSession


@pytest.fixture(scope="module")
def client(stack_config: StackConfig) -> Iterator[SyncRocketMQClient]:
    with SyncRocketMQClient(stack_config.namesrv_address) as c:
        yield c


@pytest.fixture(scope="module")
def rspark(spark: SparkSession) -> SparkSession:
    register(spark)
    register(spark)  # idempotent
    return spark


def write(df: DataFrame, cfg: StackConfig, topic: str, result: Path | None = None, **options: str) -> None:
    w = df.write.format("rocketmq").option("namesrv", cfg.namesrv_address).option("topic", topic)
    if result is not None:
        w = w.option("resultPath", str(result))
    for k, v in options.items():
        w = w.option(k, v)
    w.mode("append").save()


def read(spark: SparkSession, cfg: StackConfig, ranges: Any, **options: str) -> DataFrame:
    r = (
        spark.read.format("rocketmq")
        .option("namesrv", cfg.namesrv_address)
        .option("plan", plan_to_json(ranges))
    )
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def full_plan(client: SyncRocketMQClient, topic: str) -> tuple[PartitionRange, ...]:
    """Every queue from its earliest to its latest offset, planned by the runtime's planner."""
    plan = plan_next(PlanRequest("test", 0, 0, {}), QueueView(client, [topic], 0, 1)).plan
    return plan.ranges if plan is not None else ()


def settled_ends(client: SyncRocketMQClient, topic: str, total: int, timeout_s: float = 60) -> dict[str, int]:
    """The topic's queue ends once they hold ``total`` messages together (or at ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    ends = latest_offsets(client, topic)
    while sum(ends.values()) < total and time.monotonic() < deadline:
        time.sleep(0.5)
        ends = latest_offsets(client, topic)
    return ends


def body_of(i: int) -> bytes:
    return f"m{i:09d}".encode().ljust(100, b"x")


@pytest.mark.slow
def test_round_trip_one_million_messages(
    rspark: SparkSession,
    stack_config: StackConfig,
    client: SyncRocketMQClient,
    topic_name: str,
    tmp_path: Path,
) -> None:
    from pyspark.sql import functions as F

    n = 1_000_000
    source = rspark.range(0, n, numPartitions=4).select(
        F.rpad(F.concat(F.lit("m"), F.lpad(F.col("id").cast("string"), 9, "0")), 100, "x")
        .cast("binary")
        .alias("body"),
        F.col("id").cast("string").alias("keys"),
    )
    write(source, stack_config, topic_name, tmp_path / "result.json")

    summary = read_write_summary(tmp_path / "result.json")
    assert summary.topic == topic_name and summary.count == n
    written_per_queue: dict[str, int] = {}
    for w in summary.written:
        written_per_queue[w.partition] = written_per_queue.get(w.partition, 0) + w.count
    assert sum(written_per_queue.values()) == n
    # A queue's end follows the broker's answer to a send by a moment (it dispatches its commit log
    # to the queues behind the answer; a million messages can leave it seconds behind on a busy
    # machine): the ends are read once they hold that many, then must be what was written.
    latest = settled_ends(client, topic_name, n)
    assert {k: v for k, v in latest.items() if v} == written_per_queue

    plan = full_plan(client, topic_name)
    df = read(rspark, stack_config, plan, maxRecordsPerSplit="150000")

    def checksum(frame: DataFrame) -> tuple[int, int]:
        row = frame.agg(
            F.count(F.lit(1)).alias("n"),
            F.sum(F.xxhash64("keys", "body").cast("decimal(38,0)")).alias("h"),
        ).collect()[0]
        return int(row["n"]), int(row["h"])

    assert checksum(df) == checksum(source)
    got = df.agg(F.countDistinct("partition", "queue_offset").alias("d")).collect()[0]["d"]
    assert got == n
    sample_ids = [0, 1, 2, 77_777, 499_999, 500_000, 999_998, 999_999]
    sample = (
        df.where(F.col("keys").isin([str(i) for i in sample_ids])).select("keys", "body", "topic").collect()
    )
    assert sorted((r["keys"], bytes(r["body"]), r["topic"]) for r in sample) == sorted(
        (str(i), body_of(i), topic_name) for i in sample_ids
    )


def test_same_plan_reads_the_same_rows_and_stops_at_end(
    rspark: SparkSession, stack_config: StackConfig, client: SyncRocketMQClient, topic_name: str
) -> None:
    rows = [(f"body-{i}".encode(), f"k{i}") for i in range(300)]
    write(rspark.createDataFrame(rows, "body binary, keys string"), stack_config, topic_name)
    plan = full_plan(client, topic_name)
    order = ["partition", "queue_offset"]
    first = read(rspark, stack_config, plan, maxRecordsPerSplit="40").orderBy(*order).collect()
    second = read(rspark, stack_config, plan).orderBy(*order).collect()
    assert first == second
    assert sorted((bytes(r["body"]), r["keys"]) for r in first) == sorted(rows)

    # A range that ends before the queue does: exactly [start, end), nothing more.
    queue = plan[0]
    start = queue.start.offset
    middle = PartitionRange(queue.partition, start + 3, start + 7, topic_name)
    got = read(rspark, stack_config, [middle]).orderBy("queue_offset").collect()
    assert [r["queue_offset"] for r in got] == [start + 3 + i for i in range(4)]
    expected = [r for r in first if r["partition"] == queue.partition][3:7]
    assert got == expected


def test_empty_plan_gives_no_rows(rspark: SparkSession, stack_config: StackConfig, topic_name: str) -> None:
    assert read(rspark, stack_config, []).collect() == []
    empty = [PartitionRange("broker-a:0", 0, 0, topic_name)]
    assert read(rspark, stack_config, empty).collect() == []
    assert read(rspark, stack_config, []).schema.fieldNames() == [
        "topic",
        "partition",
        "queue_id",
        "queue_offset",
        "keys",
        "tags",
        "properties",
        "born_timestamp",
        "store_timestamp",
        "body",
    ]


def test_properties_tags_and_sharding_keys_round_trip(
    rspark: SparkSession,
    stack_config: StackConfig,
    client: SyncRocketMQClient,
    topic_name: str,
    tmp_path: Path,
) -> None:
    rows = [
        (
            f"é-body-{i}",
            None if i % 5 == 0 else f"key-{i}",
            None if i % 3 == 0 else f"tag{i % 4}",
            {} if i % 7 == 0 else {"color": f"c{i % 3}", "n": str(i), "ünï": "cödé"},
            f"user-{i % 6}",
        )
        for i in range(120)
    ]
    schema = "body string, keys string, tags string, properties map<string,string>, sharding_key string"
    df = rspark.createDataFrame(rows, schema).coalesce(1)
    write(df, stack_config, topic_name, tmp_path / "r.json", maxBatchMessages="16")
    assert read_write_summary(tmp_path / "r.json").count == len(rows)

    got = read(rspark, stack_config, full_plan(client, topic_name)).collect()
    by_body = {bytes(r["body"]).decode(): r for r in got}
    assert len(by_body) == len(rows)
    for body, keys, tags, props, _shard in rows:
        r = by_body[body]
        assert (r["keys"], r["tags"], dict(r["properties"] or {})) == (keys, tags, props), body

    # Every sharding key lands in one queue, in the order the rows were written.
    placement: dict[str, list[tuple[str, int]]] = {}
    for body, *_rest, shard in rows:
        r = by_body[body]
        placement.setdefault(shard, []).append((r["partition"], r["queue_offset"]))
    for shard, spots in placement.items():
        assert len({p for p, _ in spots}) == 1, shard
        assert [o for _, o in spots] == sorted(o for _, o in spots), shard


def test_range_beyond_the_queue_is_data_loss(
    rspark: SparkSession, stack_config: StackConfig, client: SyncRocketMQClient, topic_name: str
) -> None:
    write(
        rspark.createDataFrame([(b"only-%d" % i,) for i in range(5)], "body binary").coalesce(1),
        stack_config,
        topic_name,
    )
    (queue,) = full_plan(client, topic_name)
    beyond = [PartitionRange(queue.partition, queue.start, queue.end.offset + 10, topic_name)]
    with pytest.raises(Exception, match=rf"data loss in topic '{topic_name}' queue {queue.partition}"):
        read(rspark, stack_config, beyond).collect()
    got = read(rspark, stack_config, beyond, failOnDataLoss="false").orderBy("queue_offset").collect()
    assert [bytes(r["body"]) for r in got] == [b"only-%d" % i for i in range(5)]
    vanished = [PartitionRange("broker-a:9", 0, 3, topic_name)]
    with pytest.raises(Exception, match=r"queue broker-a:9: \[0, 3\) is gone: the partition vanished"):
        read(rspark, stack_config, vanished).collect()
    assert read(rspark, stack_config, vanished, failOnDataLoss="false").collect() == []
    # The driver-side check agrees with what the executors decided.
    assert check_data_loss(
        beyond,
        earliest_offsets(client, topic_name),
        DataLossPolicy.SKIP,
        max_offsets=latest_offsets(client, topic_name),
    ) == (queue,)


def test_writer_errors_name_the_problem(
    rspark: SparkSession, stack_config: StackConfig, topic_name: str
) -> None:
    missing = f"T_missing_{uuid.uuid4().hex[:8]}"
    with pytest.raises(Exception, match=missing):
        write(rspark.createDataFrame([(b"x",)], "body binary"), stack_config, missing)
    with pytest.raises(Exception, match="needs a 'body' column"):
        write(rspark.createDataFrame([("x",)], "payload string"), stack_config, topic_name)
    with pytest.raises(Exception, match="'properties' must be map<string,string>"):
        write(rspark.createDataFrame([("x", 1)], "body string, properties int"), stack_config, topic_name)


PLAN_JSON_ERRORS = [
    ("not json", "{", "not valid JSON"),
    ("wrong version", '{"version": 2, "ranges": []}', '"version": 1'),
    ("missing ranges", '{"version": 1}', "'ranges' list"),
    (
        "bad field",
        '{"version":1,"ranges":[{"topic":"T","partition":"broker-a:0","start":"0","end":1}]}',
        "range 0 field 'start'",
    ),
    (
        "empty topic",
        '{"version":1,"ranges":[{"topic":"","partition":"broker-a:0","start":0,"end":1}]}',
        "'topic' is empty",
    ),
    (
        "inverted",
        '{"version":1,"ranges":[{"topic":"T","partition":"broker-a:0","start":5,"end":1}]}',
        "plan range 0",
    ),
]


@pytest.mark.parametrize(("name", "text", "message"), PLAN_JSON_ERRORS, ids=[c[0] for c in PLAN_JSON_ERRORS])
def test_plan_json_errors(name: str, text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plan_from_json(text)


def test_plan_json_round_trip() -> None:
    ranges = (PartitionRange("broker-a:0", 0, 10, "T"), PartitionRange("broker-a:3", 7, 9, "T"))
    assert plan_from_json(plan_to_json(ranges)) == ranges


def test_a_bound_write_stamps_each_jobs_own_properties(
    rspark: SparkSession, stack_config: StackConfig, client: SyncRocketMQClient, topic_name: str
) -> None:
    """One planned send, run twice, stamps each job's bound properties on every message it sends
    (a source's batch reference), and refuses to send with none bound or a reserved one."""
    from pyspark.sql import functions as F

    from sluice.connectors.rocketmq.spark_writer import WRITTEN_SCHEMA, RocketMQWriter, bound_properties

    rows = [(body_of(i), f"k{i % 3}") for i in range(30)]
    df = rspark.createDataFrame(rows, "body binary, sharding_key string").coalesce(1)
    options = {"namesrv": stack_config.namesrv_address, "topic": topic_name, "boundProperties": "true"}
    plan = df.mapInArrow(RocketMQWriter(options, df.schema).write_batches, WRITTEN_SCHEMA)
    for batch in ("c/0/1", "c/0/2"):
        with bound_properties(rspark, {"sluice.batch": batch}):
            assert plan.select(F.sum("count")).collect()[0][0] == 30
    stamped: dict[str, list[bytes]] = {}
    for r in full_plan(client, topic_name):
        mq = next(q for q in client.queues(topic_name) if q.key == r.partition)
        for m in client.pull_range(mq, r.start.offset, r.end.offset):
            stamped.setdefault(m.properties["sluice.batch"], []).append(m.body)
    assert {k: sorted(v) for k, v in stamped.items()} == {
        b: sorted(body_of(i) for i in range(30)) for b in ("c/0/1", "c/0/2")
    }
    with pytest.raises(Exception, match="no properties bound"):
        plan.collect()
    with bound_properties(rspark, {"KEYS": "x"}), pytest.raises(Exception, match="'KEYS' is reserved"):
        plan.collect()
