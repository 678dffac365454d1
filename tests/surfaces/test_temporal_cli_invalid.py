"""Bad plain JSON given to `temporal workflow start` ends the connector FAILED with per-field
errors in its status — never a workflow task failing (and retried) in a loop."""

from __future__ import annotations

import uuid

from tests.runtime.helpers import wait_for
from tests.surfaces.conftest import TemporalCli

# (input JSON, or None for no --input; text the status error must contain)
CASES: list[tuple[str | None, str]] = [
    ('{"name": "N", "config": {"connector.class": "file-source", "topic": "t", "tasks.max": 2}}',
     "field 'tasks.max': expected a string value, got 2"),
    ('{"name": "N", "config": {"connector.class": "no-such-plugin"}}', "no-such-plugin"),
    ('{"name": "N"}', "field 'config': required"),
    ('{"config": {"connector.class": "file-source"}}', "field 'name': required"),
    ('"file-source"', "the workflow input must be a JSON object"),
    ('{"name": "N", "config": ["connector.class", "file-source"]}',
     "field 'config': expected an object of string values, got an array"),
    ('{"name": 7, "config": {}}', "field 'name': expected a string, got a number"),
    ('{"name": "N", "config": {}, "state": "SOMETHING"}', "field 'state': internal workflow state"),
    (None, "the workflow has no input"),
]  # fmt: skip


def _history_events(cli: TemporalCli, workflow_id: str) -> list[str]:
    shown = cli.json("workflow", "show", "--workflow-id", workflow_id)
    return [event["eventType"] for event in shown["events"]]


async def test_invalid_start_inputs_end_failed_with_per_field_errors(
    start_worker, runtime_env, temporal_cli: TemporalCli
) -> None:
    start_worker()
    run = uuid.uuid4().hex[:6]
    started = []
    for i, (raw, _) in enumerate(CASES):
        name = f"bad{i}-{run}"
        workflow_id = f"sluice-connector-{name}"
        args = ["workflow", "start", "--type", "ConnectorWorkflow"]
        args += ["--task-queue", runtime_env.task_queue, "--workflow-id", workflow_id]
        if raw is not None:
            args += ["--input", raw.replace('"N"', f'"{name}"')]
        temporal_cli.run(*args)
        started.append(workflow_id)

    for workflow_id, (raw, expected) in zip(started, CASES, strict=True):
        await wait_for(
            lambda wid=workflow_id: (
                temporal_cli.json("workflow", "describe", "--workflow-id", wid)["workflowExecutionInfo"][
                    "status"
                ]
                == "WORKFLOW_EXECUTION_STATUS_COMPLETED"
            ),
            60,
            f"{workflow_id} (input {raw}) to end",
        )
        status = temporal_cli.status(workflow_id)
        name = workflow_id.removeprefix("sluice-connector-")
        assert status["state"] == "FAILED", (raw, status)
        assert expected in status["error"], (raw, status["error"])
        assert name in status["error"], (raw, status["error"])  # the connector is named
        events = _history_events(temporal_cli, workflow_id)
        assert "EVENT_TYPE_WORKFLOW_TASK_FAILED" not in events, (raw, events)
        # The failure is searchable too.
        query = f"ConnectorName='{name}' AND ConnectorState='FAILED'"
        await wait_for(
            lambda q=query, wid=workflow_id: temporal_cli.list_ids(q) == [wid], 30, f"{query} to list it"
        )
