"""A connector's nudge reaches its tasks on every worker of the store, through real PostgreSQL,
and a source's commit rings the doorbells of the sinks reading its topics.

The workflow nudges a connector before it waits for its tasks to stop (activities.nudges); each
worker's listener hurries the heartbeats of that connector's tasks it runs, and only those. The same
listener rings the idle sinks of a topic when a batch that wrote it commits (activities.doorbells).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from sqlalchemy import create_engine, text

from sluice.activities.doorbells import Doorbells
from sluice.activities.nudges import NudgeListener, Nudges, nudge_key
from sluice.activities.store import OffsetStore, PlanNotRecordedError
from sluice.connectors.model import BatchPlan, PartitionRange
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
def worker_registries(stack_config: StackConfig) -> Iterator[tuple[Nudges, Doorbells]]:
    """One worker's registries with its listener on the store's database (its connections named,
    so that a test can kill them and no one else's)."""
    engine = create_engine(stack_config.database_url, connect_args={"application_name": LISTENER_APP})
    nudges, doorbells = Nudges(), Doorbells()
    listener = NudgeListener(engine, nudges, doorbells, poll_s=0.2).start()
    assert listener.listening.wait(10), "the listener never listened"
    yield nudges, doorbells
    listener.close()
    engine.dispose()


@pytest.fixture
def worker_nudges(worker_registries: tuple[Nudges, Doorbells]) -> Nudges:
    return worker_registries[0]


@pytest.fixture
def worker_doorbells(worker_registries: tuple[Nudges, Doorbells]) -> Doorbells:
    return worker_registries[1]


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


def test_a_worker_shutting_down_hurries_every_task_of_every_connector() -> None:
    nudges, first, second, other = Nudges(), Hurries(), Hurries(), Hurries()
    with nudges.registered("s/c", first), nudges.registered("s/c", second), nudges.registered("t/d", other):
        assert nudges.nudge_all() == 3
    assert nudges.nudge_all() == 0
    assert (first.count, second.count, other.count) == (1, 1, 1)


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


def _source_batch(store: OffsetStore, batch_id: int) -> BatchPlan:
    lines = PartitionRange("/data/orders.csv", batch_id * 10, batch_id * 10 + 10)
    return store.record_plan(BatchPlan("orders-src", 0, batch_id, (lines,)))


def test_a_source_commit_rings_the_sinks_of_its_topics_and_no_others(
    store: OffsetStore, worker_doorbells: Doorbells
) -> None:
    orders, orders_by_regex, payments, other_store = Hurries(), Hurries(), Hurries(), Hurries()
    schema, door = store.schema, worker_doorbells.registered
    with ExitStack() as sinks:
        sinks.enter_context(door(schema, lambda t: t == "orders", orders))
        sinks.enter_context(door(schema, lambda t: t.startswith("ord"), orders_by_regex))
        sinks.enter_context(door(schema, lambda t: t == "payments", payments))
        sinks.enter_context(door("another_schema", lambda t: True, other_store))
        store.commit(_source_batch(store, 0), rings={"orders"})
        assert orders.called.wait(10) and orders_by_regex.called.wait(10), "the topic's sinks were not woken"
        # notifications arrive in order: once this one is in, so was the first
        store.commit(_source_batch(store, 1), rings={"payments"})
        assert payments.called.wait(10)
        assert (orders.count, orders_by_regex.count, payments.count, other_store.count) == (1, 1, 1, 0)


def test_a_commit_that_fails_rings_nothing(store: OffsetStore, worker_doorbells: Doorbells) -> None:
    """PostgreSQL delivers a NOTIFY at its transaction's commit: a sink is never woken for a batch
    that is not in the store."""
    woken, marker = Hurries(), Hurries()
    with (
        worker_doorbells.registered(store.schema, lambda t: t == "orders", woken),
        worker_doorbells.registered(store.schema, lambda t: t == "marker", marker),
    ):
        never_recorded = BatchPlan("orders-src", 0, 7, (PartitionRange("/data/orders.csv", 0, 10),))
        with pytest.raises(PlanNotRecordedError):
            store.commit(never_recorded, rings={"orders"})
        store.commit(_source_batch(store, 0), rings={"marker"})  # notifications arrive in order
        assert marker.called.wait(10)
        assert woken.count == 0
