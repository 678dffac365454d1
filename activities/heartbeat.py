"""Heartbeats for synchronous task activities while a Spark batch blocks the activity thread.

A micro-batch can take longer than the heartbeat timeout, and Temporal only delivers cancellation
to an activity that heartbeats, so a daemon thread heartbeats every second with the latest progress
while the task works. An idle task, asleep between empty polls, beats less often (``idle_beat_s``)
and its thread wakes less often too:
each beat is an RPC to Temporal (the worker throttles heartbeats at a second, worker.main), and a
hundred idle tasks beating every second cost the worker a sixth of a core and Temporal more.
It runs inside a copy of the activity's context (``contextvars``), which is what lets
``activity.heartbeat`` and ``activity.is_cancelled`` work from that thread.
"""

from __future__ import annotations

import contextvars
import threading
import time
from dataclasses import asdict, dataclass, field

from temporalio import activity

from sluice.activities.nudges import HURRY_S


@dataclass
class Progress:
    """Heartbeat details: a hint for the next attempt; the offset store is the truth."""

    last_committed_batch: int = -1
    batches: int = 0
    records: int = 0
    phase: str = "starting"
    # Partition -> units behind after the last batch (activities.task_metrics.partition_lag).
    lag: dict[str, int] = field(default_factory=dict)


#: While idle, beats at most this share of the heartbeat timeout apart (2 minutes of the backstop's
#: default 5: workflows.tasks.backstop_timeout_s).
IDLE_BEAT_SHARE = 0.4
#: While idle, looks for a worker shutdown at least this often: a backstop, since the worker wakes
#: every task's heartbeat thread as it shuts down (``NUDGES.nudge_all``; a cancel arrives in a beat's
#: answer, looked for a second after each beat). Each look is a thread's wake-up: a hundred idle
#: tasks looking every 5 s were 20 wake-ups a second of their worker.
IDLE_CHECK_S = 60.0


def idle_beat_s(interval_s: float, timeout_s: float) -> float:
    """Seconds between beats while a task is idle: IDLE_BEAT_SHARE of the heartbeat timeout
    (``timeout_s``; 0: none), never more often than a working task's ``interval_s``. Nothing in
    the details changes while idle; the beat only keeps the task alive and fetches a cancel."""
    return max(interval_s, IDLE_BEAT_SHARE * timeout_s)


def next_wake_s(busy: bool, since_beat_s: float, interval_s: float, idle_beat_s: float) -> float:
    """When the heartbeat thread looks again. Working or hurried: every ``interval_s``. Just after
    a beat: ``interval_s`` too, since a cancel arrives in the beat's answer. Idle otherwise: at the
    next beat, or after IDLE_CHECK_S (a hurry, a stop or the worker's shutdown wakes it sooner; a
    task that starts working between two looks is beaten at its batch's commit)."""
    if busy or since_beat_s < interval_s:
        return interval_s
    return max(interval_s, min(IDLE_CHECK_S, idle_beat_s - since_beat_s))


class Heartbeater:
    def __init__(self, interval_s: float = 1.0) -> None:
        self.progress = Progress()
        self._interval_s = interval_s
        timeout = activity.info().heartbeat_timeout
        self._timeout_s = timeout.total_seconds() if timeout else 0.0
        #: whether the task sleeps between empty polls (it then beats every ``_idle_beat_s``)
        self._idle = False
        self._idle_beat_s = idle_beat_s(interval_s, self._timeout_s)
        self._stop = threading.Event()
        #: wakes the heartbeat thread before its second is up (a stop, a hurry)
        self._wake = threading.Event()
        #: until when (monotonic) an idle task beats every second: its connector was nudged
        self._hurry_until = 0.0
        #: set by the heartbeat thread once the task should stop, or by a doorbell: wakes ``sleep``
        self._alarm = threading.Event()
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run, args=(self._loop,), name="sluice-heartbeat", daemon=True
        )

    def __enter__(self) -> Heartbeater:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=5)

    def hurry(self) -> None:
        """Beat now and every second for ``nudges.HURRY_S``, idle or not: the connector's
        workflow is cancelling its tasks, and the cancel arrives in a beat's answer; or the worker
        is shutting down (``NUDGES.nudge_all``), which each look after a beat sees."""
        self._hurry_until = time.monotonic() + HURRY_S
        self._wake.set()

    def ring(self) -> None:
        """Data may have arrived (a source committed to a topic this task reads: activities.doorbells):
        end the idle wait now, or, if the task is not waiting, the next one at once."""
        self._alarm.set()

    def beat(self) -> None:
        activity.heartbeat(asdict(self.progress))

    def _loop(self) -> None:
        last_beat = 0.0
        wait_s = self._interval_s
        while True:
            self._wake.wait(wait_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            now = time.monotonic()
            hurried = now < self._hurry_until
            if not self._idle or hurried or now - last_beat >= self._idle_beat_s:
                last_beat = now
                try:
                    self.beat()
                except Exception:  # noqa: BLE001 - a failed heartbeat must not kill the batch
                    activity.logger.warning("heartbeat failed", exc_info=True)
            if self.should_stop():
                self._alarm.set()
            busy = not self._idle or hurried
            wait_s = next_wake_s(busy, now - last_beat, self._interval_s, self._idle_beat_s)

    def should_stop(self) -> bool:
        return activity.is_cancelled() or activity.is_worker_shutdown()

    def sleep(self, seconds: float) -> None:
        """Idle between empty batches, waking early on cancellation.

        Temporal delivers a cancel only in a heartbeat's answer, so the heartbeat thread, which
        looks a second after each beat and when the worker shuts down (``NUDGES.nudge_all``), wakes this
        (a 0.1 s polling loop cost a hundred idle connectors on one worker ten wake-ups a second
        each). Meanwhile it beats every ``idle_beat_s`` (2 minutes at the default backstop); a
        workflow cancelling its tasks nudges them first (``hurry``, activities.nudges), so a
        pause or stop still reaches an idle task within about a second. A doorbell (``ring``)
        ends it too, and one rung while the task planned ends the next wait at once: the task then
        plans again, and nothing committed between its planning and its wait is slept through."""
        if self.should_stop():
            return
        self._idle = True
        try:
            self._alarm.wait(seconds)
        finally:
            self._idle = False  # its heartbeat thread beats every second again at its next wake
            if not self.should_stop():
                self._alarm.clear()  # rung: heard (a stop stays set, and ends each later wait)
