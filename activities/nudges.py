"""A stop reaches an idle task within about a second, not at its next idle beat.

Temporal delivers a pause, stop, delete or reconfigure to a task activity only in the answer to a
heartbeat, and an idle task beats every 0.4 x its heartbeat timeout (2 minutes; activities.heartbeat),
because a beat a second cost a hundred idle connectors a sixth of the worker's core. So before a
connector's workflow waits for its tasks to stop, it runs the ``nudge_tasks`` local activity, which
NOTIFYs every worker through the offset store's PostgreSQL; each worker's ``NudgeListener`` makes
that connector's tasks beat every second for ``HURRY_S``, long enough for the cancel the workflow
sends with the same workflow task to arrive in a beat's answer.

A notification lost (a listener reconnecting after PostgreSQL restarted) costs latency, never
correctness: the idle beat still carries the cancel.

The same listener rings the doorbells of idle sinks when a source commits to their topics
(activities.doorbells), on a channel of its own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sluice.activities import doorbells as bells

if TYPE_CHECKING:
    from sqlalchemy import Engine

log = logging.getLogger(__name__)

#: The PostgreSQL channel; the payload is ``nudge_key(store schema, connector)``.
CHANNEL = "sluice_nudge"
#: How long a nudged task beats every second.
HURRY_S = 5.0
#: Pause before a listener whose connection failed connects again.
RECONNECT_S = 2.0


def nudge_key(schema: str, connector: str) -> str:
    """A connector's name in its store's schema: workers of other stores ignore its nudges."""
    return f"{schema}/{connector}"


class Nudges:
    """The tasks of this worker process that a nudge for their connector hurries."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hurries: dict[str, list[Callable[[], None]]] = {}

    @contextmanager
    def registered(self, key: str, hurry: Callable[[], None]) -> Iterator[None]:
        """``hurry`` is called for each nudge of ``key`` within the block."""
        with self._lock:
            self._hurries.setdefault(key, []).append(hurry)
        try:
            yield
        finally:
            with self._lock:
                hurries = self._hurries[key]
                hurries.remove(hurry)
                if not hurries:
                    del self._hurries[key]

    def nudge_all(self) -> int:
        """Hurry every registered task, whatever its connector (the worker is shutting down:
        worker.main.shut_down); how many there were."""
        with self._lock:
            hurries = [hurry for every in self._hurries.values() for hurry in every]
        for hurry in hurries:
            hurry()
        return len(hurries)

    def nudge(self, key: str) -> int:
        """Hurry every task registered under ``key``; how many there were."""
        with self._lock:
            hurries = list(self._hurries.get(key, ()))
        for hurry in hurries:
            hurry()
        return len(hurries)


#: This process's tasks: the worker's listener nudges them, its task activities register in it.
NUDGES = Nudges()


class NudgeListener:
    """LISTENs on CHANNEL and the doorbells' channel in a daemon thread and hands each payload to
    ``nudges`` or ``doorbells``, connecting again after a failure (PostgreSQL restarted) until
    closed."""

    def __init__(
        self,
        engine: Engine,
        nudges: Nudges = NUDGES,
        doorbells: bells.Doorbells = bells.DOORBELLS,
        *,
        poll_s: float = 1.0,
    ) -> None:
        self._engine = engine
        self._nudges = nudges
        self._doorbells = doorbells
        self._poll_s = poll_s
        self._closed = threading.Event()
        #: set once the thread listens (tests wait for it before notifying)
        self.listening = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sluice-nudges", daemon=True)

    def start(self) -> NudgeListener:
        self._thread.start()
        return self

    def close(self) -> None:
        self._closed.set()
        self._thread.join(timeout=self._poll_s + 5)

    def __enter__(self) -> NudgeListener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        while not self._closed.is_set():
            try:
                self._listen()
            except Exception as exc:  # noqa: BLE001 - nudges only speed stops up: log and listen again
                self.listening.clear()
                log.warning("task nudges: listening on PostgreSQL failed (%s); again in %.0f s", exc,
                            RECONNECT_S)  # fmt: skip
                self._closed.wait(RECONNECT_S)

    def _listen(self) -> None:
        # A connection of its own, never returned to the pool: it stays in LISTEN mode.
        pooled = self._engine.raw_connection()
        try:
            conn = pooled.driver_connection
            conn.autocommit = True  # type: ignore[union-attr]
            conn.execute(f"LISTEN {CHANNEL}")  # type: ignore[union-attr]
            conn.execute(f"LISTEN {bells.CHANNEL}")  # type: ignore[union-attr]
            self.listening.set()
            while not self._closed.is_set():
                for notify in conn.notifies(timeout=self._poll_s):  # type: ignore[union-attr]
                    if notify.channel == bells.CHANNEL:
                        self._doorbells.ring(notify.payload)
                    else:
                        self._nudges.nudge(notify.payload)
        finally:
            pooled.invalidate()
