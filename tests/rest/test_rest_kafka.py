"""Kafka Connect's API end to end: its documented FileStreamSource/FileStreamSink example, sent
verbatim, moves a file's lines; lifecycle calls answer Kafka's status codes; offsets read, altered
(only while STOPPED: the rewound source delivers its lines again) and reset."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx

from tests.runtime.helpers import wait_for


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


async def _state(http: httpx.AsyncClient, name: str) -> str:
    response = await http.get(f"/kafka/connectors/{name}/status")
    assert response.status_code == 200, response.text
    return str(response.json()["connector"]["state"])


async def _tasks_stopped(http: httpx.AsyncClient, name: str) -> bool:
    tasks = (await http.get(f"/kafka/connectors/{name}/status")).json()["tasks"]
    return all(t["state"] == "STOPPED" for t in tasks)


async def test_documented_file_example_lifecycle_and_offsets(
    http: httpx.AsyncClient, tmp_path: Path, topic_name: str
) -> None:
    src, dst = tmp_path / "test.txt", tmp_path / "test.sink.txt"
    lines = "".join(f"kafka line {i}\n" for i in range(100))
    src.write_text(lines)
    tag = uuid.uuid4().hex[:6]
    source_name, sink_name = f"local-file-source-{tag}", f"local-file-sink-{tag}"
    version = (await http.get("/")).json()
    assert set(version) == {"version", "commit", "kafka_cluster_id"}

    # Kafka Connect's documented example (connect-file-source.properties as a REST create).
    created = await http.post(
        "/connectors",
        json={
            "name": source_name,
            "config": {
                "connector.class": "FileStreamSource",
                "tasks.max": "1",
                "file": str(src),
                "topic": topic_name,
            },
        },
    )
    assert created.status_code == 201, created.text
    assert created.json()["name"] == source_name and created.json()["type"] == "source"
    sink_config = {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "tasks.max": "1",
        "file": str(dst),
        "topics": topic_name,
    }
    put = await http.put(f"/connectors/{sink_name}/config", json=sink_config)
    assert put.status_code == 201, put.text
    await wait_for(lambda: _read(dst) == lines, 180, "the sink file to hold every line")

    assert {source_name, sink_name} <= set((await http.get("/connectors")).json())
    expanded = (await http.get("/connectors", params=[("expand", "status"), ("expand", "info")])).json()
    assert expanded[sink_name]["status"]["connector"]["state"] == "RUNNING"
    assert expanded[sink_name]["info"]["config"]["topics"] == topic_name
    info = (await http.get(f"/connectors/{source_name}")).json()
    assert info["config"]["file"] == str(src) and info["tasks"] == [{"connector": source_name, "task": 0}]
    config = (await http.get(f"/kafka/connectors/{sink_name}/config")).json()
    assert config == sink_config
    assert (await http.get(f"/kafka/connectors/{sink_name}/tasks")).json()[0]["config"][
        "topics"
    ] == topic_name
    task = (await http.get(f"/kafka/connectors/{sink_name}/tasks/0/status")).json()
    assert task["id"] == 0 and task["state"] == "RUNNING" and task["worker_id"]

    assert (await http.put(f"/connectors/{sink_name}/pause")).status_code == 202
    assert await _state(http, sink_name) == "PAUSED"
    assert (await http.put(f"/connectors/{sink_name}/resume")).status_code == 202
    assert await _state(http, sink_name) == "RUNNING"
    patched = await http.patch(
        f"/connectors/{sink_name}/config", json={"poll.interval.ms": "300", "tasks.max": None}
    )
    assert patched.status_code == 200 and patched.json()["config"]["poll.interval.ms"] == "300"
    assert "tasks.max" not in (await http.get(f"/kafka/connectors/{sink_name}/config")).json()
    replaced = await http.put(f"/connectors/{sink_name}/config", json=sink_config)
    assert replaced.status_code == 200 and replaced.json()["config"] == {**sink_config, "name": sink_name}
    assert (await http.post(f"/connectors/{sink_name}/restart")).status_code == 204
    restarted = await http.post(f"/connectors/{sink_name}/restart", params={"includeTasks": "true"})
    assert restarted.status_code == 202 and restarted.json()["name"] == sink_name
    assert (await http.post(f"/connectors/{sink_name}/tasks/0/restart")).status_code == 204
    no_task = await http.post(f"/connectors/{sink_name}/tasks/9/restart")
    assert (
        no_task.status_code == 404
        and no_task.json()["error_code"] == 404
        and "task 9" in no_task.json()["message"]
    )

    # Offsets: read any time, changed only while STOPPED.
    offsets = (await http.get(f"/connectors/{source_name}/offsets")).json()["offsets"]
    assert [o["partition"] for o in offsets] == [{"partition": str(src)}]
    assert offsets[0]["offset"]["position"]["key"] == [len(lines.encode())]
    rewound: list[dict[str, Any]] = [
        {
            "partition": offsets[0]["partition"],
            "offset": {"position": {**offsets[0]["offset"]["position"], "key": [0]}},
        }
    ]
    running = await http.patch(f"/connectors/{source_name}/offsets", json={"offsets": rewound})
    assert running.status_code == 400 and "STOPPED" in running.json()["message"]
    assert (await http.get(f"/connectors/{source_name}/offsets")).json()["offsets"] == offsets, (
        "nothing changed"
    )
    assert (await http.delete(f"/connectors/{source_name}/offsets")).status_code == 400

    assert (await http.put(f"/connectors/{source_name}/stop")).status_code == 204
    assert await _state(http, source_name) == "STOPPED"
    await wait_for(lambda: _tasks_stopped(http, source_name), 60, "the source task to stop")
    altered = await http.patch(f"/connectors/{source_name}/offsets", json={"offsets": rewound})
    assert altered.status_code == 200, altered.text
    assert (await http.get(f"/connectors/{source_name}/offsets")).json()["offsets"] == rewound
    assert (await http.put(f"/connectors/{source_name}/resume")).status_code == 202
    await wait_for(lambda: _read(dst) == lines + lines, 180, "the rewound source to deliver its lines again")

    assert (await http.put(f"/connectors/{source_name}/stop")).status_code == 204
    reset = await http.delete(f"/connectors/{source_name}/offsets")
    assert reset.status_code == 200 and "reset" in reset.json()["message"]
    assert (await http.get(f"/connectors/{source_name}/offsets")).json() == {"offsets": []}

    for name in (source_name, sink_name):
        assert (await http.delete(f"/connectors/{name}")).status_code == 204
        gone = await http.get(f"/connectors/{name}")
        assert gone.status_code == 404 and gone.json() == {
            "error_code": 404,
            "message": f"connector {name} not found",
        }


async def test_initial_state_and_plugins(http: httpx.AsyncClient, tmp_path: Path, topic_name: str) -> None:
    name = f"paused-{uuid.uuid4().hex[:6]}"
    config = {"connector.class": "FileStreamSource", "file": str(tmp_path / "none.txt"), "topic": topic_name}
    created = await http.post("/connectors", json={"name": name, "config": config, "initial_state": "PAUSED"})
    assert created.status_code == 201, created.text
    assert await _state(http, name) == "PAUSED"
    assert (await http.delete(f"/connectors/{name}")).status_code == 204

    plugins = {p["class"]: p["type"] for p in (await http.get("/connector-plugins")).json()}
    assert plugins["org.apache.kafka.connect.file.FileStreamSourceConnector"] == "source"
    assert plugins["FileStreamSink"] == "sink"
    definitions = (await http.get("/connector-plugins/FileStreamSink/config")).json()
    assert {"name", "type", "required", "default_value", "documentation"} <= set(definitions[0])
    target = {"file": str(tmp_path / "out.txt")}  # not a fixed path: it must not be a directory here
    result = (await http.put("/connector-plugins/FileStreamSink/config/validate", json=target)).json()
    assert result["name"] == "FileStreamSink" and result["error_count"] == 1
    [topics] = [c for c in result["configs"] if c["value"]["errors"]]
    assert topics["value"]["name"] == "topics" and "'topics'" in topics["value"]["errors"][0]
    missing = await http.get("/connector-plugins/com.example.Nope/config")
    assert missing.status_code == 404 and "com.example.Nope" in missing.json()["message"]
