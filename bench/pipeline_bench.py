"""`make bench-pipeline`: end-to-end file -> RocketMQ -> file throughput and per-batch overhead.

Printed in one run, on this machine, against the local stack:
1. the raw broker round trip with Sluice's client (batched send, then pull) of 100-byte messages —
   the baseline the pipeline is compared with. The pull is measured twice: with the bulk columnar
   path (the fastest, so ``e2e_vs_raw_ratio`` is against the strongest baseline) and with the
   Message-object API (``..._message_api`` keys; the pull this benchmark used before the bulk path
   existed);
2. end to end: a file of 100-byte lines copied by a file-source and a file-sink connector running
   in an in-process Temporal worker, timed from connector creation to byte-equal sink file. A first
   copy of the same size warms up the Spark JVM and Python workers (reported as ``first_run_s``);
   the rate is that of the second copy of RECORDS lines (default 1,000,000); a third copy runs
   its sink with ``batch.linger.ms`` = LINGER_MS (``e2e_linger_records_per_s``): fewer, larger
   sink batches while the source is busy, for that much latency;
3. the steady-state overhead of a micro-batch: an empty batch (planning finds nothing) and a
   one-record batch through read, convert, send and commit.
Never asserted in tests; the last line is the summary.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from sluice.activities.connector_activities import validate_config
from sluice.activities.context import RuntimeContext
from sluice.activities.runner import TaskSetup
from sluice.activities.source_runner import SourceRunner
from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.rocketmq import create_topic
from sluice.worker.client import SluiceClient
from sluice.worker.main import build_worker, store_listener
from sluice.worker.settings import Settings, settings_or_exit
from sluice.worker.temporal_client import connect

RECORDS = 1_000_000  # main() sets it from the first argument (not at import: other benches import this)
# The first copy warms up the Spark JVM's JIT (Catalyst and codegen paths keep compiling for about
# a million records: the JVM used ~23 cpu-s for the first million and ~16 for the second) and the
# Python workers; a long-running worker is past that, so the rate is measured on the second copy.
WARM_UP_RECORDS = RECORDS
LINE = 100  # bytes per record, newline included
LINGER_MS = 300  # the third copy's sink batch.linger.ms


def _line(i: int) -> str:
    return f"{i:010d} " + "x" * (LINE - 12) + "\n"


def _position_properties(i: int) -> dict[str, str]:
    """The properties a file source puts on line ``i``'s message, so raw messages have the same shape."""
    return {
        "sluice.partition": "/work/.sluice/bench/0123abcd/in-0123abcd.txt",
        "sluice.offset": str(i * LINE),
        "sluice.batch": f"bench-src-0123abcd/0/{i // 83886}",
    }


@dataclass(frozen=True)
class RawRates:
    """Sluice's client alone against the broker, msgs/s."""

    send: float
    bulk_pull: float  # pull_range_columns: decoded columns, the path the Spark reader uses
    message_pull: float  # pull_range: a Message object per message, the general client API

    @staticmethod
    def best(a: RawRates, b: RawRates) -> RawRates:
        return RawRates(
            max(a.send, b.send), max(a.bulk_pull, b.bulk_pull), max(a.message_pull, b.message_pull)
        )

    @staticmethod
    def round_trip(send: float, pull: float) -> float:
        """Send then pull the same messages, one after the other."""
        return 1 / (1 / send + 1 / pull)


def raw_rates(ctx: RuntimeContext, cfg: StackConfig, count: int) -> RawRates:
    """Send ``count`` messages shaped like the pipeline's (a 100-byte line and the three position
    properties a source adds) in batches of 1000 over 4 queues, then pull them all back twice:
    with the bulk (columnar) path and with the Message API. Building the message objects is not
    timed (the strongest baseline); encoding and sending them is."""
    from sluice.connectors.rocketmq.client import OutgoingMessage

    topic = f"bench-raw-{uuid.uuid4().hex[:8]}"
    create_topic(cfg, topic, queues=4)
    client = ctx.rocketmq
    queues = client.queues(topic)
    send_s = 0.0
    for i in range(count // 1000):
        batch = [
            OutgoingMessage(_line(n).encode(), properties=_position_properties(n))
            for n in range(i * 1000, (i + 1) * 1000)
        ]
        t0 = time.perf_counter()
        client.send_batch(queues[i % len(queues)], batch)
        send_s += time.perf_counter() - t0
    sent = count // 1000 * 1000
    pull_s = []
    for pull in (client.pull_range_columns, client.pull_range):
        t0 = time.perf_counter()
        pulled = 0
        for mq in queues:
            end = client.max_offset(mq)
            for start in range(0, end, 100_000):  # bounded chunks, as the reader pulls them
                pulled += len(pull(mq, start, min(start + 100_000, end), max_per_request=512, concurrency=4))
        pull_s.append(time.perf_counter() - t0)
        assert pulled == sent, (pulled, sent)
    return RawRates(sent / send_s, sent / pull_s[0], sent / pull_s[1])


async def end_to_end(
    ctx: RuntimeContext, settings: Settings, work: Path, runs: list[tuple[int, int]]
) -> list[float]:
    """Seconds from creating a file-source and a file-sink connector to a byte-equal sink file, for
    each ``(records, sink batch.linger.ms)`` of ``runs``, one after the other in one worker (so the
    first run also pays for the Python workers' and the JIT's warm-up)."""
    client = await connect(settings.temporal_address, settings.temporal_namespace)
    elapsed: list[float] = []
    with ThreadPoolExecutor(max_workers=8) as pool, store_listener(ctx):
        async with build_worker(client, settings, ctx, pool):
            sluice = SluiceClient(client, settings.task_queue)
            for count, linger_ms in runs:
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
                        "batch.linger.ms": str(linger_ms),
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
    from sluice.connectors.api import open_source_task
    from sluice.connectors.converters import converter_for
    from sluice.connectors.file.source import FileSourceConnector

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
    global RECORDS, WARM_UP_RECORDS
    RECORDS = WARM_UP_RECORDS = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    settings = settings_or_exit().model_copy(
        update={
            "task_queue": f"bench-{uuid.uuid4().hex[:8]}",
            "store_schema": f"bench_{uuid.uuid4().hex[:8]}",
        }
    )
    cfg = settings.stack
    ctx = RuntimeContext(settings.runtime)
    work = cfg.state_dir / "bench" / uuid.uuid4().hex[:8]
    work.mkdir(parents=True)
    ctx.spark  # noqa: B018 - start Spark before timing anything
    first_raw = raw_rates(ctx, cfg, RECORDS)
    empty_s, one_s = batch_overhead(ctx, work)
    print(f"batch overhead: empty {empty_s * 1000:.0f} ms, one record {one_s * 1000:.0f} ms")
    runs = [(WARM_UP_RECORDS, 0), (RECORDS, 0), (RECORDS, LINGER_MS)]
    first_s, steady_s, linger_s = asyncio.run(end_to_end(ctx, settings, work, runs))
    e2e, e2e_linger = RECORDS / steady_s, RECORDS / linger_s
    print(f"end to end, first run: {WARM_UP_RECORDS:,} records in {first_s:.1f} s (includes warm-up)")
    print(f"end to end: {RECORDS:,} records of {LINE} bytes in {steady_s:.1f} s, {e2e:,.0f} records/s")
    print(f"end to end, sink batch.linger.ms={LINGER_MS}: {linger_s:.1f} s, {e2e_linger:,.0f} records/s")
    # The broker's raw rates vary by tens of percent from run to run on this machine: measure them
    # before and after the pipeline and compare with the better of the two (the stronger baseline).
    raw = RawRates.best(first_raw, raw_rates(ctx, cfg, RECORDS))
    shutil.rmtree(work, ignore_errors=True)
    bulk_trip = RawRates.round_trip(raw.send, raw.bulk_pull)
    api_trip = RawRates.round_trip(raw.send, raw.message_pull)
    print(
        f"raw broker: send {raw.send:,.0f} msg/s, pull {raw.bulk_pull:,.0f} msg/s (bulk) / "
        f"{raw.message_pull:,.0f} msg/s (Message API), round trip {bulk_trip:,.0f} / {api_trip:,.0f} msg/s"
    )
    ctx.close()
    print(
        f"bench pipeline: e2e_records_per_s={e2e:.0f} raw_send_msgs_per_s={raw.send:.0f} "
        f"raw_pull_msgs_per_s={raw.bulk_pull:.0f} raw_pull_message_api_msgs_per_s={raw.message_pull:.0f} "
        f"raw_round_trip_msgs_per_s={bulk_trip:.0f} raw_round_trip_message_api_msgs_per_s={api_trip:.0f} "
        f"e2e_vs_raw_ratio={e2e / bulk_trip:.3f} e2e_vs_raw_message_api_ratio={e2e / api_trip:.3f} "
        f"empty_batch_ms={empty_s * 1000:.1f} one_record_batch_ms={one_s * 1000:.1f} "
        f"first_run_s={first_s:.1f} e2e_linger_records_per_s={e2e_linger:.0f} "
        f"e2e_linger_vs_raw_ratio={e2e_linger / bulk_trip:.3f}"
    )


if __name__ == "__main__":
    main()
