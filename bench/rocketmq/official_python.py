"""The official RocketMQ 5.x Python client (``rocketmq-python-client``) sending through the gRPC proxy.

It has no batch send: every message is one SendMessage RPC to the proxy. To give it its best shot it
is measured with ``send_async`` and a window of requests in flight (the synchronous ``send`` is
slower still); the run is bounded by messages and seconds.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from concurrent.futures import Future
from typing import Any

from bench.rocketmq.sluice_client import Rate


def send(
    proxy: str, topic: str, *, body_size: int, max_messages: int, max_seconds: float, window: int = 64
) -> Rate:
    """Send ``body_size``-byte messages one per RPC until either bound is reached."""
    from rocketmq import ClientConfiguration, Credentials, Message, Producer

    logging.getLogger("rocketmq").setLevel(logging.ERROR)
    producer = Producer(ClientConfiguration(proxy, Credentials()), (topic,))
    producer.startup()
    try:
        body = b"o" * body_size

        def message() -> Any:
            msg = Message()
            msg.topic = topic
            msg.body = body
            return msg

        producer.send(message())  # warm up route and channel
        pending: deque[Future[Any]] = deque()
        sent = 0
        start = time.perf_counter()
        deadline = start + max_seconds
        while sent < max_messages and time.perf_counter() < deadline:
            if len(pending) >= window:
                pending.popleft().result()
            pending.append(producer.send_async(message()))
            sent += 1
        for fut in pending:
            fut.result()
        return Rate(sent, time.perf_counter() - start)
    finally:
        producer.shutdown()
