"""An idle sink wakes when a source of its store commits to its topics, not at its next poll.

An idle task waits between empty polls, longer and longer up to ``poll.idle.max.ms`` (5 s by
default), because each poll of a hundred idle connectors costs the worker CPU (docs/scaling.md).
A sink reading a topic that a Sluice source writes need not pay for that wait in latency: a
source's batch commit NOTIFYs its topics through the offset store's PostgreSQL in the commit's
own transaction (PostgreSQL delivers it when, and only when, the batch is committed), and each
worker's listener (activities.nudges.NudgeListener) rings the doorbell of every task it runs that
reads one of those topics, which wakes its idle wait (``Heartbeater.ring``).

It rings after a whole source batch is in the broker, not at its first message: a sink woken by a
broker long-poll at the first message ran more, smaller batches (connectors.rocketmq.client,
``wait_for_messages``). A ring lost (a listener reconnecting), or a topic another program writes,
costs only latency: the task still polls, at most ``poll.idle.max.ms`` apart.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

#: The PostgreSQL channel; the payload is ``doorbell_key(store schema, topic)``.
CHANNEL = "sluice_doorbell"


def doorbell_key(schema: str, topic: str) -> str:
    """A topic's name in its store's schema: tasks of other stores do not hear it."""
    return f"{schema}/{topic}"


@runtime_checkable
class HearsDoorbells(Protocol):
    """A task runner whose idle wait a commit to one of its topics should end (the sink runner)."""

    def hears(self, topic: str) -> bool:
        """Whether ``topic`` is one this task reads (its ``topics`` or ``topics.regex``)."""
        ...


@dataclass(frozen=True, eq=False)
class _Door:
    schema: str
    hears: Callable[[str], bool]
    ring: Callable[[], None]


class Doorbells:
    """The doors of this worker process's tasks: which topics each hears, and how to wake it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._doors: list[_Door] = []

    @contextmanager
    def registered(
        self, schema: str, hears: Callable[[str], bool], ring: Callable[[], None]
    ) -> Iterator[None]:
        """``ring`` is called for each commit to a topic of store ``schema`` that ``hears``
        accepts, within the block."""
        door = _Door(schema, hears, ring)
        with self._lock:
            self._doors.append(door)
        try:
            yield
        finally:
            with self._lock:
                self._doors.remove(door)

    def ring(self, key: str) -> int:
        """Wake every task that hears the topic of ``key`` (``doorbell_key``); how many it woke."""
        schema, _, topic = key.partition("/")
        with self._lock:
            doors = [d for d in self._doors if d.schema == schema]
        woken = [d for d in doors if d.hears(topic)]
        for door in woken:
            door.ring()
        return len(woken)


#: This process's doors: the worker's listener rings them, its sink task activities register.
DOORBELLS = Doorbells()
