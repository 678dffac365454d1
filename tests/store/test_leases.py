"""Worker leases through real PostgreSQL: a SIGKILLed worker's task attempts are claimed once,
by one live worker, after their timeout; nothing of a live worker is ever claimed
(activities.leases, the liveness behind a lost worker's tasks moving)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest
from sqlalchemy import create_engine

from sluice.activities.leases import WorkerLease, lost_error
from sluice.activities.processes import Process, start_ticks, this_process
from sluice.activities.store import OffsetStore
from sluice.activities.store.leases import LostTask, TaskAttempt
from sluice.deploy.local.config import StackConfig

#: A worker process holding two task leases until it is killed (stdout: "holding" once they are held).
#: It records its process only when told to: otherwise it stands for a worker on another machine.
DOOMED_WORKER = """
import sys, time
from sqlalchemy import create_engine
from sluice.activities.leases import WorkerLease, lost_error
from sluice.activities.processes import Process, start_ticks, this_process
from sluice.activities.processes import Process, start_ticks, this_process
from sluice.activities.store.leases import TaskAttempt
url, schema, timeout_s, name = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[5]
lease = WorkerLease(create_engine(url), schema, f"{name}@test", lambda lost: None, renew_s=0.2,
                    process=this_process() if sys.argv[4] == "here" else None).start()
first, second = (TaskAttempt(f"{name}-{i}".encode(), "orders", i, "wf-orders", "run-1") for i in (0, 1))
with lease.holding(first, timeout_s), lease.holding(second, timeout_s):
    print("holding", flush=True)
    time.sleep(3600)
"""


class Claims:
    """A worker's ``on_lost``: what it claimed, and when (monotonic)."""

    def __init__(self) -> None:
        self.lost: list[LostTask] = []
        self.at: list[float] = []
        self.any = threading.Event()

    def __call__(self, tasks: list[LostTask]) -> None:
        self.lost += tasks
        self.at += [time.monotonic()] * len(tasks)
        self.any.set()


@contextmanager
def doomed_worker(
    stack_config: StackConfig,
    schema: str,
    timeout_s: float,
    *,
    on_this_machine: bool = False,
    name: str = "doomed",
) -> Iterator[subprocess.Popen[str]]:
    where = "here" if on_this_machine else "elsewhere"
    proc = subprocess.Popen(
        [sys.executable, "-c", DOOMED_WORKER, stack_config.database_url, schema, str(timeout_s), where, name],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "holding"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def live_worker(store: OffsetStore, name: str, claims: Claims, **timing: float) -> WorkerLease:
    timing = {"renew_s": 0.2, "floor_s": 0.6, **timing}
    return WorkerLease(store.engine, store.schema, f"{name}@test", claims, **timing).start()


def attempt(token: bytes, task_id: int) -> TaskAttempt:
    return TaskAttempt(token, "orders", task_id, "wf-orders", "run-1")


def test_a_killed_workers_attempts_are_claimed_once_after_their_timeout(
    store: OffsetStore, stack_config: StackConfig
) -> None:
    timeout_s = 1.5
    a_claims, b_claims = Claims(), Claims()
    with ExitStack() as stack:
        a = live_worker(store, "a", a_claims, steady_s=0.4)
        stack.callback(a.close)
        b = live_worker(store, "b", b_claims, steady_s=0.4)
        stack.callback(b.close)
        stack.enter_context(a.holding(attempt(b"live-a", 2), timeout_s))
        # A timeout shorter than a few renewals counts as floor_s: a live worker's lease is up to a
        # renewal old, and its attempts must never look lost.
        stack.enter_context(a.holding(attempt(b"short-a", 4), 0.05))
        with b.holding(attempt(b"released-b", 3), 0.1):
            pass  # an attempt that ended is never claimed, however short its timeout
        doomed = stack.enter_context(doomed_worker(stack_config, store.schema, timeout_s))
        time.sleep(timeout_s + 1.0)
        assert not a_claims.lost and not b_claims.lost, "a live worker's attempt was claimed"
        doomed.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        deadline = killed_at + timeout_s + 10
        while len(a_claims.lost) + len(b_claims.lost) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # a second claim of the same attempt, were there one, arrives by then
    claimed = a_claims.lost + b_claims.lost
    assert sorted(((t.attempt, t.worker) for t in claimed), key=lambda c: c[0].task_token) == [
        (TaskAttempt(b"doomed-0", "orders", 0, "wf-orders", "run-1"), "doomed@test"),
        (TaskAttempt(b"doomed-1", "orders", 1, "wf-orders", "run-1"), "doomed@test"),
    ]
    # Claimed after the timeout counted from its last renewal (at most renew_s before the kill).
    assert min(a_claims.at + b_claims.at) - killed_at >= timeout_s - 0.2 - 0.1
    assert all(t.silent_s >= timeout_s for t in claimed)


def test_a_worker_on_the_same_machine_claims_an_ended_workers_attempts_at_once(
    store: OffsetStore, stack_config: StackConfig
) -> None:
    """A worker restarted in place: its predecessor's process is gone from this machine, so its
    attempts are claimed on the next turn, long before their timeout and before the claimer's own
    lease is steady; a live worker on the same machine is never taken for ended."""
    timeout_s = 120.0
    here = this_process()
    assert here is not None, "/proc is needed to tell that a process on this machine has ended"
    restarted_claims, sibling_claims = Claims(), Claims()
    with ExitStack() as stack:
        # A live worker on this machine: a process of its own that goes on running.
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        stack.callback(sleeper.wait)
        stack.callback(sleeper.kill)
        sibling_process = Process(here.machine, sleeper.pid, start_ticks(sleeper.pid) or 0)
        sibling = WorkerLease(store.engine, store.schema, "sibling@test", sibling_claims, renew_s=0.2,
                              steady_s=60.0, process=sibling_process).start()  # fmt: skip
        stack.callback(sibling.close)
        stack.enter_context(sibling.holding(attempt(b"sibling-0", 0), timeout_s))
        doomed = stack.enter_context(
            doomed_worker(stack_config, store.schema, timeout_s, on_this_machine=True)
        )
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        killed_at = time.monotonic()
        restarted = WorkerLease(store.engine, store.schema, "restarted@test", restarted_claims,
                                renew_s=0.2, steady_s=60.0, process=here).start()  # fmt: skip
        stack.callback(restarted.close)
        deadline = killed_at + 5
        while len(restarted_claims.lost) + len(sibling_claims.lost) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # more claims, were there any, arrive by then
    claimed = restarted_claims.lost + sibling_claims.lost
    assert sorted((t.attempt.task_token, t.worker, t.silent_s) for t in claimed) == [
        (b"doomed-0", "doomed@test", None),
        (b"doomed-1", "doomed@test", None),
    ]
    assert min(restarted_claims.at + sibling_claims.at) - killed_at < 5
    assert "doomed@test has ended (its process is gone" in str(lost_error(claimed[0]))


def test_a_worker_claims_nothing_before_its_own_lease_is_steady(
    store: OffsetStore, stack_config: StackConfig
) -> None:
    """Just after the store comes back every lease looks old; a worker waits ``steady_s`` of its
    own renewals, so that live workers renew before anyone claims their tasks."""
    with doomed_worker(stack_config, store.schema, 0.2) as doomed:
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
    time.sleep(1.0)  # both attempts long lost
    claims = Claims()
    started = time.monotonic()
    worker = live_worker(store, "late", claims, steady_s=2.0)
    try:
        assert claims.any.wait(10), "the lost attempts were never claimed"
        assert claims.at[0] - started >= 2.0
        assert sorted(t.attempt.task_token for t in claims.lost) == [b"doomed-0", b"doomed-1"]
    finally:
        worker.close()


def test_a_closed_worker_leaves_nothing_to_claim(store: OffsetStore) -> None:
    """A worker stopping gracefully drops its leases (its tasks handed over): none is claimed."""
    leaving_claims, claims = Claims(), Claims()
    leaving = live_worker(store, "leaving", leaving_claims, steady_s=0.4)
    stack = ExitStack()
    stack.enter_context(leaving.holding(attempt(b"leaving-0", 0), 0.3))
    leaving.close()  # before its task's block ends, as a worker whose graceful shutdown timed out
    watcher = live_worker(store, "watcher", claims, steady_s=0.4)
    try:
        time.sleep(2.0)
        assert not claims.lost
    finally:
        watcher.close()
        stack.close()


def test_a_worker_fails_at_most_its_share_of_lost_attempts_per_turn(
    store: OffsetStore, stack_config: StackConfig
) -> None:
    """A dead worker's attempts are claimed a few per renewal turn, so that whoever takes their
    tasks gets their replays spread out, not all at once."""
    with doomed_worker(stack_config, store.schema, 0.2) as doomed:
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
    time.sleep(1.0)  # both attempts long lost
    turns: list[list[LostTask]] = []
    worker = WorkerLease(store.engine, store.schema, "one-a-turn@test", turns.append, renew_s=0.2,
                         steady_s=0.0, floor_s=0.6, claims_per_turn=1).start()  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while sum(map(len, turns)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        worker.close()
    assert [len(turn) for turn in turns] == [1, 1]
    assert sorted(t.attempt.task_token for turn in turns for t in turn) == [b"doomed-0", b"doomed-1"]


def test_an_attempt_whose_lease_the_store_refuses_runs_unleased_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A store that is down as a task starts: the task is not failed by its lease (its own first
    store read reports the store), and the warning names the connector and task."""
    unreachable = create_engine(
        "postgresql+psycopg://sluice@127.0.0.1:9/sluice", connect_args={"connect_timeout": 2}
    )
    lease = WorkerLease(unreachable, "sluice", "cut-off@test", lambda lost: None)
    ran = False
    with (
        caplog.at_level(logging.WARNING, logger="sluice.activities.leases"),
        lease.holding(attempt(b"unleased", 7), 10.0),
    ):
        ran = True
    assert ran
    assert "connector orders task 7: runs without a lease" in caplog.text
