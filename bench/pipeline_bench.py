"""`make bench-pipeline`: end-to-end file -> RocketMQ -> file throughput and per-batch overhead.

Printed in one run, on this machine, against the local stack:
1. the raw broker round trip with Sluice's client (batched send, then pull) of 100-byte messages —
   the baseline the pipeline is compared with;
2. end to end: a file of 100-byte lines copied by a file-source and a file-sink connector running
   in an in-process Temporal worker, timed from connector creation to byte-equal sink file. A first,
   smaller copy warms up the Spark Python workers and the JIT (reported as ``first_run_s``); the
   rate is that of the second copy of RECORDS lines (default 1,000,000, so batch pipelining, not
   start-up, decides it);
3. the steady-state overhead of a micro-batch: an empty batch (planning finds nothing) and a
   one-record batch through read, convert, send and commit.
Never asserted in tests; the last line is the summary.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from activities.connector_activities import validate_config
from activities.context import RuntimeContext, RuntimeSettings
from activities.runner import TaskSetup
from activities.source_runner import SourceRunner
from deploy.local.config import StackConfig
from deploy.local.rocketmq import create_topic
from worker.client import SluiceClient
from worker.main import build_worker
from worker.settings import WorkerSettings
from worker.temporal_client import connect

RECORDS = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
WARM_UP_RECORDS = 50_000
LINE = 100  # bytes per record, newline included


def _line(i: int) -> str:
    return f"{i:010d} " + "x" * (LINE - 12) + "\n"


def raw_round_trip(ctx: RuntimeContext, cfg: StackConfig, count: int) -> tuple[float, float, float]:
    from connectors.rocketmq.client import OutgoingMessage

    topic = f"bench-raw-{uuid.uuid4().hex[:8]}"
    create_topic(cfg, topic, queues=4)
    client = ctx.rocketmq
    queues = client.queues(topic)
    body = b"x" * LINE
    batch = [OutgoingMessage(body) for _ in range(1000)]
    t0 = time.perf_counter()
    for i in range(count // 1000):
        client.send_batch(queues[i % len(queues)], batch)
    send_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    pulled = 0
    for mq in queues:
        pulled += len(client.pull_range(mq, 0, client.max_offset(mq), max_per_request=1000))
    pull_s = time.perf_counter() - t0
    assert pulled == count // 1000 * 1000, (pulled, count)
    return pulled / send_s, pulled / pull_s, pulled / (send_s + pull_s)


async def end_to_end(
    ctx: RuntimeContext, settings: WorkerSettings, work: Path, counts: list[int]
) -> list[float]:
    """Seconds from creating a file-source and a file-sink connector to a byte-equal sink file, for
    a file of each size in ``counts``, one after the other in one worker (so the first run also
    pays for the Python workers' and the JIT's warm-up)."""
    client = await connect(settings.temporal_address, settings.temporal_namespace)
    elapsed: list[float] = []
    with ThreadPoolExecutor(max_workers=8) as pool:
        async with build_worker(client, settings, ctx, pool):
            sluice = SluiceClient(client, settings.task_queue)
            for count in counts:
                name = uuid.uuid4().hex[:8]
                src, dst, topic = work / f"in-{name}.txt", work / f"out-{name}.txt", f"bench-e2e-{name}"
                src.write_text("".join(_line(i) for i in range(count)))
                t0 = time.perf_counter()
                await sluice.create(
                    f"bench-src-{name}",
                    {
                        "connector.class": "file-source",
                        "file": str(src),
                        "topic": topic,
                        "batch.max.bytes": str(8 * 1024 * 1024),
                        "poll.interval.ms": "100",
                    },
                )
                await sluice.create(
                    f"bench-dst-{name}",
                    {
                        "connector.class": "file-sink",
                        "file": str(dst),
                        "topics": topic,
                        "batch.max.records": "100000",
                        "poll.interval.ms": "100",
                    },
                )
                size = src.stat().st_size
                while not (dst.exists() and dst.stat().st_size >= size):
                    await asyncio.sleep(0.1)
                elapsed.append(time.perf_counter() - t0)
                assert dst.read_bytes() == src.read_bytes(), "sink differs from source"
                await sluice.delete(f"bench-src-{name}")
                await sluice.delete(f"bench-dst-{name}")
    return elapsed


def batch_overhead(ctx: RuntimeContext, work: Path) -> tuple[float, float]:
    """Median seconds of an empty batch (plan finds nothing) and of a one-record batch."""
    from connectors.api import open_source_task
    from connectors.converters import converter_for
    from connectors.file.source import FileSourceConnector

    src = work / "overhead.txt"
    src.write_text("")
    name = f"bench-overhead-{uuid.uuid4().hex[:8]}"
    config = {"connector.class": "file-source", "file": str(src), "topic": f"bench-oh-{uuid.uuid4().hex[:8]}"}
    assert not validate_config(name, config).errors
    parsed = FileSourceConnector().parse(config)
    task = open_source_task(FileSourceConnector, config, 0)
    runner = SourceRunner(TaskSetup(ctx, name, parsed, converter_for(parsed)), task)
    runner.ensure_topic()
    empty, one = [], []
    for i in range(12):
        t0 = time.perf_counter()
        plan, _ = runner.next_plan()
        empty.append(time.perf_counter() - t0)
        assert plan is None
        with src.open("a") as f:
            f.write(_line(i))
        t0 = time.perf_counter()
        plan, rerun = runner.next_plan()
        assert plan is not None
        runner.run(plan, rerun)
        one.append(time.perf_counter() - t0)
    return statistics.median(empty), statistics.median(one[2:])  # first batches warm Spark up


def main() -> None:
    cfg = StackConfig.from_env()
    settings = WorkerSettings.from_env()
    settings = WorkerSettings(
        settings.temporal_address,
        settings.temporal_namespace,
        f"bench-{uuid.uuid4().hex[:8]}",
        RuntimeSettings(
            settings.runtime.database_url,
            settings.runtime.namesrv,
            settings.runtime.spark_master,
            f"bench_{uuid.uuid4().hex[:8]}",
        ),
    )
    ctx = RuntimeContext(settings.runtime)
    work = cfg.state_dir / "bench" / uuid.uuid4().hex[:8]
    work.mkdir(parents=True)
    ctx.spark  # noqa: B018 - start Spark before timing anything
    send_rate, pull_rate, raw_rate = raw_round_trip(ctx, cfg, RECORDS)
    print(
        f"raw broker: send {send_rate:,.0f} msg/s, pull {pull_rate:,.0f} msg/s, "
        f"round trip {raw_rate:,.0f} msg/s"
    )
    empty_s, one_s = batch_overhead(ctx, work)
    print(f"batch overhead: empty {empty_s * 1000:.0f} ms, one record {one_s * 1000:.0f} ms")
    first_s, steady_s = asyncio.run(end_to_end(ctx, settings, work, [WARM_UP_RECORDS, RECORDS]))
    e2e = RECORDS / steady_s
    print(f"end to end, first run: {WARM_UP_RECORDS:,} records in {first_s:.1f} s (includes warm-up)")
    print(f"end to end: {RECORDS:,} records of {LINE} bytes in {steady_s:.1f} s, {e2e:,.0f} records/s")
    ctx.close()
    print(
        f"bench pipeline: e2e_records_per_s={e2e:.0f} raw_send_msgs_per_s={send_rate:.0f} "
        f"raw_pull_msgs_per_s={pull_rate:.0f} raw_round_trip_msgs_per_s={raw_rate:.0f} "
        f"e2e_vs_raw_ratio={e2e / raw_rate:.3f} empty_batch_ms={empty_s * 1000:.1f} "
        f"one_record_batch_ms={one_s * 1000:.1f} first_run_s={first_s:.1f}"
    )


if __name__ == "__main__":
    main()
