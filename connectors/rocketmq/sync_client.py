"""Synchronous facade over RocketMQClient for threads, Temporal sync activities and Spark executors.

Lifecycle:
1. The constructor starts a daemon thread running a private event loop and builds the async client
   on it (so its connections belong to that loop).
2. Each method submits the coroutine to that loop and blocks for the result; any number of threads
   may call concurrently (their requests share the pooled connections).
3. ``close()`` (or leaving the ``with`` block) closes the connections, stops the loop and joins the
   thread. A process forked after construction (Spark's Python workers) gets a fresh loop on first
   use instead of the parent's dead thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from sluice.connectors.rocketmq.client import RocketMQClient
from sluice.connectors.rocketmq.codec import EncodedBatch
from sluice.connectors.rocketmq.errors import RequestTimeoutError, RocketMQError
from sluice.connectors.rocketmq.routing import ClusterInfo
from sluice.connectors.rocketmq.values import (
    Message,
    MessageColumns,
    MessageQueue,
    OutgoingMessage,
    PullResult,
    SendResult,
    TopicRoute,
)

T = TypeVar("T")


class SyncRocketMQClient:
    """Blocking twin of RocketMQClient (same methods, same errors)."""

    def __init__(self, namesrv_addr: str, **options: Any) -> None:
        self._namesrv_addr = namesrv_addr
        self._options = options
        self._lock = threading.Lock()
        self._closed = False
        self._pid = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: RocketMQClient | None = None
        self._start()

    def _start(self) -> None:
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=run, name="sluice-rocketmq-loop", daemon=True)
        thread.start()
        ready.wait()

        async def build() -> RocketMQClient:
            return RocketMQClient(self._namesrv_addr, **self._options)

        self._loop, self._thread, self._pid = loop, thread, os.getpid()
        self._client = asyncio.run_coroutine_threadsafe(build(), loop).result()

    def _current(self) -> tuple[asyncio.AbstractEventLoop, RocketMQClient]:
        with self._lock:
            if self._closed:
                raise RocketMQError("rocketmq: client is closed")
            if self._pid != os.getpid():  # forked: the parent's loop thread does not exist here
                self._start()
            loop, client = self._loop, self._client
        assert loop is not None and client is not None
        return loop, client

    def _run(self, coro_fn: Any, *args: Any, **kwargs: Any) -> Any:
        loop, client = self._current()
        coro: Coroutine[Any, Any, Any] = getattr(client, coro_fn)(*args, **kwargs)
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def _run_within(self, timeout_s: float | None, what: str, coro_fn: str, *args: Any) -> Any:
        """``_run`` with a deadline: past it the call is cancelled and RequestTimeoutError raised.

        For callers that must answer in bounded time (an activity under a start-to-close timeout)
        whatever every server's retries would add up to.
        """
        loop, client = self._current()
        future = asyncio.run_coroutine_threadsafe(getattr(client, coro_fn)(*args), loop)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise RequestTimeoutError(f"rocketmq: {what} did not finish within {timeout_s:g} s") from None

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread, client = self._loop, self._thread, self._client
        if loop is None or thread is None or client is None or self._pid != os.getpid():
            return
        try:
            asyncio.run_coroutine_threadsafe(client.close(), loop).result(timeout=10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            if not thread.is_alive():
                loop.close()

    def __enter__(self) -> SyncRocketMQClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def topic_route(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        result: TopicRoute = self._run("topic_route", topic, refresh=refresh)
        return result

    def queues(self, topic: str) -> list[MessageQueue]:
        result: list[MessageQueue] = self._run("queues", topic)
        return result

    def create_topic(
        self, topic: str, *, queue_count: int = 4, cluster: str | None = None, perm: int = 6
    ) -> None:
        self._run("create_topic", topic, queue_count=queue_count, cluster=cluster, perm=perm)

    def cluster_info(self, *, timeout_s: float | None = None) -> ClusterInfo:
        """RocketMQClient.cluster_info; ``timeout_s`` bounds the whole call (RequestTimeoutError)."""
        result: ClusterInfo = self._run_within(timeout_s, "cluster info", "cluster_info")
        return result

    def all_topics(self) -> list[str]:
        return list(self._run("all_topics"))

    def topic_exists(self, topic: str) -> bool:
        return bool(self._run("topic_exists", topic))

    def delete_topic(self, topic: str, *, timeout_s: float | None = None) -> None:
        """RocketMQClient.delete_topic; ``timeout_s`` bounds the whole call (RequestTimeoutError)."""
        self._run_within(timeout_s, f"delete topic {topic!r}", "delete_topic", topic)

    def groups(self) -> list[str]:
        return list(self._run("groups"))

    def delete_group(self, group: str, *, timeout_s: float | None = None) -> None:
        """RocketMQClient.delete_group; ``timeout_s`` bounds the whole call (RequestTimeoutError)."""
        self._run_within(timeout_s, f"delete consumer group {group!r}", "delete_group", group)

    def min_offset(self, mq: MessageQueue) -> int:
        return int(self._run("min_offset", mq))

    def max_offset(self, mq: MessageQueue) -> int:
        return int(self._run("max_offset", mq))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return int(self._run("search_offset", mq, timestamp_ms))

    def pull(self, mq: MessageQueue, offset: int, max_count: int = 32) -> PullResult:
        result: PullResult = self._run("pull", mq, offset, max_count)
        return result

    def wait_for_messages(self, positions: Mapping[MessageQueue, int], timeout_s: float) -> bool:
        """RocketMQClient.wait_for_messages: True as soon as any queue has a message at its position."""
        return bool(self._run("wait_for_messages", positions, timeout_s))

    def pull_range(
        self, mq: MessageQueue, start: int, end: int, *, max_per_request: int = 32, concurrency: int = 8
    ) -> list[Message]:
        result: list[Message] = self._run(
            "pull_range", mq, start, end, max_per_request=max_per_request, concurrency=concurrency
        )
        return result

    def pull_range_columns(
        self, mq: MessageQueue, start: int, end: int, *, max_per_request: int = 32, concurrency: int = 8
    ) -> MessageColumns:
        result: MessageColumns = self._run(
            "pull_range_columns", mq, start, end, max_per_request=max_per_request, concurrency=concurrency
        )
        return result

    def send_batch(self, mq: MessageQueue, messages: Sequence[OutgoingMessage]) -> SendResult:
        result: SendResult = self._run("send_batch", mq, messages)
        return result

    def message_ids(self, count: int) -> list[str]:
        # Through _current: a forked process must not continue its parent's id sequence.
        return self._current()[1].message_ids(count)

    def send_encoded(self, mq: MessageQueue, batch: EncodedBatch) -> SendResult:
        result: SendResult = self._run("send_encoded", mq, batch)
        return result

    def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        self._run("update_consumer_offset", group, mq, offset)

    def group_online(self, group: str, topic: str) -> bool:
        return bool(self._run("group_online", group, topic))

    def query_consumer_offset(self, group: str, mq: MessageQueue) -> int | None:
        result: int | None = self._run("query_consumer_offset", group, mq)
        return result
