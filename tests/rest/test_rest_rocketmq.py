"""RocketMQ Connect's paths end to end: its README's file connector configs, sent verbatim, move a
file's lines through RocketMQ; every path answers the recorded shapes inside the envelope."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx

from tests.runtime.helpers import wait_for

RMQ_SOURCE = "org.apache.rocketmq.connect.file.FileSourceConnector"
RMQ_SINK = "org.apache.rocketmq.connect.file.FileSinkConnector"


def _ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    doc = response.json()
    assert set(doc) == {"status", "body"} and doc["status"] == 200, doc
    return doc["body"]


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


async def test_readme_connectors_move_a_file_and_every_path_answers(
    http: httpx.AsyncClient, tmp_path: Path, topic_name: str
) -> None:
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("".join(f"rocketmq line {i}\n" for i in range(200)))
    tag = uuid.uuid4().hex[:6]
    source_name, sink_name = f"fileSourceConnector-{tag}", f"fileSinkConnector-{tag}"
    # RocketMQ Connect's README, verbatim but for paths and topic.
    source = {"connector.class": RMQ_SOURCE, "filename": str(src), "connect.topicname": topic_name}
    sink = {"connector.class": RMQ_SINK, "filename": str(dst), "connect.topicnames": topic_name}

    assert _ok(await http.post(f"/connectors/{source_name}", json=source)) == source
    # RocketMQ Connect's other create form: GET with the config as a query parameter.
    assert _ok(await http.get(f"/connectors/{sink_name}", params={"config": json.dumps(sink)})) == sink
    await wait_for(lambda: _read(dst) == _read(src), 180, "the sink file to equal the source file")

    listed = _ok(await http.get("/connectors/list"))
    assert listed[source_name]["info"]["config"] == source and listed[source_name]["info"]["type"] == "SOURCE"
    assert listed[sink_name]["status"]["connector"]["state"] == "RUNNING"
    status = _ok(await http.get(f"/connectors/{sink_name}/status"))
    assert status["name"] == sink_name and status["type"] == "SINK"
    assert status["connector"]["trace"] is None and status["connector"]["workerId"]
    assert [(t["id"], t["state"]) for t in status["tasks"]] == [(0, "RUNNING")]
    info = _ok(await http.get(f"/connectors/{source_name}/config"))
    assert info == {
        "name": source_name,
        "config": source,
        "tasks": [{"connector": source_name, "task": 0}],
        "type": "SOURCE",
    }
    tasks = _ok(await http.get(f"/connectors/{sink_name}/tasks"))
    assert tasks[0]["id"] == {"connector": sink_name, "task": 0} and tasks[0]["config"]["file"] == str(dst)
    task = _ok(await http.get(f"/connectors/{sink_name}/tasks/0/status"))
    assert (
        task["state"] == "RUNNING" and task["id"] == 0 and set(task) == {"state", "trace", "workerId", "id"}
    )
    missing_task = await http.get(f"/connectors/{sink_name}/tasks/7/status")
    assert missing_task.status_code == 404 and "task 7" in missing_task.json()["message"]

    allocated = _ok(await http.get("/allocated/connectors"))
    assert allocated[source_name] == source
    running = _ok(await http.get("/allocated/tasks"))["runningTasks"]
    assert {t["connectorName"] for t in running} >= {source_name, sink_name}
    assert all(t["taskState"] == "RUNNING" for t in running)
    assert _ok(await http.get("/getClusterInfo")), "the worker polling the task queue is listed"

    assert (
        _ok(await http.get(f"/connectors/{source_name}/pause"))
        == f"Connector [{source_name}] paused successfully"
    )
    assert _ok(await http.get(f"/connectors/{source_name}/status"))["connector"]["state"] == "PAUSED"
    assert (
        _ok(await http.get(f"/connectors/{source_name}/resume"))
        == f"Connector [{source_name}] resumed successfully"
    )
    assert _ok(await http.get(f"/connectors/{source_name}/status"))["connector"]["state"] == "RUNNING"

    assert _ok(await http.get("/connectors/pause/all")) == "All connectors paused successfully"
    assert _ok(await http.get(f"/connectors/{sink_name}/status"))["connector"]["state"] == "PAUSED"
    assert _ok(await http.get("/connectors/resume/all")) == "All connectors resumed successfully"
    assert _ok(await http.get(f"/connectors/{sink_name}/status"))["connector"]["state"] == "RUNNING"

    # RocketMQ Connect's stop DELETES the connector.
    assert (
        _ok(await http.get(f"/connectors/{source_name}/stop"))
        == f"Connector [{source_name}] deleted successfully"
    )
    gone = await http.get(f"/connectors/{source_name}/status")
    assert gone.status_code == 404 and gone.json() == {
        "errorCode": 404,
        "message": f"connector {source_name} not found",
    }
    assert _ok(await http.get("/connectors/stop/all")) == "All connectors stopped successfully"
    assert _ok(await http.get("/connectors/list")) == {}
    assert (
        _ok(await http.get("/connectors/pause/all"))
        == "No connector needs to be paused, please add connector first"
    )


async def test_plugin_paths(http: httpx.AsyncClient) -> None:
    for path in ("/plugin/list", "/plugin/list/connectors"):
        listed = {p["className"]: p["type"] for p in _ok(await http.get(path))}
        assert listed[RMQ_SOURCE] == "SOURCE" and listed[RMQ_SINK] == "SINK"
        assert listed["FileStreamSource"] == "SOURCE" and listed["file-sink"] == "SINK"
    assert _ok(await http.get("/plugin/reload"))
    fields = {f["name"]: f for f in _ok(await http.get("/plugin/config", params={"plugin": RMQ_SOURCE}))}
    assert "filename" in fields["file"]["aliases"] and fields["topic"]["required"]
    assert fields["topic"]["aliases"] == ["connect.topicname"]

    good = {"connector.class": RMQ_SOURCE, "filename": "/tmp/x.txt", "connect.topicname": "t1"}
    result = _ok(await http.put("/plugin/config/validate", json=good))
    assert result["error_count"] == 0
    bad = _ok(
        await http.post("/plugin/config/validate", json={"connector.class": RMQ_SOURCE, "filename": "/tmp/x"})
    )
    assert bad["error_count"] >= 1
    errors = {c["value"]["name"]: c["value"]["errors"] for c in bad["configs"] if c["value"]["errors"]}
    assert "topic" in errors and "'topic' is required" in errors["topic"][0]
    unknown = await http.put("/plugin/config/validate", json={"connector.class": "com.example.Nope"})
    assert unknown.status_code == 400 and "com.example.Nope" in unknown.json()["message"]
