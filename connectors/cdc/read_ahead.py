"""A change log read ahead of the batches, so decoding it overlaps the previous batch's Spark job.

A log-based CDC task plans a batch by reading and decoding its log on the driver (the batch's end
is where that read stopped; connectors.cdc.log_source). Done inline, that read waits for the last
batch's Spark job to end and the next job waits for the read. Started as soon as a batch is
planned, the next stretch of the log is read on a thread while the job runs: the driver mostly
waits on Spark then, so the decoding costs the batch no wall time.

What this module gives is the bookkeeping only: at most one read in flight, whose result is taken
only by a planning that starts exactly where it started (anything else — a re-planned range after
a crash, a failover, a read that failed — reads inline as before, so the batch is the same either
way). A read that fails is forgotten: the inline read meets the same problem and reports it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

K = TypeVar("K")
R = TypeVar("R")


class ReadAhead(Generic[K, R]):
    """One read at a time on a daemon thread, keyed by where it starts (``start``); ``take``
    waits for it and hands its result to a caller starting at the same key."""

    def __init__(self, name: str) -> None:
        self.name = name
        #: reads whose result a planning took (a planning that found nothing to take reads inline)
        self.hits = 0
        self._thread: threading.Thread | None = None
        self._key: K | None = None
        self._result: R | None = None

    def start(self, key: K, read: Callable[[], R]) -> None:
        """Run ``read`` (the log from ``key``) on a thread; one in flight already is waited for."""
        self.wait()
        self._key, self._result = key, None

        def run() -> None:
            try:
                self._result = read()
            except Exception:  # the inline read meets it again and says what it is
                log.debug("%s: reading ahead from %s failed; the next planning reads itself",
                          self.name, key, exc_info=True)  # fmt: skip

        self._thread = threading.Thread(target=run, name=f"read-ahead {self.name}", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        """Until no read is in flight (before anything else uses what the read uses)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def take(self, key: K) -> R | None:
        """The finished read's result when it started at ``key`` (None otherwise); forgotten after."""
        self.wait()
        result, started = self._result, self._key
        self._key, self._result = None, None
        if result is None or started != key:
            return None
        self.hits += 1
        return result
