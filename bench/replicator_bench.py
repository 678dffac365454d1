"""``make bench-replicator``: the replicator against Sluice's own pull + send of the same messages.

One worker in this process, the local stack's two clusters. Baseline: the messages of a 4-queue
topic pulled by Sluice's RocketMQ client and sent to the second cluster queue by queue (the
least a copy must do). Then a ``rocketmq-replicator`` copies the same topic, timed from its
creation to the last copy. Then lag: messages sent at a steady rate to a topic a replicator copies,
each copy's lag the time from its source message's birth to the copy's store on the target.
Last line: ``bench replicator: …``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from sluice.activities.context import RuntimeContext
from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.connectors.rocketmq.values import OutgoingMessage
from sluice.deploy.local.rocketmq import CLUSTER_NAME, REPLICA_CLUSTER_NAME
from sluice.worker.client import SluiceClient
from sluice.worker.main import build_worker, store_listener
from sluice.worker.settings import settings_or_exit
from sluice.worker.temporal_client import connect

QUEUES = 4
BODY = b"x" * 200
LAG_RATE = 5_000  # messages/s
LAG_SECONDS = 20


def _messages(start: int, count: int) -> list[OutgoingMessage]:
    return [
        OutgoingMessage(BODY, keys=f"k{i % 97}", tags="t", properties={"n": str(i)})
        for i in range(start, start + count)
    ]


def _produce(client: SyncRocketMQClient, topic: str, per_queue: int) -> None:
    for mq in client.queues(topic):
        for lo in range(0, per_queue, 1000):
            client.send_batch(mq, _messages(lo, min(1000, per_queue - lo)))


def _total(client: SyncRocketMQClient, topic: str) -> int:
    if not client.topic_exists(topic):
        return 0
    return sum(client.max_offset(mq) for mq in client.queues(topic))


def own_copy(src: SyncRocketMQClient, dst: SyncRocketMQClient, topic: str, target: str) -> float:
    """Seconds for Sluice's client to pull every message of ``topic`` and send it to ``target``."""
    dst.create_topic(target, queue_count=QUEUES, cluster=REPLICA_CLUSTER_NAME)
    started = time.perf_counter()
    for mq, out in zip(src.queues(topic), dst.queues(target), strict=True):
        end = src.max_offset(mq)
        for lo in range(0, end, 4096):
            pulled = src.pull_range(mq, lo, min(lo + 4096, end), max_per_request=512)
            batch = [OutgoingMessage(m.body, m.keys, m.tags, m.properties) for m in pulled]
            for i in range(0, len(batch), 1000):
                dst.send_batch(out, batch[i : i + 1000])
    return time.perf_counter() - started


def _replicator(settings_namesrv: str, replica: str, topic: str) -> dict[str, str]:
    return {
        "connector.class": "org.apache.rocketmq.replicator.ReplicatorSourceConnector",
        "src.endpoint": settings_namesrv, "src.cluster": CLUSTER_NAME,
        "dest.endpoint": replica, "dest.cluster": REPLICA_CLUSTER_NAME,
        "src.topictags": topic, "consumefromwhere": "CONSUME_FROM_FIRST_OFFSET",
        "sync.tps": "1000000", "batch.max.records": "50000", "poll.interval.ms": "50",
    }  # fmt: skip


def _lags(dst: SyncRocketMQClient, topic: str) -> list[float]:
    lags = []
    for mq in dst.queues(topic):
        for m in dst.pull_range(mq, 0, dst.max_offset(mq), max_per_request=512):
            born = m.properties.get("connect-ext-REPLICATOR-BORN-SOURCE-TIMESTAMP", "")
            if born.isdigit():
                lags.append((m.store_timestamp_ms - int(born)) / 1000)
    return lags


async def run(count: int) -> None:
    settings = settings_or_exit().model_copy(
        update={
            "task_queue": f"bench-{uuid.uuid4().hex[:8]}",
            "store_schema": f"bench_{uuid.uuid4().hex[:8]}",
        }
    )
    cfg = settings.stack
    ctx = RuntimeContext(settings.runtime)
    src, dst = SyncRocketMQClient(cfg.namesrv_address), SyncRocketMQClient(cfg.replica_namesrv_address)
    name = uuid.uuid4().hex[:8]
    topic = f"bench_rep_{name}"
    src.create_topic(topic, queue_count=QUEUES, cluster=CLUSTER_NAME)
    _produce(src, topic, count // QUEUES)
    total = _total(src, topic)
    own_s = own_copy(src, dst, topic, f"bench_own_{name}")
    client = await connect(settings.temporal_address, settings.temporal_namespace)
    with ThreadPoolExecutor(max_workers=8) as pool, store_listener(ctx):
        async with build_worker(client, settings, ctx, pool):
            sluice = SluiceClient(client, settings.task_queue)
            started = time.perf_counter()
            await sluice.create(
                f"bench-rep-{name}", _replicator(cfg.namesrv_address, cfg.replica_namesrv_address, topic)
            )
            while _total(dst, topic) < total:
                await asyncio.sleep(0.05)
            copy_s = time.perf_counter() - started
            copied = _total(dst, topic)
            assert copied == total, f"the replicator stored {copied} copies of {total} messages"
            await sluice.delete(f"bench-rep-{name}")
            # lag at a steady rate
            live = f"bench_lag_{name}"
            src.create_topic(live, queue_count=QUEUES, cluster=CLUSTER_NAME)
            await sluice.create(
                f"bench-lag-{name}", _replicator(cfg.namesrv_address, cfg.replica_namesrv_address, live)
            )
            await asyncio.sleep(3)  # the task is running and idle
            queues = src.queues(live)

            def steady() -> None:
                sent, t0 = 0, time.perf_counter()
                while sent < LAG_RATE * LAG_SECONDS:
                    due = int((time.perf_counter() - t0) * LAG_RATE)
                    if due <= sent:
                        time.sleep(0.005)
                        continue
                    n = min(due - sent, 500)
                    src.send_batch(queues[sent // 500 % QUEUES], _messages(sent, n))
                    sent += n

            sender = threading.Thread(target=steady)
            sender.start()
            while sender.is_alive():
                await asyncio.sleep(0.2)
            while _total(dst, live) < LAG_RATE * LAG_SECONDS:
                await asyncio.sleep(0.1)
            await sluice.delete(f"bench-lag-{name}")
    lags = sorted(_lags(dst, live))
    p50, p99 = statistics.median(lags), lags[int(len(lags) * 0.99) - 1]
    own, rep = total / own_s, total / copy_s
    print(f"own pull + send: {total:,} messages in {own_s:.1f} s, {own:,.0f} msgs/s")
    print(f"replicator: {total:,} messages in {copy_s:.1f} s from its creation, {rep:,.0f} msgs/s")
    print(f"lag at {LAG_RATE:,} msgs/s for {LAG_SECONDS} s: p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms")
    src.close()
    dst.close()
    ctx.close()
    print(
        f"bench replicator: replicator_msgs_per_s={rep:.0f} own_pull_send_msgs_per_s={own:.0f} "
        f"ratio_vs_own={rep / own:.3f} lag_p50_ms={p50 * 1000:.0f} lag_p99_ms={p99 * 1000:.0f} "
        f"lag_rate_msgs_per_s={LAG_RATE} messages={total}"
    )


def main() -> None:
    asyncio.run(run(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000))


if __name__ == "__main__":
    main()
