"""Status tells the truth: the workflow retries task activities itself and shows per task the
attempt, the last error and its time and whether a retry is pending; errors no retry can fix, and a
retry budget spent, end FAILED; a worker handing over is no error; reports from tasks are shown.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata

from sluice.worker.client import SluiceClient
from sluice.workflows.connector import ConnectorWorkflow
from sluice.workflows.failures import MAX_ERROR_CHARS
from sluice.workflows.types import ConnectorState, Reconfigure, TaskReport, TaskState, TaskStatus
from tests.workflows.conftest import WorkerFactory, wait_for
from tests.workflows.stand_ins import STAND_INS, starts_of
from tests.workflows.test_connector_workflow import _start


@pytest.fixture
async def sluice(connector_worker: WorkerFactory) -> AsyncIterator[SluiceClient]:
    async with connector_worker(STAND_INS) as (client, queue):
        yield SluiceClient(client, queue)


def _name() -> str:
    return f"rt-{uuid.uuid4().hex[:8]}"


async def _task(sluice: SluiceClient, name: str, task_id: int = 0) -> TaskStatus:
    tasks = (await sluice.status(name)).tasks
    return tasks[task_id] if task_id < len(tasks) else TaskStatus(task_id)  # before validation ends


async def _details(sluice: SluiceClient, name: str) -> str:
    meta = await sluice.handle(name).query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return meta.current_details


async def test_retriable_failures_are_retried_with_backoff_and_shown(sluice: SluiceClient) -> None:
    name = _name()
    await _start(
        sluice, name, {"tasks.max": "1", "flaky.task": "0", "flaky.times": "2", "healthy.after.s": "3"}
    )
    await wait_for(lambda: _retrying_at(sluice, name, 2), 20, "the first retry to show")
    task = await _task(sluice, name)
    assert task.state == TaskState.RUNNING and task.error == ""
    assert "refused the connection" in task.last_error and task.last_error_time and task.failing_since
    assert "attempt 2" in await _details(sluice, name) or "retrying" in await _details(sluice, name)
    await wait_for(lambda: _retrying_at(sluice, name, 3), 20, "the second retry")
    await wait_for(lambda: _recovered(sluice, name), 30, "the retried task to count as recovered")
    task = await _task(sluice, name)
    assert task.attempt == 3 and task.attempts == 3 and "refused" in task.last_error
    assert (await sluice.status(name)).state == ConnectorState.RUNNING
    await sluice.delete(name)


async def _retrying_at(sluice: SluiceClient, name: str, attempt: int) -> bool:
    task = await _task(sluice, name)
    return task.retrying and task.attempt == attempt


async def _recovered(sluice: SluiceClient, name: str) -> bool:
    task = await _task(sluice, name)
    return not task.retrying and task.attempt == 3 and not task.next_retry_time


async def test_non_retryable_error_fails_the_task_at_once(sluice: SluiceClient) -> None:
    name = _name()
    await _start(sluice, name, {"tasks.max": "1", "fail.task": "0"})
    await wait_for(lambda: _state_is(sluice, name, ConnectorState.FAILED), 20, "connector FAILED")
    task = await _task(sluice, name)
    assert task.state == TaskState.FAILED and "lines/broker-a:0@42" in task.error
    assert task.last_error == task.error and task.last_error_time and not task.retrying
    assert len(starts_of(name)) == 1, "a non-retryable error was retried"
    await sluice.delete(name)


async def test_a_failed_connector_given_a_new_config_runs_again_with_it(sluice: SluiceClient) -> None:
    """As in Kafka Connect, a new config restarts a failed connector's tasks: the usual fix of a
    failure is a changed key (data.loss=skip, a corrected address)."""
    name = _name()
    await _start(sluice, name, {"tasks.max": "1", "fail.task": "0"})
    await wait_for(lambda: _state_is(sluice, name, ConnectorState.FAILED), 20, "connector FAILED")
    fixed = Reconfigure({"connector.class": "stand-in", "tasks.max": "1", "fixed": "1"})
    await sluice.handle(name).execute_update(ConnectorWorkflow.reconfigure, fixed)
    await wait_for(lambda: _state_is(sluice, name, ConnectorState.RUNNING), 20, "connector RUNNING")
    await wait_for(lambda: len(starts_of(name)) == 2, 20, "the task to start again")
    status = await sluice.status(name)
    assert status.error == "" and status.config["fixed"] == "1"
    (task,) = status.tasks
    assert task.state == TaskState.RUNNING and task.error == ""
    await sluice.delete(name)


async def _state_is(sluice: SluiceClient, name: str, state: ConnectorState) -> bool:
    return (await sluice.status(name)).state == state


async def test_retry_budget_spent_fails_the_task(sluice: SluiceClient) -> None:
    name = _name()
    config = {
        "tasks.max": "1",
        "flaky.task": "0",
        "flaky.times": "1000",
        "retry.timeout.ms": "2500",
        "retry.delay.max.ms": "500",
    }
    await _start(sluice, name, config)
    await wait_for(lambda: _state_is(sluice, name, ConnectorState.FAILED), 30, "budget to run out")
    task = await _task(sluice, name)
    assert task.state == TaskState.FAILED and "errors.retry.timeout=2500" in task.error
    assert "refused the connection" in task.error and task.attempt >= 3 and not task.retrying
    await sluice.delete(name)


async def test_worker_handover_is_retried_at_once_and_not_an_error(sluice: SluiceClient) -> None:
    name = _name()
    await _start(sluice, name, {"tasks.max": "1", "shutdown.task": "0"})
    await wait_for(lambda: len(starts_of(name)) == 2, 20, "the task to start again")
    task = await _task(sluice, name)
    assert task.state == TaskState.RUNNING and task.attempts == 2 and task.attempt == 1
    assert task.last_error == "" and not task.retrying and task.error == ""
    await sluice.delete(name)


async def test_long_errors_keep_head_and_tail(sluice: SluiceClient) -> None:
    name = _name()
    message = "HEAD cause: " + "x" * 50_000 + " at file /data/in.txt offset 12000 TAIL"
    await _start(
        sluice, name, {"tasks.max": "1", "flaky.task": "0", "flaky.times": "5", "flaky.message": message}
    )
    await wait_for(lambda: _retrying_at(sluice, name, 2), 20, "the retry to show")
    task = await _task(sluice, name)
    assert len(task.last_error) <= MAX_ERROR_CHARS
    assert "HEAD cause:" in task.last_error[:40] and task.last_error.endswith("offset 12000 TAIL")
    assert "characters cut" in task.last_error
    await sluice.delete(name)


async def test_report_task_sets_detail_and_ignores_stale_generations(sluice: SluiceClient) -> None:
    name = _name()
    await _start(sluice, name, {"tasks.max": "2"})
    await wait_for(lambda: len(starts_of(name)) == 2, 20, "tasks started")
    handle = sluice.handle(name)
    await handle.signal(ConnectorWorkflow.report_task, TaskReport(1, 0, "waiting for file /x/in.txt"))
    await wait_for(lambda: _detail_is(sluice, name, 1, "waiting for file /x/in.txt"), 10, "detail shown")
    assert "waiting for file /x/in.txt" in await _details(sluice, name)
    await handle.signal(ConnectorWorkflow.report_task, TaskReport(1, 7, "stale"))
    await handle.signal(ConnectorWorkflow.report_task, TaskReport(9, 0, "no such task"))
    await handle.signal(ConnectorWorkflow.report_task, TaskReport(0, 0, "reading"))
    await wait_for(lambda: _detail_is(sluice, name, 0, "reading"), 10, "task 0 detail")
    assert (await _task(sluice, name, 1)).detail == "waiting for file /x/in.txt"
    await handle.signal(ConnectorWorkflow.report_task, TaskReport(1, 0, ""))
    await wait_for(lambda: _detail_is(sluice, name, 1, ""), 10, "detail cleared")
    await sluice.delete(name)


async def _detail_is(sluice: SluiceClient, name: str, task_id: int, detail: str) -> bool:
    return (await _task(sluice, name, task_id)).detail == detail


async def test_validate_activity_raising_ends_failed_with_the_error(sluice: SluiceClient) -> None:
    name = _name()
    await _start(sluice, name, {"validate.raises": "1"})
    final = await sluice.handle(name).result()
    assert final.state == ConnectorState.FAILED and "plugin exploded while validating" in final.error
    assert not starts_of(name)


async def test_config_values_that_are_not_strings_end_failed_naming_the_field(sluice: SluiceClient) -> None:
    name = _name()
    await _start(sluice, name, {"tasks.max": 2, "connector.class": "stand-in"})  # type: ignore[dict-item]
    final = await sluice.handle(name).result()
    assert final.state == ConnectorState.FAILED
    assert f"connector {name}: field 'tasks.max': expected a string value, got 2" in final.error
