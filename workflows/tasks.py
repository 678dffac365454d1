"""What happens to a task's status when its activity starts, ends or fails: pure functions of the
status, the connector's typed options and the workflow's clock, so the retry rules read in one place.

Retries live in the workflow, not in Temporal's activity retry policy (which gets one attempt), so
the status shows the current attempt, the last error and its time, and whether a retry is pending:
1. a non-retryable failure (failures.NON_RETRYABLE_ERRORS) marks the task FAILED at once;
2. a retriable one is retried after 1 s, doubling up to ``errors.retry.delay.max.ms``;
3. a streak of retriable failures lasting ``errors.retry.timeout`` ms (-1: no limit) marks it FAILED;
4. a task that runs ``TaskOptions.healthy_after_s`` after a retry without failing has recovered;
5. a worker handing its task over on shutdown (WorkerShutdown) is restarted at once, not an error;
6. a task whose worker was lost (its lease not renewed, or a heartbeat timeout) is an error, but
   its first retry starts at once: the timeout has already been waited for, and a killed worker's
   tasks should move now.

A task's liveness is its worker's lease (``task.heartbeat.timeout.s``; activities.leases); Temporal's
heartbeat timeout is the backstop behind it (``backstop_timeout_s``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sluice.workflows.failures import Failure, FailureKind, retry_delay
from sluice.workflows.types import TaskOptions, TaskState, TaskStatus

#: Temporal's heartbeat timeout of a task is at least this (an idle task beats at 0.4 of it, every
#: 2 minutes): a lost worker's tasks are found by its lease long before (activities.leases).
BACKSTOP_MIN_S = 300.0


def backstop_timeout_s(lease_timeout_s: float) -> float:
    """Temporal's heartbeat timeout for a task whose worker's lease times out after
    ``lease_timeout_s``: it only matters when no worker can fail the attempt (all gone, or the
    offset store down), and each heartbeat an idle task sends to keep it costs an RPC."""
    return max(BACKSTOP_MIN_S, 2 * lease_timeout_s)


def _at(text: str) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _healthy(options: TaskOptions) -> timedelta:
    return timedelta(seconds=options.healthy_after_s)


def started(task: TaskStatus, now: datetime) -> None:
    task.attempts += 1
    task.attempt = max(task.attempt, 1)
    task.next_retry_time = ""
    task.running_since = now.isoformat()
    # What the last attempt waited for: the new attempt reports it again only when it waits too,
    # so a hundred tasks starting at once (a takeover) send no hundred signals of "nothing".
    task.detail = ""


def reset(task: TaskStatus) -> None:
    """A user (re)started the task: a fresh first attempt, no retry streak."""
    task.error = ""
    task.attempt = 0
    task.retrying = False
    task.failing_since = ""
    task.next_retry_time = ""


def stopped(task: TaskStatus, state: TaskState) -> None:
    task.state = state
    task.running_since = ""
    task.next_retry_time = ""
    task.retrying = False
    task.detail = ""


def due(task: TaskStatus, now: datetime) -> bool:
    """Whether a RUNNING task without an activity may start now (its retry backoff has passed)."""
    at = _at(task.next_retry_time)
    return at is None or at <= now


def failed(task: TaskStatus, failure: Failure, options: TaskOptions, now: datetime) -> None:
    """Apply a task activity's failure (steps 1, 2, 3 and 5 of the module docstring)."""
    if failure.kind == FailureKind.HANDOVER:
        task.running_since = ""
        return
    task.last_error, task.last_error_time = failure.message, now.isoformat()
    if failure.kind == FailureKind.FATAL:
        stopped(task, TaskState.FAILED)
        task.error = failure.message
        return
    began = _at(task.running_since)
    if not task.retrying or (began is not None and now - began >= _healthy(options)):
        task.failing_since, task.attempt = now.isoformat(), 1  # a new streak
    since = _at(task.failing_since) or now
    budget = options.retry_timeout_ms
    if budget >= 0 and now - since >= timedelta(milliseconds=budget):
        stopped(task, TaskState.FAILED)
        task.error = (
            f"retried for {(now - since).total_seconds():.0f} s, past errors.retry.timeout={budget} ms; "
            f"last error: {failure.message}"
        )
        return
    task.attempt += 1
    task.retrying = True
    task.running_since = ""
    delay = retry_delay(task.attempt, options.retry_delay_max_ms)
    if failure.worker_lost and task.attempt == 2:
        delay = timedelta(0)
    task.next_retry_time = (now + delay).isoformat()


def recovered(task: TaskStatus, options: TaskOptions, now: datetime) -> bool:
    """End the retry streak of a task that has run long enough; True when something changed."""
    began = _at(task.running_since)
    if task.retrying and began is not None and now - began >= _healthy(options):
        task.retrying, task.failing_since = False, ""
        return True
    return False


def next_wakeup(
    tasks: list[TaskStatus], running: set[int], options: TaskOptions, now: datetime
) -> timedelta | None:
    """How long until a retry is due or a retried task counts as recovered; None if nothing waits."""
    times: list[datetime] = []
    for task in tasks:
        if task.state != TaskState.RUNNING:
            continue
        if task.task_id not in running and (at := _at(task.next_retry_time)) is not None:
            times.append(at)
        elif task.task_id in running and task.retrying and (began := _at(task.running_since)):
            times.append(began + _healthy(options))
    if not times:
        return None
    return max(min(times) - now, timedelta(milliseconds=1))


def legacy_options(task_count: int) -> TaskOptions:
    """Defaults for a run whose state predates TaskOptions (an old run replayed on this code).

    Workflow code parses no config; such a run gets typed options from validation again when it
    next continues as new.
    """
    return TaskOptions(task_count=task_count)
