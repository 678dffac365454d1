"""The `temporal` CLI as a front door (docs/operating.md, "Temporal CLI and UI"): the exact commands a person
copies — start from plain JSON, list by search attribute, query status, pause/resume/restart/stop/
delete updates with and without input — drive a real file -> RocketMQ -> file pipeline."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from tests.runtime.helpers import wait_for
from tests.surfaces.conftest import TemporalCli, state_of


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def _start(cli: TemporalCli, queue: str, name: str, config: dict[str, str]) -> str:
    workflow_id = f"sluice-connector-{name}"
    cli.run(
        "workflow", "start", "--type", "ConnectorWorkflow", "--task-queue", queue,
        "--workflow-id", workflow_id, "--static-summary", f"connector {name}",
        "--input", json.dumps({"name": name, "config": config}),
    )  # fmt: skip
    return workflow_id


async def test_file_pipeline_started_controlled_and_deleted_with_the_temporal_cli(
    tmp_path: Path, start_worker, runtime_env, temporal_cli: TemporalCli, topic_name: str
) -> None:
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("".join(f"line {i}\n" for i in range(500)))
    start_worker()
    name = uuid.uuid4().hex[:8]
    common = {"poll.interval.ms": "200", "task.heartbeat.timeout.s": "5"}
    source = _start(
        temporal_cli, runtime_env.task_queue, f"src-{name}",
        {"connector.class": "file-source", "file": str(src), "topic": topic_name, **common},
    )  # fmt: skip
    sink = _start(
        temporal_cli, runtime_env.task_queue, f"dst-{name}",
        {"connector.class": "file-sink", "file": str(dst), "topics": topic_name, **common},
    )  # fmt: skip
    await wait_for(lambda: _read(dst) == _read(src), 600, "the sink file to equal the source file")

    # Found by its search attribute; the status query reads it.
    await wait_for(
        lambda: temporal_cli.list_ids(f"ConnectorName='src-{name}'") == [source],
        30,
        "workflow list --query ConnectorName= to find the source",
    )
    status = temporal_cli.status(source)
    assert (status["name"], status["state"], status["kind"]) == (f"src-{name}", "RUNNING", "source")
    assert [t["state"] for t in status["tasks"]] == ["RUNNING"]
    described = temporal_cli.json("workflow", "describe", "--workflow-id", source)
    assert described["executionConfig"]["userMetadata"]["summary"] == f"connector src-{name}"
    run_id = described["workflowExecutionInfo"]["execution"]["runId"]
    # The same start again returns the running connector and starts nothing.
    again = temporal_cli.json(
        "workflow", "start", "--type", "ConnectorWorkflow", "--task-queue", runtime_env.task_queue,
        "--workflow-id", source, "--input", json.dumps({"name": f"src-{name}", "config": {}}),
    )  # fmt: skip
    assert again["runId"] == run_id
    assert temporal_cli.status(source)["config"]["file"] == str(src)

    # Paused: appended lines stay in the source file until resume.
    assert temporal_cli.update(source, "pause")["state"] == "PAUSED"
    await wait_for(
        lambda: temporal_cli.status(source)["tasks"][0]["state"] == "PAUSED", 30, "the source task to pause"
    )
    await wait_for(
        lambda: temporal_cli.list_ids(f"ConnectorName='src-{name}' AND ConnectorState='PAUSED'") == [source],
        30,
        "the ConnectorState search attribute to say PAUSED",
    )
    with src.open("a") as f:
        f.write("".join(f"line {i}\n" for i in range(500, 700)))
    before = _read(dst)
    assert before.count("\n") == 500
    assert temporal_cli.update(source, "resume")["state"] == "RUNNING"
    await wait_for(lambda: _read(dst) == _read(src), 120, "the appended lines after resume")

    # Restart with no input (all tasks) and with plain JSON for RestartRequest.
    generation = temporal_cli.status(sink)["generation"]
    assert temporal_cli.update(sink, "restart")["generation"] == generation + 1
    restarted = temporal_cli.update(sink, "restart", "--input", '{"only_failed": true}')
    assert restarted["generation"] == generation + 2 and restarted["state"] == "RUNNING"

    # Reconfigure from plain JSON: the sink now writes a second file.
    dst2 = tmp_path / "out2.txt"
    sink_config = {"connector.class": "file-sink", "file": str(dst2), "topics": topic_name, **common}
    changed = temporal_cli.update(sink, "reconfigure", "--input", json.dumps({"config": sink_config}))
    assert changed["config"]["file"] == str(dst2)
    # The update answers at once; the running task stops and the new one starts after it. A line
    # appended before then may still reach the old file, as in Kafka Connect.
    await wait_for(
        lambda: temporal_cli.status(sink)["tasks"][0]["running_since"] != "",
        120,
        "the sink's task to start again with the new config",
    )
    with src.open("a") as f:
        f.write("after reconfigure\n")
    await wait_for(lambda: _read(dst2).endswith("after reconfigure\n"), 300, "the reconfigured sink's file")

    # An update the state does not allow is refused with the connector's name; nothing changes.
    assert temporal_cli.update(sink, "stop")["state"] == "STOPPED"
    refused = temporal_cli.run(
        "workflow", "update", "execute", "--workflow-id", sink, "--name", "pause", check=False
    )
    assert refused.returncode != 0
    assert f"connector dst-{name} is STOPPED" in refused.stderr
    await wait_for(lambda: state_of(temporal_cli, sink)() == "STOPPED", 10, "the sink to stay STOPPED")

    # Delete with no input ends the workflow (offsets deleted by default).
    temporal_cli.update(source, "delete")
    described = temporal_cli.json("workflow", "describe", "--workflow-id", source)
    await wait_for(
        lambda: (
            temporal_cli.json("workflow", "describe", "--workflow-id", source)["workflowExecutionInfo"][
                "status"
            ]
            == "WORKFLOW_EXECUTION_STATUS_COMPLETED"
        ),
        60,
        "the deleted source's workflow to complete",
    )
    assert described["workflowExecutionInfo"]["type"]["name"] == "ConnectorWorkflow"
    assert temporal_cli.status(source)["state"] == "DELETED"
    temporal_cli.update(sink, "delete", "--input", '{"delete_offsets": false}')
