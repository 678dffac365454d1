"""Messages a source task received and has not yet had committed, numbered per route.

The MQTT broker delivers in its own time, on paho's network thread; the runtime plans and reads
batches on its own. The inbox sits between them: each message gets the next sequence number of its
route (its partition), ``end`` is what the planner may read up to, ``take`` hands out an exact
range, and ``release`` gives back the broker's message ids of a committed range, to acknowledge.

Numbers continue from the committed position (``rebase``), so positions only grow across restarts.
A re-run of a batch after a crash is not the same messages by number: the broker hands back what
was never acknowledged, in its order, and new messages after them. ``take`` waits a while for a
range it has not received yet (a re-run starts with an empty inbox) and then gives what there is.

A connection that drops and comes back to the same session is handed again what it was delivered
and had not acknowledged, with the same packet ids and the DUP flag: those are held already, so
``put`` drops them (their acknowledgement, by packet id, still goes out at commit).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Received:
    """One delivered message."""

    seq: int
    topic: str
    payload: bytes
    qos: int
    mid: int
    retain: bool
    properties: tuple[tuple[str, str], ...] = ()
    at_ms: int = 0


@dataclass
class _Route:
    next_seq: int = 0
    held: deque[Received] = field(default_factory=deque)


class Inbox:
    """See the module docstring. Thread-safe."""

    def __init__(self, routes: int) -> None:
        self._routes = [_Route() for _ in range(routes)]
        self._changed = threading.Condition()
        #: packet ids of held QoS 1/2 messages (the broker reuses none until it is acknowledged)
        self._held_ids: set[int] = set()
        self._waiting = 0  # takes waiting for messages (a re-run): only they need waking

    def rebase(self, route: int, committed: int) -> None:
        """Number what arrives next from ``committed`` when nothing is held below it."""
        with self._changed:
            r = self._routes[route]
            if not r.held and r.next_seq < committed:
                r.next_seq = committed

    def put(self, route: int, topic: str, payload: bytes, qos: int, mid: int, retain: bool,
            properties: tuple[tuple[str, str], ...], dup: bool = False) -> bool:  # fmt: skip
        """Hold a delivered message; False for a message delivered again that is held already."""
        with self._changed:
            if qos and dup and mid in self._held_ids:
                return False
            if qos:
                self._held_ids.add(mid)
            r = self._routes[route]
            r.held.append(
                Received(r.next_seq, topic, payload, qos, mid, retain, properties, int(time.time() * 1000))
            )
            r.next_seq += 1
            if self._waiting:
                self._changed.notify_all()
            return True

    def forget_ids(self) -> None:
        """The broker started a new session (the old one expired or was lost): the packet ids of
        held messages mean nothing there any more (and may be reused), so they are not
        acknowledged; the messages themselves are still sent."""
        with self._changed:
            for r in self._routes:
                r.held = deque(replace(m, mid=0) for m in r.held)
            self._held_ids.clear()

    def end(self, route: int) -> int:
        with self._changed:
            return self._routes[route].next_seq

    def first(self, route: int) -> int:
        """The lowest number held (``end`` when nothing is)."""
        with self._changed:
            r = self._routes[route]
            return r.held[0].seq if r.held else r.next_seq

    def held(self) -> int:
        """Messages received and not yet released, over every route (acknowledgements owed)."""
        with self._changed:
            return sum(len(r.held) for r in self._routes)

    def take(self, route: int, start: int, end: int, wait_s: float) -> list[Received]:
        """The messages numbered ``[start, end)``, waiting up to ``wait_s`` for ones not received
        yet; past the wait, numbering jumps to ``end`` so later messages are never numbered inside
        a range already planned."""
        deadline = time.monotonic() + wait_s
        with self._changed:
            r = self._routes[route]
            while r.next_seq < end and (left := deadline - time.monotonic()) > 0:
                self._waiting += 1
                try:
                    self._changed.wait(left)
                finally:
                    self._waiting -= 1
            r.next_seq = max(r.next_seq, end)
            return [m for m in r.held if start <= m.seq < end]

    def release(self, route: int, end: int) -> list[Received]:
        """Drop and return every message numbered below ``end`` (its batch committed)."""
        with self._changed:
            r = self._routes[route]
            gone = []
            while r.held and r.held[0].seq < end:
                gone.append(r.held.popleft())
                self._held_ids.discard(gone[-1].mid)
            return gone
