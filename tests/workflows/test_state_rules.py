"""Pure parts of the workflow: the carried state survives Temporal's converter whole, and the
retry rules (workflows/tasks.py, workflows/failures.py) do what docs/failure-semantics.md says."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from temporalio.converter import DataConverter
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    RetryState,
    TimeoutError,
    TimeoutType,
)

from sluice.workflows import tasks as rules
from sluice.workflows.failures import WORKER_LOST, FailureKind, classify, clip, retry_delay
from sluice.workflows.types import (
    ConnectorStatus,
    DeleteRequest,
    TaskOptions,
    TaskState,
    TaskStatus,
    WorkflowState,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _activity_error(cause: BaseException) -> ActivityError:
    err = ActivityError(
        "activity failed",
        scheduled_event_id=1,
        started_event_id=2,
        identity="w",
        activity_type="run_connector_task",
        activity_id="task-0-g0-a1",
        retry_state=RetryState.MAXIMUM_ATTEMPTS_REACHED,
    )
    err.__cause__ = cause
    return err


async def test_pending_requests_and_options_survive_the_converter() -> None:
    state = WorkflowState(
        name="c",
        config={"a": "b"},
        tasks=[TaskStatus(0, TaskState.RUNNING, attempt=3, retrying=True, next_retry_time=NOW.isoformat())],
        options=TaskOptions(heartbeat_timeout_s=3.5, retry_timeout_ms=1000),
        changed=True,
        restart_all=True,
        delete_request=DeleteRequest(delete_offsets=False),
        continue_as_new_after_events=40,
    )
    conv = DataConverter.default
    payloads = await conv.encode([state])
    [back] = await conv.decode(payloads, [WorkflowState | ConnectorStatus])  # the run's input type
    assert back == state
    [plain] = await conv.decode(
        await conv.encode([ConnectorStatus("c", {"a": "b"})]), [WorkflowState | ConnectorStatus]
    )
    assert isinstance(plain, WorkflowState) and plain.options is None and plain.delete_request is None


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (None, FailureKind.STOPPED),
        (_activity_error(CancelledError("cancelled")), FailureKind.STOPPED),
        (_activity_error(ApplicationError("bad record", type="ConnectorDataError")), FailureKind.FATAL),
        (_activity_error(ApplicationError("plan", type="PlanConflictError")), FailureKind.FATAL),
        (_activity_error(ApplicationError("x", type="Other", non_retryable=True)), FailureKind.FATAL),
        (_activity_error(ApplicationError("bye", type="WorkerShutdown")), FailureKind.HANDOVER),
        (_activity_error(ApplicationError("refused", type="ConnectionError")), FailureKind.RETRIABLE),
    ],
)
def test_classify(exc: BaseException | None, kind: FailureKind) -> None:
    assert classify(exc).kind == kind


def _heartbeat_timeout() -> ActivityError:
    return _activity_error(
        TimeoutError("activity Heartbeat timeout", type=TimeoutType.HEARTBEAT, last_heartbeat_details=[])
    )


@pytest.mark.parametrize(
    ("exc", "lost"),
    [
        (_heartbeat_timeout(), True),
        (
            _activity_error(
                TimeoutError("start", type=TimeoutType.START_TO_CLOSE, last_heartbeat_details=[])
            ),
            False,
        ),
        (_activity_error(ApplicationError("refused", type="ConnectionError")), False),
        (_activity_error(ApplicationError("not renewed", type=WORKER_LOST)), True),
    ],
)
def test_only_a_heartbeat_timeout_or_a_lost_lease_means_the_worker_was_lost(
    exc: BaseException, lost: bool
) -> None:
    failure = classify(exc)
    assert failure.kind == FailureKind.RETRIABLE and failure.worker_lost == lost


def test_a_lost_worker_s_task_is_retried_at_once_then_with_backoff() -> None:
    """The heartbeat timeout was the wait; a second loss in the same streak backs off as usual."""
    options = TaskOptions(retry_delay_max_ms=30_000, healthy_after_s=60)
    task = TaskStatus(0, TaskState.RUNNING)
    rules.started(task, NOW)
    lost = classify(_heartbeat_timeout())
    rules.failed(task, lost, options, NOW + timedelta(seconds=10))
    assert task.retrying and task.attempt == 2 and "Heartbeat timeout" in task.last_error
    assert rules.due(task, NOW + timedelta(seconds=10))
    rules.started(task, NOW + timedelta(seconds=10))
    rules.failed(task, lost, options, NOW + timedelta(seconds=20))
    assert task.attempt == 3 and not rules.due(task, NOW + timedelta(seconds=20))
    assert task.next_retry_time == (NOW + timedelta(seconds=22)).isoformat()


def test_a_new_attempt_starts_with_nothing_waited_for() -> None:
    """The attempt reports a wait only when it has one (no signal of "nothing" per task start),
    so what the lost attempt waited for must not outlive it."""
    options = TaskOptions(retry_delay_max_ms=30_000, healthy_after_s=60)
    task = TaskStatus(0, TaskState.RUNNING)
    rules.started(task, NOW)
    task.detail = "waiting for file /in/orders.csv"
    rules.failed(task, classify(_heartbeat_timeout()), options, NOW + timedelta(seconds=10))
    rules.started(task, NOW + timedelta(seconds=10))
    assert task.detail == ""


def test_backoff_doubles_from_one_second_up_to_the_maximum() -> None:
    assert [retry_delay(a, 30_000).total_seconds() for a in range(2, 9)] == [1, 2, 4, 8, 16, 30, 30]
    assert retry_delay(10_000, 30_000) == timedelta(seconds=30)  # no overflow on long streaks
    assert retry_delay(2, 500) == timedelta(milliseconds=500)


def test_clip_keeps_head_and_tail() -> None:
    text = "cause " + "y" * 10_000 + " position 42"
    clipped = clip(text, 1_000)
    assert len(clipped) <= 1_000 and clipped.startswith("cause ") and clipped.endswith("position 42")
    assert clip("short") == "short"


def test_retry_streak_budget_and_recovery() -> None:
    options = TaskOptions(retry_timeout_ms=10_000, retry_delay_max_ms=4_000, healthy_after_s=60)
    task = TaskStatus(0, TaskState.RUNNING)
    rules.started(task, NOW)
    failure = classify(_activity_error(ApplicationError("down", type="ConnectionError")))
    rules.failed(task, failure, options, NOW + timedelta(seconds=1))
    assert task.state == TaskState.RUNNING and task.retrying and task.attempt == 2
    assert task.next_retry_time == (NOW + timedelta(seconds=2)).isoformat()
    assert not rules.due(task, NOW + timedelta(seconds=1)) and rules.due(task, NOW + timedelta(seconds=2))
    rules.started(task, NOW + timedelta(seconds=2))
    assert not rules.recovered(task, options, NOW + timedelta(seconds=30))
    assert rules.recovered(task, options, NOW + timedelta(seconds=62))
    assert not task.retrying and task.attempt == 2 and task.last_error
    # A new streak after recovery, then the budget runs out.
    rules.failed(task, failure, options, NOW + timedelta(seconds=70))
    assert task.attempt == 2 and task.failing_since == (NOW + timedelta(seconds=70)).isoformat()
    rules.started(task, NOW + timedelta(seconds=71))
    rules.failed(task, failure, options, NOW + timedelta(seconds=81))
    assert task.state == TaskState.FAILED and "errors.retry.timeout=10000" in task.error


def test_zero_budget_fails_at_the_first_retriable_error() -> None:
    task = TaskStatus(0, TaskState.RUNNING)
    rules.started(task, NOW)
    failure = classify(_activity_error(ApplicationError("down", type="ConnectionError")))
    rules.failed(task, failure, TaskOptions(retry_timeout_ms=0), NOW)
    assert task.state == TaskState.FAILED
