"""Sluice's own remoting client: batched send and pull by offset, bounded by messages and seconds.

Every queue gets its own sender/reader coroutines on one event loop (the way the Spark writer and
reader use the client: many requests in flight over one connection per broker), so the numbers are
what one Python process achieves, not a single request's latency.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from sluice.connectors.rocketmq.client import RocketMQClient
from sluice.connectors.rocketmq.values import MessageQueue, OutgoingMessage

# Messages asked for per pull request; the local broker is configured to return up to 2,048
# (deploy/local/rocketmq.py), RocketMQ's default caps a pull at 32.
PULL_BATCH = 512


@dataclass(frozen=True)
class Rate:
    """Messages moved in a measured interval."""

    messages: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0


async def send(
    namesrv: str,
    topic: str,
    *,
    body_size: int,
    batch: int,
    max_messages: int,
    max_seconds: float,
    in_flight_per_queue: int = 2,
) -> Rate:
    """Send batches of ``batch`` messages of ``body_size`` bytes until either bound is reached."""
    async with RocketMQClient(namesrv) as client:
        queues = await client.queues(topic)
        messages = [OutgoingMessage(body=(b"%09d" % i).ljust(body_size, b"b")) for i in range(batch)]
        await client.send_batch(queues[0], messages[:1])  # warm up route and connection
        sent = 0
        start = time.perf_counter()
        deadline = start + max_seconds

        async def worker(mq: MessageQueue) -> None:
            nonlocal sent
            while sent < max_messages and time.perf_counter() < deadline:
                sent += len(messages)
                await client.send_batch(mq, messages)

        await asyncio.gather(*(worker(mq) for mq in queues for _ in range(in_flight_per_queue)))
        return Rate(sent, time.perf_counter() - start)


async def pull(namesrv: str, topic: str, *, max_seconds: float, chunk: int = 2048) -> Rate:
    """Pull every queue of ``topic`` from its min offset to its max offset (or until time is up)."""
    async with RocketMQClient(namesrv) as client:
        queues = await client.queues(topic)
        bounds = {mq: (await client.min_offset(mq), await client.max_offset(mq)) for mq in queues}
        received = 0
        start = time.perf_counter()
        deadline = start + max_seconds

        async def reader(mq: MessageQueue) -> None:
            nonlocal received
            offset, end = bounds[mq]
            while offset < end and time.perf_counter() < deadline:
                hi = min(offset + chunk, end)
                got = await client.pull_range(mq, offset, hi, max_per_request=PULL_BATCH, concurrency=4)
                received += len(got)
                offset = hi

        await asyncio.gather(*(reader(mq) for mq in queues))
        return Rate(received, time.perf_counter() - start)
