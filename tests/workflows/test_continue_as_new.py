"""Continue-as-new keeps every task's state and every pending request.

A test-only threshold in the workflow input (``continue_as_new_after_events``, an internal field of
WorkflowState, not user config) makes each run continue as new after a few dozen history events, so
the lifecycle below crosses many runs: RUNNING tasks must be started again in each new run, and
pause/resume/reconfigure/restart/delete must act exactly once whichever run receives them.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from sluice.worker.client import SluiceClient
from sluice.workflows.connector import ConnectorWorkflow
from sluice.workflows.types import ConnectorState, ConnectorStatus, Reconfigure, TaskState
from tests.workflows.conftest import WorkerFactory, wait_for
from tests.workflows.stand_ins import STAND_INS, deleted, starts_of
from tests.workflows.test_connector_workflow import _start, _tasks_are

THRESHOLD = 30


@pytest.fixture
async def sluice(connector_worker: WorkerFactory) -> AsyncIterator[SluiceClient]:
    async with connector_worker(STAND_INS) as (client, queue):
        yield SluiceClient(client, queue)


async def _run_id(sluice: SluiceClient, name: str) -> str:
    return (await sluice.handle(name).describe()).run_id


async def _new_run_with_running_tasks(sluice: SluiceClient, name: str, before: str, tasks: int) -> bool:
    """A later run than ``before`` has started all ``tasks`` task activities."""
    run = await _run_id(sluice, name)
    started = {s.task_id for s in starts_of(name) if s.run_id == run}
    return run != before and started == set(range(tasks))


async def test_tasks_keep_running_and_requests_survive_across_runs(sluice: SluiceClient) -> None:
    name = f"can-{uuid.uuid4().hex[:8]}"
    await _start(sluice, name, {"tasks.max": "2"}, continue_as_new_after_events=THRESHOLD)
    await wait_for(lambda: _tasks_are(sluice, name, TaskState.RUNNING, TaskState.RUNNING), 20, "running")
    first = await _run_id(sluice, name)

    # Each update adds events; a few cross the threshold and the connector continues as new.
    for _ in range(3):
        assert (await sluice.pause(name)).state == ConnectorState.PAUSED
        await wait_for(lambda: _tasks_are(sluice, name, TaskState.PAUSED, TaskState.PAUSED), 20, "paused")
        assert (await sluice.resume(name)).state == ConnectorState.RUNNING
        await wait_for(lambda: _tasks_are(sluice, name, TaskState.RUNNING, TaskState.RUNNING), 20, "resumed")
    await wait_for(
        lambda: _new_run_with_running_tasks(sluice, name, first, 2), 30, "a new run running both tasks"
    )
    status = await sluice.status(name)
    assert status.state == ConnectorState.RUNNING and status.generation == 0

    second = await _run_id(sluice, name)
    new = await sluice.handle(name).execute_update(
        ConnectorWorkflow.reconfigure,
        Reconfigure({"connector.class": "stand-in", "tasks.max": "3"}),
        result_type=ConnectorStatus,
    )
    assert new.generation == 1 and len(new.tasks) == 3
    await wait_for(lambda: _tasks_are(sluice, name, *[TaskState.RUNNING] * 3), 20, "three tasks")
    for _ in range(3):
        await sluice.restart(name)
    await wait_for(
        lambda: _new_run_with_running_tasks(sluice, name, second, 3), 30, "a later run running 3 tasks"
    )
    status = await sluice.status(name)
    assert status.generation == 4 and status.config["tasks.max"] == "3"
    assert [t.state for t in status.tasks] == [TaskState.RUNNING] * 3
    gen4 = {s.task_id for s in starts_of(name) if s.generation == 4}
    assert gen4 == {0, 1, 2}, "the last restart did not reach every task"

    runs = {s.run_id for s in starts_of(name)}
    assert len(runs) >= 3, f"expected several continue-as-new runs, saw {len(runs)}"
    history = await sluice.handle(name).fetch_history()
    assert history.events[0].workflow_execution_started_event_attributes.continued_execution_run_id

    await sluice.delete(name, delete_offsets=True)
    final = await sluice.handle(name).result()
    assert final.state == ConnectorState.DELETED and name in deleted
    assert all(t.state == TaskState.STOPPED for t in final.tasks)


async def test_a_stopped_connector_stays_stopped_across_runs(sluice: SluiceClient) -> None:
    name = f"can-stop-{uuid.uuid4().hex[:8]}"
    await _start(sluice, name, {"tasks.max": "1"}, continue_as_new_after_events=THRESHOLD)
    await wait_for(lambda: _tasks_are(sluice, name, TaskState.RUNNING), 20, "running")
    first = await _run_id(sluice, name)
    for _ in range(4):
        await sluice.stop(name)
        await sluice.resume(name)
    await sluice.stop(name)
    await wait_for(lambda: _tasks_are(sluice, name, TaskState.STOPPED), 20, "stopped")
    assert await _run_id(sluice, name) != first
    before = len(starts_of(name))
    await sluice.stop(name)  # more events, perhaps another run: nothing may start
    await wait_for(lambda: _tasks_are(sluice, name, TaskState.STOPPED), 20, "still stopped")
    assert (await sluice.status(name)).state == ConnectorState.STOPPED
    assert len(starts_of(name)) == before
    await sluice.delete(name)
