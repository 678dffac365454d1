"""Polling helpers for end-to-end tests."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable


async def wait_for(
    check: Callable[[], bool | Awaitable[bool]], timeout_s: float, what: str, interval_s: float = 1.0
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
