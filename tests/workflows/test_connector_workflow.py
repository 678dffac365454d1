"""ConnectorWorkflow's lifecycle on Temporal's test environment, with same-named stand-in activities.

The stand-ins (tests/workflows/stand_ins.py) replace Spark and the offset store so the orchestration
is tested on its own: task activities run until cancelled, and a task configured to fail raises a
non-retryable data error naming a record position, as a real task does. Histories recorded with
earlier versions must replay on the current code (upgrades keep running connectors).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHistory, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from sluice.worker.client import SluiceClient
from sluice.workflows.connector import ConnectorWorkflow
from sluice.workflows.types import (
    ConnectorState,
    ConnectorStatus,
    Reconfigure,
    TaskState,
    WorkflowState,
    workflow_id_for,
)
from tests.workflows.conftest import HEARTBEAT_THROTTLE, WorkerFactory, wait_for
from tests.workflows.stand_ins import STAND_INS, deleted, nudged, starts_of

HISTORIES = Path(__file__).parent / "histories"
# Recorded by 0.1 (before typed options, workflow-side retries and continue-as-new that keeps tasks).
HISTORY_V1 = HISTORIES / "connector_lifecycle.json"
# Recorded by this version: the same lifecycle, to replay on later versions.
HISTORY_V2 = HISTORIES / "connector_lifecycle_v2.json"


@pytest.fixture
async def env(connector_worker: WorkerFactory) -> AsyncIterator[tuple[Client, SluiceClient]]:
    async with connector_worker(STAND_INS) as (client, queue):
        yield client, SluiceClient(client, queue)


async def _start(sluice: SluiceClient, name: str, config: dict[str, str], **internal: int) -> None:
    """Start as `temporal workflow start` would: no client-side validation (the stand-in class is
    not a real plugin); ``internal`` sets WorkflowState fields such as the continue-as-new threshold."""
    from temporalio.common import SearchAttributePair, TypedSearchAttributes

    from sluice.workflows.search_attributes import CONNECTOR_NAME

    await sluice.client.start_workflow(
        ConnectorWorkflow.run,
        WorkflowState(name=name, config=config, **internal),  # type: ignore[arg-type]
        id=workflow_id_for(name),
        task_queue=sluice.task_queue,
        search_attributes=TypedSearchAttributes([SearchAttributePair(CONNECTOR_NAME, name)]),
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
    assert [s.generation for s in starts_of(name) if s.task_id == 0] == [0], "a healthy task was restarted"

    nudges_before = nudged.count(name)
    assert (await sluice.pause(name)).state == ConnectorState.PAUSED
    await wait_for(lambda: _tasks_are(sluice, name, TaskState.PAUSED, TaskState.PAUSED), 30, "paused tasks")
    # stopping its tasks, the workflow nudged them (activities.nudges): idle ones hear it at once
    assert nudged.count(name) == nudges_before + 1
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
    if not HISTORY_V2.exists():  # record once; later runs replay the committed history
        HISTORY_V2.write_text(json.dumps(history.to_json_dict(), indent=1))


@pytest.mark.parametrize("recorded", [HISTORY_V1, HISTORY_V2], ids=lambda p: p.stem)
async def test_recorded_history_replays_with_current_code(recorded: Path) -> None:
    assert recorded.exists(), "the recorded histories are part of the repository"
    history = WorkflowHistory.from_json("recorded", recorded.read_text())
    await Replayer(workflows=[ConnectorWorkflow]).replay_workflow(history)


async def test_invalid_config_fails_the_workflow_without_running_tasks(
    env: tuple[Client, SluiceClient],
) -> None:
    _, sluice = env
    name = f"wf-bad-{uuid.uuid4().hex[:8]}"
    await _start(sluice, name, {"broken": "1"})
    final = await sluice.handle(name).result()
    assert final.state == ConnectorState.FAILED and "broken: must not be set" in final.error
    assert not starts_of(name)


async def test_encrypting_codec_keeps_configs_out_of_history_in_plaintext(
    wf_env: WorkflowEnvironment,
) -> None:
    import dataclasses

    from cryptography.fernet import Fernet
    from temporalio.converter import DataConverter

    from sluice.worker.codec import FernetCodec

    address = wf_env.client.service_client.config.target_host
    plain = await Client.connect(address)
    secured = await Client.connect(
        address,
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
        activities=STAND_INS,
        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
    ):
        sluice = SluiceClient(secured, queue)
        await _start(sluice, name, {"tasks.max": "1", "password": password})
        await wait_for(lambda: _tasks_are(sluice, name, TaskState.RUNNING), 30, "task running")
        assert (await sluice.status(name)).config["password"] == password  # the key holder reads it
        history = await plain.get_workflow_handle(workflow_id_for(name)).fetch_history()
        raw = b"".join(event.SerializeToString() for event in history.events)  # payload bytes as stored
        assert b"binary/sluice-fernet" in raw and password.encode() not in raw
        await sluice.delete(name)


async def test_pause_and_stop_right_after_create_are_kept(env: tuple[Client, SluiceClient]) -> None:
    """An update in the same breath as the start (Kafka Connect lets you create a connector paused)
    is accepted while the config is still being validated, and the tasks wait for a resume."""
    _, sluice = env
    paused, stopped = (f"early-{what}-{uuid.uuid4().hex[:6]}" for what in ("pause", "stop"))
    await _start(sluice, paused, {"tasks.max": "2"})
    assert (await sluice.pause(paused)).state == ConnectorState.PAUSED
    await _start(sluice, stopped, {"tasks.max": "1"})
    assert (await sluice.stop(stopped)).state == ConnectorState.STOPPED
    await wait_for(lambda: _tasks_are(sluice, paused, TaskState.PAUSED, TaskState.PAUSED), 30, "paused")
    await wait_for(lambda: _tasks_are(sluice, stopped, TaskState.STOPPED), 30, "stopped")
    assert starts_of(paused) == [] and starts_of(stopped) == []
    await sluice.resume(paused)
    await wait_for(lambda: _tasks_are(sluice, paused, TaskState.RUNNING, TaskState.RUNNING), 30, "resumed")
    for name in (paused, stopped):
        await sluice.delete(name)
