"""Doorbells: which idle tasks a commit to a topic wakes, and how a ring ends a task's idle wait.

Through PostgreSQL in tests/store/test_nudges.py; here the registry and the heartbeater's wait,
in Temporal's activity test environment (a real activity context, no server).
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from datetime import timedelta

import pytest
from temporalio.testing import ActivityEnvironment

from sluice.activities.doorbells import Doorbells, doorbell_key
from sluice.activities.heartbeat import Heartbeater

#: An idle wait no test here should sit through: a wait that ends sooner was ended by a ring.
LONG_WAIT_S = 30.0


@pytest.mark.parametrize(
    ("key", "woken"),
    [
        (doorbell_key("store_a", "orders"), {"orders", "any-ord"}),
        (doorbell_key("store_a", "payments"), {"payments"}),
        (doorbell_key("store_a", "refunds"), set()),  # a topic no task reads
        (doorbell_key("store_b", "orders"), {"other-store"}),  # another store's commit
    ],
)
def test_a_ring_wakes_the_tasks_of_its_store_that_hear_its_topic(key: str, woken: set[str]) -> None:
    bells, rung = Doorbells(), []
    doors = {
        "orders": ("store_a", lambda t: t == "orders"),
        "any-ord": ("store_a", lambda t: t.startswith("ord")),
        "payments": ("store_a", lambda t: t == "payments"),
        "other-store": ("store_b", lambda t: True),
    }
    contexts = [bells.registered(schema, hears, lambda n=name: rung.append(n))
                for name, (schema, hears) in doors.items()]  # fmt: skip
    for context in contexts:
        context.__enter__()
    assert bells.ring(key) == len(woken)
    assert set(rung) == woken
    for context in contexts:
        context.__exit__(None, None, None)
    assert bells.ring(key) == 0, "a task that ended is still rung"


def _environment() -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = replace(env.info, heartbeat_timeout=timedelta(seconds=300))
    return env


def test_a_ring_ends_an_idle_wait() -> None:
    def idle_until_rung() -> float:
        with Heartbeater() as hb:
            threading.Timer(0.2, hb.ring).start()
            started = time.monotonic()
            hb.sleep(LONG_WAIT_S)
            return time.monotonic() - started

    assert _environment().run(idle_until_rung) < LONG_WAIT_S / 2


def test_a_ring_while_the_task_plans_ends_its_next_wait_and_only_that() -> None:
    """A commit between a task's planning and its wait is not slept through; once heard, the ring
    is spent: the wait after it is a whole one."""

    def waits() -> tuple[float, float]:
        with Heartbeater() as hb:
            hb.ring()  # as the task planned
            started = time.monotonic()
            hb.sleep(LONG_WAIT_S)
            first = time.monotonic() - started
            started = time.monotonic()
            hb.sleep(0.5)
            return first, time.monotonic() - started

    first, second = _environment().run(waits)
    assert first < LONG_WAIT_S / 2
    assert second >= 0.5
