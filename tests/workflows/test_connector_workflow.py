"""ConnectorWorkflow's lifecycle on the real Temporal dev server, with same-named stand-in activities.

The stand-ins (samples-python's pattern) replace Spark and the offset store so the orchestration is
tested on its own: task activities run until cancelled, and a task configured to fail raises a
non-retryable data error naming a record position, as a real task does.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path

import pytest
from temporalio import activity
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer, Worker

from deploy.local.config import StackConfig
from tests.runtime.helpers import wait_for
from worker.client import SluiceClient
from workflows.connector import ConnectorWorkflow
from workflows.types import (
    DELETE_OFFSETS_ACTIVITY,
    RUN_TASK_ACTIVITY,
    VALIDATE_ACTIVITY,
    ConnectorSpec,
    ConnectorState,
    ConnectorStatus,
    Reconfigure,
    TaskInput,
    TaskOutcome,
    TaskState,
    ValidationResult,
    workflow_id_for,
)

HISTORY = Path(__file__).parent / "histories" / "connector_lifecycle.json"
deleted: list[str] = []
started_tasks: list[tuple[str, int, int]] = []


@activity.defn(name=VALIDATE_ACTIVITY)
async def validate_stand_in(spec: ConnectorSpec) -> ValidationResult:
    if spec.config.get("broken"):
        return ValidationResult("stand-in", "source", [f"connector {spec.name}: broken: must not be set"])
    count = int(spec.config.get("tasks.max", "2"))
    return ValidationResult("stand-in", "source", [], [{**spec.config, "task": str(i)} for i in range(count)])


@activity.defn(name=RUN_TASK_ACTIVITY)
async def run_task_stand_in(inp: TaskInput) -> TaskOutcome:
    started_tasks.append((inp.connector, inp.task_id, inp.generation))
    if inp.config.get("fail.task") == str(inp.task_id) and inp.generation == 0:
        raise ApplicationError(
            f"connector {inp.connector} task {inp.task_id}: record at lines/broker-a:0@42 cannot be cast",
            type="ConnectorDataError",
            non_retryable=True,
        )
    try:
        while True:
            activity.heartbeat()
            await asyncio.sleep(0.2)
    except asyncio.CancelledError:
        raise


@activity.defn(name=DELETE_OFFSETS_ACTIVITY)
async def delete_offsets_stand_in(connector: str) -> None:
    deleted.append(connector)


@pytest.fixture
async def env(stack_config: StackConfig) -> AsyncIterator[tuple[Client, SluiceClient]]:
    client = await Client.connect(stack_config.temporal_address)
    queue = f"wf-test-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[ConnectorWorkflow],
        activities=[validate_stand_in, run_task_stand_in, delete_offsets_stand_in],
    ):
        yield client, SluiceClient(client, queue)


async def _start(sluice: SluiceClient, name: str, config: dict[str, str]) -> None:
    # Bypass the client's local validation: the stand-in class is not a real plugin.
    from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

    await sluice.client.start_workflow(
        ConnectorWorkflow.run,
        ConnectorStatus(name=name, config=config),
        id=workflow_id_for(name),
        task_queue=sluice.task_queue,
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(SearchAttributeKey.for_keyword("ConnectorName"), name)]
        ),
    )


async def _update_fails(update: Awaitable[object], text: str) -> None:
    """An update is rejected, and its cause says why."""
    with pytest.raises(WorkflowUpdateFailedError) as err:
        await update
    assert text in str(err.value.cause), str(err.value.cause)


async def _tasks_are(sluice: SluiceClient, name: str, *states: TaskState) -> bool:
    status = await sluice.status(name)
    return [t.state for t in status.tasks] == list(states)


async def test_full_lifecycle_and_replay(env: tuple[Client, SluiceClient]) -> None:
    client, sluice = env
    name = f"wf-{uuid.uuid4().hex[:8]}"
    await _start(sluice, name, {"tasks.max": "2", "fail.task": "1"})

    await wait_for(
        lambda: _tasks_are(sluice, name, TaskState.RUNNING, TaskState.FAILED), 30, "task 1 to fail"
    )
    status = await sluice.status(name)
    assert status.state == ConnectorState.RUNNING
    assert "lines/broker-a:0@42" in status.tasks[1].error

    restarted = await sluice.restart(name, only_failed=True)
    assert restarted.generation == 1
    await wait_for(
        lambda: _tasks_are(sluice, name, TaskState.RUNNING, TaskState.RUNNING), 30, "failed task back"
    )
    assert [g for (c, t, g) in started_tasks if c == name and t == 0] == [0], "a healthy task was restarted"

    assert (await sluice.pause(name)).state == ConnectorState.PAUSED
    await wait_for(lambda: _tasks_are(sluice, name, TaskState.PAUSED, TaskState.PAUSED), 30, "paused tasks")
    assert (await sluice.pause(name)).state == ConnectorState.PAUSED, "pause is idempotent"
    assert (await sluice.resume(name)).state == ConnectorState.RUNNING
    await wait_for(lambda: _tasks_are(sluice, name, TaskState.RUNNING, TaskState.RUNNING), 30, "resumed")

    await _update_fails(
        sluice.handle(name).execute_update(ConnectorWorkflow.reconfigure, Reconfigure({"tasks.max": "3"})),
        "connector.class is required",
    )
    new = await sluice.handle(name).execute_update(
        ConnectorWorkflow.reconfigure,
        Reconfigure({"connector.class": "stand-in", "tasks.max": "3"}),
        result_type=ConnectorStatus,
    )
    assert len(new.task_configs) == 3 and new.config["tasks.max"] == "3"
    await wait_for(lambda: _tasks_are(sluice, name, *[TaskState.RUNNING] * 3), 30, "three tasks running")
    await _update_fails(
        sluice.handle(name).execute_update(
            ConnectorWorkflow.reconfigure, Reconfigure({"connector.class": "stand-in", "broken": "1"})
        ),
        "broken: must not be set",
    )

    assert (await sluice.stop(name)).state == ConnectorState.STOPPED
    await wait_for(lambda: _tasks_are(sluice, name, *[TaskState.STOPPED] * 3), 30, "stopped tasks")
    await _update_fails(sluice.pause(name), "is STOPPED")
    desc = await sluice.handle(name).describe()
    assert desc.typed_search_attributes is not None

    await sluice.delete(name, delete_offsets=True)
    final = await sluice.handle(name).result()
    assert final.state == ConnectorState.DELETED and name in deleted

    history = await sluice.handle(name).fetch_history()
    await Replayer(workflows=[ConnectorWorkflow]).replay_workflow(history)
    if not HISTORY.exists():  # record once; later runs replay the committed history
        HISTORY.parent.mkdir(exist_ok=True)
        HISTORY.write_text(json.dumps(history.to_json_dict(), indent=1))


async def test_recorded_history_replays_with_current_code() -> None:
    from temporalio.client import WorkflowHistory

    assert HISTORY.exists(), "the recorded history is part of the repository"
    history = WorkflowHistory.from_json("recorded", HISTORY.read_text())
    await Replayer(workflows=[ConnectorWorkflow]).replay_workflow(history)


async def test_invalid_config_fails_the_workflow_without_running_tasks(
    env: tuple[Client, SluiceClient],
) -> None:
    _, sluice = env
    name = f"wf-bad-{uuid.uuid4().hex[:8]}"
    await _start(sluice, name, {"broken": "1"})
    final = await sluice.handle(name).result()
    assert final.state == ConnectorState.FAILED and "broken: must not be set" in final.error
    assert not [c for (c, _, _) in started_tasks if c == name]


async def test_encrypting_codec_keeps_configs_out_of_history_in_plaintext(stack_config: StackConfig) -> None:
    import dataclasses

    from cryptography.fernet import Fernet
    from temporalio.converter import DataConverter

    from worker.codec import FernetCodec

    plain = await Client.connect(stack_config.temporal_address)
    secured = await Client.connect(
        stack_config.temporal_address,
        data_converter=dataclasses.replace(
            DataConverter.default, payload_codec=FernetCodec(Fernet.generate_key())
        ),
    )
    queue = f"wf-codec-{uuid.uuid4().hex[:8]}"
    password = f"hunter2-{uuid.uuid4().hex}"
    name = f"wf-codec-{uuid.uuid4().hex[:8]}"
    async with Worker(
        secured,
        task_queue=queue,
        workflows=[ConnectorWorkflow],
        activities=[validate_stand_in, run_task_stand_in, delete_offsets_stand_in],
    ):
        sluice = SluiceClient(secured, queue)
        await _start(sluice, name, {"tasks.max": "1", "password": password})
        await wait_for(lambda: _tasks_are(sluice, name, TaskState.RUNNING), 30, "task running")
        assert (await sluice.status(name)).config["password"] == password  # the key holder reads it
        history = await plain.get_workflow_handle(workflow_id_for(name)).fetch_history()
        raw = b"".join(event.SerializeToString() for event in history.events)  # payload bytes as stored
        assert b"binary/sluice-fernet" in raw and password.encode() not in raw
        await sluice.delete(name)
