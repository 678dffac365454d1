"""Polling helpers for end-to-end tests."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from tests.databases import TestDatabase


async def wait_for(
    check: Callable[[], bool | Awaitable[bool]], timeout_s: float, what: str, interval_s: float = 0.5
) -> None:
    """Poll a (sync or async) condition; fail naming what did not happen."""
    import asyncio
    import inspect

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        await asyncio.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")


def replica_sink(target: TestDatabase, topics: str, **extra: str) -> dict[str, str]:
    """The CDC replica sink of docs/connectors.md (worker.demo.cdc.cdc_replica_sink) of topics
    ``<topics><table>`` into ``target``, with the tests' small batches."""
    from sluice.worker.demo.cdc import cdc_replica_sink

    connection = {"connection.url": target.jdbc_url, "connection.user": target.user,
                  "connection.password": target.password}  # fmt: skip
    small = {"batch.max.records": "500", "poll.interval.ms": "200"}
    return cdc_replica_sink(topics, connection, **{**small, **extra})
