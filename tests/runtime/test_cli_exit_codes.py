"""`sluice connector ...` as scripts see it: real CLI subprocesses, their exit codes and stderr.

The connector workflow is the real ``ConnectorWorkflow`` on the real Temporal dev server, run by
an in-process worker on a private task queue; config validation is the real plugin validation
(``dummy-source``), while the task and offset activities are same-named stand-ins (samples-python's
pattern) so a create/delete round trip costs about a second, not a Spark start. The CLI processes
reach that worker through ``SLUICE_TASK_QUEUE``.

Exit codes under test (worker/errors.py): 0 ok, 2 usage/invalid config, 3 not found, 4 already
exists, 5 refused in the current state, 6 Temporal unreachable, 7 no worker answered.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import activity
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.worker import Worker

from sluice.activities.connector_activities import validate_config
from sluice.activities.context import RuntimeContext
from sluice.activities.heartbeat import Progress
from sluice.activities.offsets import OffsetActivities
from sluice.deploy.local.config import StackConfig
from sluice.worker.client import (
    ConnectorConfigError,
    ConnectorExistsError,
    ConnectorNotAnsweringError,
    ConnectorNotFoundError,
    ConnectorStateError,
    SluiceClient,
)
from sluice.worker.settings import settings
from sluice.workflows.connector import ConnectorWorkflow
from sluice.workflows.types import (
    DELETE_OFFSETS_ACTIVITY,
    RUN_TASK_ACTIVITY,
    VALIDATE_ACTIVITY,
    ConnectorSpec,
    ConnectorState,
    TaskInput,
    TaskOutcome,
    ValidationResult,
)
from tests.runtime.helpers import wait_for
from tests.workflows.stand_ins import nudge_tasks_stand_in

# Markers of a process that died in interpreter finalization or leaked a traceback.
CRASH_MARKERS = ("Fatal Python error", "Traceback", "Segmentation fault", "PyGILState")
LOOP_ROUNDS = 33
LANES = 3  # concurrent create/delete lanes: the 2-core CI box stays busy, not oversubscribed


@activity.defn(name=VALIDATE_ACTIVITY)
async def validate_real(spec: ConnectorSpec) -> ValidationResult:
    return validate_config(spec.name, spec.config)


@activity.defn(name=RUN_TASK_ACTIVITY)
async def run_task_stand_in(inp: TaskInput) -> TaskOutcome:
    """Runs until cancelled, heartbeating like a real task (cancellation arrives on a heartbeat) with
    the real task's details (activities.heartbeat.Progress): 10 records per 0.05 s "batch"."""
    progress = Progress(phase="running")
    while True:
        progress.batches += 1
        progress.records += 10
        progress.last_committed_batch = progress.batches - 1
        activity.heartbeat(asdict(progress))
        await asyncio.sleep(0.05)


@activity.defn(name=DELETE_OFFSETS_ACTIVITY)
async def delete_offsets_stand_in(connector: str) -> None:
    return None


@dataclass(frozen=True)
class CliEnv:
    env: dict[str, str]
    sluice: SluiceClient


@dataclass(frozen=True)
class Run:
    args: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return f"sluice {' '.join(self.args)} -> {self.code}\nstdout: {self.stdout}\nstderr: {self.stderr}"


@pytest.fixture
async def cli(stack_config: StackConfig, fresh_schema: str) -> AsyncIterator[CliEnv]:
    """A worker on a private task queue: the real workflow, validation and offset activities (on a
    fresh store schema), stand-in task activities."""
    client = await Client.connect(stack_config.temporal_address)
    queue = f"cli-test-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "SLUICE_TASK_QUEUE": queue, "COLUMNS": "200"}
    runtime = dataclasses.replace(
        settings().runtime, database_url=stack_config.database_url, store_schema=fresh_schema
    )
    offsets = OffsetActivities(RuntimeContext(runtime))
    async with Worker(
        client,
        task_queue=queue,
        workflows=[ConnectorWorkflow],
        activities=[
            validate_real,
            run_task_stand_in,
            delete_offsets_stand_in,
            nudge_tasks_stand_in,
            *offsets.all(),
        ],
        activity_executor=ThreadPoolExecutor(4),
        # Deliver a delete's cancellation to the running task within ~0.1 s, not 8 s.
        max_heartbeat_throttle_interval=timedelta(milliseconds=100),
        default_heartbeat_throttle_interval=timedelta(milliseconds=100),
    ):
        yield CliEnv(env, SluiceClient(client, queue))


async def sluice(cli: CliEnv, *args: str, env: dict[str, str] | None = None) -> Run:
    """One real `sluice` process (async, so the in-process worker keeps serving meanwhile)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sluice.worker.cli",
        *args,
        env=env or cli.env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode is not None
    return Run(args, proc.returncode, out.decode(), err.decode())


def assert_ok(run: Run) -> None:
    assert run.code == 0, str(run)
    assert not any(m in run.stderr for m in CRASH_MARKERS), str(run)


def assert_one_line_error(run: Run, code: int, *fragments: str) -> None:
    """A known error: the expected code, exactly one stderr line, naming what it is about."""
    assert run.code == code, str(run)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, str(run)
    assert not any(m in run.stderr for m in CRASH_MARKERS), str(run)
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"
    assert run.stdout == "", str(run)


async def _is_running(client: SluiceClient, name: str) -> bool:
    return (await client.status(name)).state == ConnectorState.RUNNING


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


DUMMY = ("--set", "connector.class=dummy-source", "--set", "topic=cli-test")


@pytest.mark.slow
async def test_create_delete_loop_exits_zero_every_time(cli: CliEnv) -> None:
    """Regression for exits 134/139 after success (Temporal's runtime torn down in finalization)."""
    runs: list[Run] = []

    async def lane(lane_id: int) -> None:
        for i in range(lane_id, LOOP_ROUNDS, LANES):
            name = f"loop-{uuid.uuid4().hex[:6]}-{i}"
            created = await sluice(cli, "connector", "create", name, *DUMMY, "--output", "json")
            assert_ok(created)
            assert json.loads(created.stdout)["name"] == name
            deleted = await sluice(cli, "connector", "delete", name)
            assert_ok(deleted)
            assert deleted.stdout.strip() == f"connector {name} deleted"
            runs.extend([created, deleted])

    await asyncio.gather(*(lane(i) for i in range(LANES)))
    assert len(runs) == 2 * LOOP_ROUNDS
    assert [r.code for r in runs] == [0] * len(runs)
    assert not [n for n in await cli.sluice.list() if n.startswith("loop-")], "a deleted connector still runs"


async def test_unknown_connector_is_not_found_in_every_command(cli: CliEnv) -> None:
    name = _name("ghost")
    commands = [
        ("status", name),
        ("config", name),
        ("tasks", name),
        ("pause", name),
        ("resume", name),
        ("stop", name),
        ("restart", name),
        ("restart", name, "--failed"),
        ("reconfigure", name, *DUMMY),
        ("delete", name),
    ]
    runs = await asyncio.gather(*(sluice(cli, "connector", *c) for c in commands))
    for run in runs:
        assert_one_line_error(run, 3, f"connector {name} not found")


async def test_deleted_connector_is_not_found(cli: CliEnv) -> None:
    name = _name("gone")
    assert_ok(await sluice(cli, "connector", "create", name, *DUMMY))
    assert_ok(await sluice(cli, "connector", "delete", name))
    for command in ("status", "pause", "restart", "delete", "config"):
        assert_one_line_error(await sluice(cli, "connector", command, name), 3, name, "not found")
    # The name is free again: a new connector of the same name can be created.
    assert_ok(await sluice(cli, "connector", "create", name, *DUMMY))
    assert_ok(await sluice(cli, "connector", "delete", name))


async def test_concurrent_creates_one_wins_the_other_already_exists(cli: CliEnv) -> None:
    name = _name("twin")
    first, second = await asyncio.gather(
        sluice(cli, "connector", "create", name, *DUMMY), sluice(cli, "connector", "create", name, *DUMMY)
    )
    winner, loser = (first, second) if first.code == 0 else (second, first)
    assert_ok(winner)
    assert_one_line_error(loser, 4, f"connector {name} already exists")
    assert_one_line_error(await sluice(cli, "connector", "create", name, *DUMMY), 4, "already exists")
    assert_ok(await sluice(cli, "connector", "delete", name))


async def test_invalid_config_and_usage_errors(cli: CliEnv, tmp_path: Path) -> None:
    name = _name("bad")
    missing_topic = await sluice(cli, "connector", "create", name, "--set", "connector.class=dummy-source")
    assert_one_line_error(missing_topic, 2, name, "topic")
    unknown_class = await sluice(cli, "connector", "create", name, "--set", "connector.class=no-such")
    assert_one_line_error(unknown_class, 2, name, "connector.class", "no-such")
    # Nothing was started for the rejected configs.
    assert_one_line_error(await sluice(cli, "connector", "status", name), 3, name)

    assert_one_line_error(await sluice(cli, "connector", "create", name, "--set", "topic"), 2, "KEY=VALUE")
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    run = await sluice(cli, "connector", "create", name, "--config-file", str(bad_json))
    assert_one_line_error(run, 2, str(bad_json), "not valid JSON")
    run = await sluice(cli, "connector", "create", name, "--config-file", str(tmp_path / "absent.json"))
    assert_one_line_error(run, 2, "absent.json")

    # Reconfigure of an existing connector with a bad config: rejected, the connector untouched.
    good = _name("good")
    assert_ok(await sluice(cli, "connector", "create", good, *DUMMY))
    run = await sluice(cli, "connector", "reconfigure", good, "--set", "connector.class=dummy-source")
    assert_one_line_error(run, 2, good, "topic")
    assert (await cli.sluice.config(good))["topic"] == "cli-test"
    assert_ok(await sluice(cli, "connector", "delete", good))


async def test_operation_refused_in_current_state(cli: CliEnv) -> None:
    name = _name("stopped")
    assert_ok(await sluice(cli, "connector", "create", name, *DUMMY))
    assert_ok(await sluice(cli, "connector", "stop", name))
    assert_one_line_error(await sluice(cli, "connector", "pause", name), 5, f"connector {name}", "STOPPED")
    resumed = await sluice(cli, "connector", "resume", name, "-o", "json")
    assert_ok(resumed)
    assert json.loads(resumed.stdout)["state"] == "RUNNING"
    assert_ok(await sluice(cli, "connector", "delete", name))


async def test_unreachable_temporal_names_the_address(cli: CliEnv) -> None:
    env = {**cli.env, "SLUICE_TEMPORAL_ADDRESS": "127.0.0.1:1"}
    run = await sluice(cli, "connector", "status", "anything", env=env)
    assert_one_line_error(run, 6, "127.0.0.1:1")


async def test_unexpected_error_is_one_line_with_a_debug_hint(cli: CliEnv, tmp_path: Path) -> None:
    # A state directory that is a regular file: nothing Sluice names as a known error.
    not_a_dir = tmp_path / "state"
    not_a_dir.write_text("")
    env = {**cli.env, "SLUICE_STATE_DIR": str(not_a_dir)}
    run = await sluice(cli, "stack", "status", env=env)
    assert_one_line_error(run, 1, "--debug")
    assert "NotADirectoryError" in run.stderr
    debug = await sluice(cli, "--debug", "stack", "status", env=env)
    assert debug.code == 1 and "Traceback" in debug.stderr, str(debug)


async def test_python_client_raises_typed_errors_naming_the_connector(cli: CliEnv) -> None:
    sluice_client = cli.sluice
    ghost = _name("ghost")
    for call in (
        sluice_client.status(ghost),
        sluice_client.config(ghost),
        sluice_client.tasks(ghost),
        sluice_client.pause(ghost),
        sluice_client.restart(ghost, only_failed=True),
        sluice_client.delete(ghost),
    ):
        with pytest.raises(ConnectorNotFoundError) as not_found:
            await call
        assert not_found.value.connector == ghost and str(not_found.value) == f"connector {ghost} not found"

    name = _name("typed")
    config = {"connector.class": "dummy-source", "topic": "cli-test"}
    results = await asyncio.gather(
        sluice_client.create(name, config), sluice_client.create(name, config), return_exceptions=True
    )
    errors = [r for r in results if isinstance(r, BaseException)]
    assert len(errors) == 1 and isinstance(errors[0], ConnectorExistsError), results
    assert errors[0].connector == name

    with pytest.raises(ConnectorConfigError) as bad:
        await sluice_client.reconfigure(name, {"connector.class": "dummy-source"})
    assert bad.value.connector == name and any("topic" in e for e in bad.value.errors)

    await wait_for(lambda: _is_running(sluice_client, name), 30, f"{name} RUNNING")
    assert (await sluice_client.stop(name)).state == ConnectorState.STOPPED
    with pytest.raises(ConnectorStateError) as refused:
        await sluice_client.pause(name)
    assert refused.value.connector == name and refused.value.operation == "pause"
    assert isinstance(refused.value, WorkflowUpdateFailedError) and "STOPPED" in str(refused.value.cause)

    await sluice_client.delete(name)
    with pytest.raises(ConnectorNotFoundError):
        await sluice_client.status(name)
    with pytest.raises(ConnectorNotFoundError):
        await sluice_client.resume(name)


async def test_no_worker_is_a_timely_error_not_a_hang(cli: CliEnv) -> None:
    """A connector whose task queue nobody polls: create still succeeds, queries and updates fail fast."""
    queue = f"cli-no-worker-{uuid.uuid4().hex[:8]}"
    client = SluiceClient(cli.sluice.client, queue, answer_timeout=2)
    name = _name("orphan")
    created = await client.create(name, {"connector.class": "dummy-source", "topic": "cli-test"})
    assert created.state == ConnectorState.UNASSIGNED and created.connector_class == "dummy-source"
    try:
        for call in (client.status(name), client.pause(name)):
            with pytest.raises(ConnectorNotAnsweringError) as err:
                await call
            assert err.value.exit_code == 7 and name in str(err.value) and queue in str(err.value)
    finally:
        await client.handle(name).terminate("test cleanup")
