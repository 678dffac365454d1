"""Worker leases: a killed worker's tasks move after ``task.heartbeat.timeout.s`` while an idle
task heartbeats Temporal only every 2 minutes.

Temporal notices a lost task only when it misses its heartbeat timeout, and each heartbeat is an
RPC the worker prepares and the server records: with a task's liveness in its own heartbeats, a
hundred idle connectors beating often enough for a 10 s failover cost a tenth of the worker's core
and a seventh of the server's (docs/scaling.md). So liveness is the worker's, not each task's:

* one thread per worker renews the worker's row in the offset store every ``RENEW_S``, and each
  task activity holds a row naming its worker, its attempt's task token and the connector's
  ``task.heartbeat.timeout.s`` (``WorkerLease.holding``);
* the same thread looks for tasks whose worker has been silent for longer than that (killed, hung,
  cut off from the store), or whose worker ran on this machine and has ended (a worker restarted
  in place takes its predecessor's tasks at once: activities.processes), and fails those attempts
  through Temporal (``fail_lost_attempts``) with a ``WorkerLost`` error, which the connector's
  workflow retries at once on any worker;
* Temporal's own heartbeat timeout stays, as the backstop (``workflows.tasks.backstop_timeout_s``,
  5 minutes at the defaults) for a task no worker can fail: every worker gone, or the store down.

Who fails a lost attempt is decided by the store (one statement deletes and returns the leases),
and the task token names the attempt, so a later attempt of the same task is never touched.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetStickyTaskQueueRequest
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from sluice.activities.processes import Process, has_ended
from sluice.activities.store import leases as lease_rows
from sluice.activities.store.leases import LostTask, TaskAttempt
from sluice.activities.store.schema import store_tables
from sluice.workflows.failures import WORKER_LOST

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine
    from temporalio.client import Client

log = logging.getLogger(__name__)

#: How often a worker renews its lease and looks for lost tasks: one short transaction a second.
RENEW_S = 1.0
#: A worker claims others' tasks only once it has renewed its own lease without a failure for this
#: long: after the store was unreachable every lease looks old, and the others need a turn to renew.
STEADY_S = 3 * RENEW_S
#: A task timeout shorter than this counts as this: a live worker's lease is up to RENEW_S old
#: (and longer when the store or the machine is slow), and must never look lost.
FLOOR_S = 3 * RENEW_S
#: Lost attempts one worker fails per renewal turn: each is two RPCs here and, for whichever
#: worker takes the task, a workflow task (a full replay) and a task start, so a dead worker of a
#: thousand tasks is failed over turns, not in one burst. (For a hundred on this two-core machine
#: it measured neutral: all running 23.3 s after the SIGKILL, 23.9 s with all failed at once.)
CLAIMS_PER_TURN = 20
#: How long failing one lost attempt through Temporal may take.
FAIL_TIMEOUT_S = 30.0


class WorkerLease:
    """This worker's lease and the leases of the task attempts it runs; a daemon thread renews it
    and hands every lost attempt of other workers to ``on_lost``.

    ``process`` is this worker's (``processes.this_process()``), recorded so that a worker on the
    same machine sees it end; None leaves its liveness to time alone."""

    def __init__(
        self,
        engine: Engine,
        schema: str,
        identity: str,
        on_lost: Callable[[list[LostTask]], None],
        *,
        renew_s: float = RENEW_S,
        steady_s: float = STEADY_S,
        floor_s: float = FLOOR_S,
        claims_per_turn: int = CLAIMS_PER_TURN,
        process: Process | None = None,
    ) -> None:
        self.worker_id = uuid.uuid4().hex
        self.identity = identity
        self.process = process
        self._engine = engine
        self._tables = store_tables(schema)
        self._on_lost = on_lost
        self._renew_s = renew_s
        self._steady_s = steady_s
        self._floor_s = floor_s
        self._claims_per_turn = claims_per_turn
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sluice-lease", daemon=True)
        self._conn: Connection | None = None

    def start(self) -> WorkerLease:
        """Renew once (the tasks' leases count from it), then keep renewing in the thread."""
        with self._engine.begin() as conn:
            lease_rows.renew(conn, self._tables, self.worker_id, self.identity, self.process)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop renewing and drop this worker's leases: its tasks have stopped or handed over."""
        self._closed.set()
        self._thread.join(timeout=self._renew_s + 10)
        if self._conn is not None:
            self._conn.close()  # the thread's own connection, back to the pool
            self._conn = None
        try:
            with self._engine.begin() as conn:
                lease_rows.leave(conn, self._tables, self.worker_id)
        except Exception as exc:  # noqa: BLE001 - left behind, the rows are claimed as a lost worker's
            log.warning("worker lease: could not drop this worker's leases (%s)", exc)

    @contextmanager
    def holding(self, attempt: TaskAttempt, timeout_s: float) -> Iterator[None]:
        """``attempt`` runs here within the block; once this worker has been silent for
        ``timeout_s``, another worker fails it. A store that cannot record the lease leaves the
        attempt to Temporal's heartbeat timeout (a warning), not failed: the task's own first
        store read fails it with a clear error if the store is really gone."""
        try:
            with self._engine.begin() as conn:
                lease_rows.hold(conn, self._tables, self.worker_id, attempt, timeout_s)
        except Exception as exc:  # noqa: BLE001 - liveness falls back to the backstop
            log.warning("connector %s task %d: runs without a lease, its store refused it (%s)",
                        attempt.connector, attempt.task_id, exc)  # fmt: skip
        try:
            yield
        finally:
            try:
                with self._engine.begin() as conn:
                    lease_rows.release(conn, self._tables, attempt.task_token)
            except Exception as exc:  # noqa: BLE001 - a lease left behind ends with the worker's
                log.warning("connector %s task %d: could not release its lease (%s)",
                            attempt.connector, attempt.task_id, exc)  # fmt: skip

    def _run(self) -> None:
        steady_since: float | None = time.monotonic()  # start() renewed
        while not self._closed.wait(self._renew_s):
            try:
                lost = self._renew_and_claim(steady_since)
            except Exception as exc:  # noqa: BLE001 - a store outage: renew again next turn
                steady_since = None
                self._drop_connection()
                log.warning("worker lease: renewing in the offset store failed (%s)", exc)
                continue
            if steady_since is None:
                steady_since = time.monotonic()
            if lost:
                try:
                    self._on_lost(lost)
                except Exception:  # noqa: BLE001 - the thread renews this worker's lease: never die
                    log.warning(
                        "worker lease: handing over %d lost attempts failed", len(lost), exc_info=True
                    )

    def _renew_and_claim(self, steady_since: float | None) -> list[LostTask]:
        # A connection of its own, kept: a worker full of busy tasks must not delay its renewal.
        if self._conn is None:
            self._conn = self._engine.connect()
        with self._conn.begin():
            lease_rows.renew(self._conn, self._tables, self.worker_id, self.identity, self.process)
            if ended := self._ended_neighbours(self._conn):
                lease_rows.mark_ended(self._conn, self._tables, ended)
            # Claims by time wait for steady renewals; an ended worker's tasks are claimed at once.
            steady = steady_since is not None and time.monotonic() - steady_since >= self._steady_s
            return lease_rows.claim_lost(
                self._conn, self._tables, self.worker_id, self._floor_s, self._claims_per_turn, steady=steady
            )

    def _ended_neighbours(self, conn: Connection) -> list[str]:
        """The workers recorded on this machine whose process has ended (killed, crashed)."""
        here = self.process
        if here is None:
            return []
        others = lease_rows.others_on(conn, self._tables, self.worker_id, here.machine)
        return [worker_id for worker_id, process in others.items() if has_ended(process, here)]

    def _drop_connection(self) -> None:
        if self._conn is not None:
            try:
                self._conn.invalidate()
                self._conn.close()
            except Exception:  # noqa: BLE001 - it is broken already
                pass
            self._conn = None


def lost_error(task: LostTask) -> ApplicationError:
    """What the task's workflow records for an attempt failed on its lost worker's behalf."""
    if task.silent_s is None:
        why = "has ended (its process is gone from the machine it ran on)"
    else:
        why = (f"has not renewed its lease for {task.silent_s:.0f} s (killed, hung or cut off from the "
               "offset store)")  # fmt: skip
    return ApplicationError(
        f"connector {task.attempt.connector} task {task.attempt.task_id}: its worker {task.worker} "
        f"{why}; the task starts again on a live worker",
        type=WORKER_LOST,
    )


def fail_lost_attempts(client: Client, loop: asyncio.AbstractEventLoop) -> Callable[[list[LostTask]], None]:
    """``on_lost`` for a worker: fail each attempt through ``client`` on ``loop`` (the worker's).

    First the workflow's sticky queue is reset: its next workflow task (the one recording the
    failure) would otherwise wait 2 s on the lost worker's queue before falling back
    (worker.main's ``sticky_queue_schedule_to_start_timeout``). An attempt or run that already
    ended (its own timeout, a stop) is not found, which is fine; any other failure leaves the
    attempt to Temporal's heartbeat timeout."""

    async def fail(task: LostTask) -> None:
        attempt = task.attempt
        execution = WorkflowExecution(workflow_id=attempt.workflow_id, run_id=attempt.run_id)
        try:
            await client.workflow_service.reset_sticky_task_queue(
                ResetStickyTaskQueueRequest(namespace=client.namespace, execution=execution)
            )
            await client.get_async_activity_handle(task_token=attempt.task_token).fail(lost_error(task))
            log.warning("%s", lost_error(task))
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise

    async def fail_all(tasks: list[LostTask]) -> None:
        failing = (asyncio.wait_for(fail(task), FAIL_TIMEOUT_S) for task in tasks)
        results = await asyncio.gather(*failing, return_exceptions=True)
        for task, result in zip(tasks, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("connector %s task %d: could not fail the attempt of its lost worker %s "
                            "(Temporal's heartbeat timeout will): %s", task.attempt.connector,
                            task.attempt.task_id, task.worker, result)  # fmt: skip

    def on_lost(tasks: list[LostTask]) -> None:
        # Not waited for: the lease thread goes on renewing this worker's own lease meanwhile.
        asyncio.run_coroutine_threadsafe(fail_all(tasks), loop)

    return on_lost
