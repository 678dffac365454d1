"""A change log read ahead of the batches, so decoding it overlaps the previous batch's Spark job.

A log-based CDC task plans a batch by reading and decoding its log on the driver (the batch's end
is where that read stopped; connectors.cdc.log_source). Done inline, that read waits for the last
batch's Spark job to end and the next job waits for the read. Started as soon as a batch is
planned, the log is read on a thread while the job runs: the driver mostly waits on Spark then,
so the decoding costs the batch no wall time.

The read follows the log until a planning takes it: it reads to the log's end, then reads on
from where it stopped every ``follow_s`` (a task whose last batch found changes; an idle one's
read is made once, so a hundred idle connectors do not each poll their server five times a
second). A read made once, at the start, found only what was written in the moment since the
planning, and the next planning read the whole batch's worth inline (in bench-cdc's steady
1,000 changes/s, planning took 0.3-0.8 s of a 1.5 s cycle).

What this module gives is the bookkeeping only: at most one read in flight, whose result is taken
only by a planning that starts exactly where it started (anything else — a re-planned range after
a crash, a failover, a read that failed — reads inline as before, so the batch is the same either
way). A first read that fails is forgotten: the inline read meets the same problem and reports
it. A continuation that fails keeps what was read before it (it ended at a commit point).
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
    stops it and hands its result to a caller starting at the same key."""

    def __init__(self, name: str, follow_s: float = 0.0) -> None:
        self.name = name
        #: how often a read continues while no one takes it (0: it reads once)
        self.follow_s = follow_s
        #: reads whose result a planning took (a planning that found nothing to take reads inline)
        self.hits = 0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._key: K | None = None
        self._result: R | None = None

    def start(self, key: K, read: Callable[[R | None], R], follow: bool = True) -> None:
        """Run ``read(None)`` (the log from ``key``) on a thread, then, when ``follow``,
        ``read(result)`` to continue it every ``follow_s`` until stopped; one in flight already is
        stopped first."""
        self.wait()
        self._key, self._result = key, None
        self._stop = stop = threading.Event()

        def run() -> None:
            try:
                self._result = read(None)
            except Exception:  # the inline read meets it again and says what it is
                log.debug("%s: reading ahead from %s failed; the next planning reads itself",
                          self.name, key, exc_info=True)  # fmt: skip
                return
            while follow and self.follow_s > 0 and not stop.wait(self.follow_s):
                try:
                    self._result = read(self._result)
                except Exception:  # what was read stands; the planning reads on from its end
                    log.debug("%s: continuing the read ahead from %s failed", self.name, key, exc_info=True)
                    return

        self._thread = threading.Thread(target=run, name=f"read-ahead {self.name}", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        """Stop the read in flight and wait for it to end (before anything else uses what the read
        uses); its result stays for ``take``."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def take(self, key: K) -> R | None:
        """The stopped read's result when it started at ``key`` (None otherwise); forgotten after."""
        self.wait()
        result, started = self._result, self._key
        self._key, self._result = None, None
        if result is None or started != key:
            return None
        self.hits += 1
        return result
