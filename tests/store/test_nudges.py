"""A connector's nudge reaches its tasks on every worker of the store, through real PostgreSQL.

The workflow nudges a connector before it waits for its tasks to stop (activities.nudges); each
worker's listener hurries the heartbeats of that connector's tasks it runs, and only those.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from sqlalchemy import create_engine, text

from sluice.activities.nudges import NudgeListener, Nudges, nudge_key
from sluice.activities.store import OffsetStore
from sluice.deploy.local.config import StackConfig

LISTENER_APP = f"sluice-nudge-test-{uuid.uuid4().hex[:8]}"


class Hurries:
    """A task's ``hurry`` stand-in: counts its calls."""

    def __init__(self) -> None:
        self.count = 0
        self.called = threading.Event()

    def __call__(self) -> None:
        self.count += 1
        self.called.set()


@pytest.fixture
def worker_nudges(stack_config: StackConfig) -> Iterator[Nudges]:
    """One worker's registry with its listener on the store's database (its connections named, so
    that a test can kill them and no one else's)."""
    engine = create_engine(stack_config.database_url, connect_args={"application_name": LISTENER_APP})
    nudges = Nudges()
    listener = NudgeListener(engine, nudges, poll_s=0.2).start()
    assert listener.listening.wait(10), "the listener never listened"
    yield nudges
    listener.close()
    engine.dispose()


def test_a_nudge_hurries_the_connectors_tasks_and_no_others(
    store: OffsetStore, worker_nudges: Nudges
) -> None:
    mine, mine_too, other, other_store = Hurries(), Hurries(), Hurries(), Hurries()
    with ExitStack() as tasks:
        tasks.enter_context(worker_nudges.registered(nudge_key(store.schema, "orders"), mine))
        tasks.enter_context(worker_nudges.registered(nudge_key(store.schema, "orders"), mine_too))
        tasks.enter_context(worker_nudges.registered(nudge_key(store.schema, "orders-2"), other))
        tasks.enter_context(worker_nudges.registered(nudge_key("another_schema", "orders"), other_store))
        store.nudge("orders")
        assert mine.called.wait(10) and mine_too.called.wait(10), "the connector's tasks were not hurried"
        store.nudge("orders-2")  # notifications arrive in order: once this one is in, so was the first
        assert other.called.wait(10)
        assert (mine.count, mine_too.count, other.count, other_store.count) == (1, 1, 1, 0)
    store.nudge("orders")  # the tasks ended: nothing registered is left to hurry
    assert worker_nudges.nudge(nudge_key(store.schema, "orders")) == 0


def test_unregistering_one_task_keeps_the_others() -> None:
    nudges, first, second = Nudges(), Hurries(), Hurries()
    with nudges.registered("s/c", first):
        with nudges.registered("s/c", second):
            assert nudges.nudge("s/c") == 2
        assert nudges.nudge("s/c") == 1
    assert nudges.nudge("s/c") == 0
    assert (first.count, second.count) == (2, 1)


def test_the_listener_listens_again_after_its_connection_is_killed(
    store: OffsetStore, worker_nudges: Nudges
) -> None:
    hurried = Hurries()
    with worker_nudges.registered(nudge_key(store.schema, "orders"), hurried):
        with store.engine.begin() as conn:  # as a PostgreSQL restart would: its backend goes away
            killed = conn.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = :app"
                ),
                {"app": LISTENER_APP},
            ).scalar_one()
        assert killed == 1
        deadline = time.monotonic() + 30
        while not hurried.called.is_set():
            assert time.monotonic() < deadline, "no nudge arrived after the listener's connection was killed"
            store.nudge("orders")
            hurried.called.wait(0.5)
