"""The bad-input list of issue 11: each answers its status code with a message naming the field or
connector, and nothing changes (no connector created, no config replaced)."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx

from sluice.worker.client import SluiceClient
from tests.rest.conftest import TOKEN, make_http

AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def _absent(http: httpx.AsyncClient, name: str) -> None:
    response = await http.get(f"/connectors/{name}", headers=AUTH)
    assert response.status_code == 404 and name in response.json()["message"], response.text


async def test_bad_input_answers_and_changes_nothing(
    http_auth: httpx.AsyncClient, rest_client: SluiceClient, tmp_path: Path, topic_name: str
) -> None:
    http = http_auth
    name = f"bad-{uuid.uuid4().hex[:6]}"
    good = {"connector.class": "FileStreamSource", "file": str(tmp_path / "in.txt"), "topic": topic_name}

    # No token, then a wrong one: 401 on every mutating path of both flavours; reads stay open.
    for call in (
        http.post(f"/connectors/{name}", json=good),
        http.post("/connectors", json={"name": name, "config": good}),
        http.get(f"/connectors/{name}/stop"),
        http.get("/connectors/stop/all"),
    ):
        response = await call
        assert response.status_code == 401 and "Bearer" in response.json()["message"], response.text
    wrong = await http.post(f"/connectors/{name}", json=good, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json() == {"errorCode": 401, "message": "wrong bearer token"}
    assert wrong.headers["www-authenticate"] == "Bearer"
    assert (await http.get("/connectors/list")).status_code == 200
    await _absent(http, name)

    # A body over the limit (4 KiB here), malformed JSON, wrong shapes.
    huge = {**good, "padding": "x" * 5000}
    for path in (f"/connectors/{name}", "/connectors"):
        response = await http.post(
            path, json=huge if path != "/connectors" else {"name": name, "config": huge}, headers=AUTH
        )
        assert response.status_code == 413 and "4096" in response.json()["message"]
    malformed = await http.post(f"/connectors/{name}", content=b'{"connector.class": ', headers=AUTH)
    assert malformed.status_code == 400
    assert malformed.json()["message"].startswith("request body is malformed JSON: Expecting value at line 1")
    query = await http.get(f"/connectors/{name}", params={"config": "not json"}, headers=AUTH)
    assert query.status_code == 400 and "query param 'config' is malformed JSON" in query.json()["message"]
    nested = await http.post(f"/connectors/{name}", json={**good, "topic": {"a": 1}}, headers=AUTH)
    assert nested.status_code == 400 and "'topic'" in nested.json()["message"]
    await _absent(http, name)

    # Unknown class, missing required field (RocketMQ's and Kafka's keys).
    unknown = await http.post(
        f"/connectors/{name}", json={**good, "connector.class": "com.example.Nope"}, headers=AUTH
    )
    assert unknown.status_code == 400 and "connector.class" in unknown.json()["message"]
    assert (
        "com.example.Nope" in unknown.json()["message"] and "known: delta-sink" in unknown.json()["message"]
    )
    assert "No module named" not in unknown.json()["message"]
    no_class = await http.post("/connectors", json={"name": name, "config": {"file": "/tmp/x"}}, headers=AUTH)
    assert no_class.status_code == 400 and no_class.json()["error_code"] == 400
    assert "'connector.class' is required" in no_class.json()["message"]
    no_topic = await http.post(
        f"/connectors/{name}",
        json={
            "connector.class": "org.apache.rocketmq.connect.file.FileSourceConnector",
            "filename": "/tmp/x",
        },
        headers=AUTH,
    )
    assert no_topic.status_code == 400 and "'topic' is required" in no_topic.json()["message"]
    assert name in no_topic.json()["message"]
    await _absent(http, name)

    # Unknown connector: 404 naming it, in each flavour's body.
    ghost = f"ghost-{uuid.uuid4().hex[:6]}"
    rmq = await http.get(f"/connectors/{ghost}/status")
    assert rmq.status_code == 404 and rmq.json() == {
        "errorCode": 404,
        "message": f"connector {ghost} not found",
    }
    kafka = await http.put(f"/connectors/{ghost}/pause", headers=AUTH)
    assert kafka.status_code == 404 and kafka.json() == {
        "error_code": 404,
        "message": f"connector {ghost} not found",
    }
    assert (await http.get(f"/connectors/{ghost}/stop", headers=AUTH)).status_code == 404

    # A second create with the same name: 409, the first config kept.
    assert (await http.post(f"/connectors/{name}", json=good, headers=AUTH)).status_code == 200
    again = await http.post(f"/connectors/{name}", json={**good, "topic": "other"}, headers=AUTH)
    assert again.status_code == 409 and again.json()["message"] == f"connector {name} already exists"
    kafka_again = await http.post("/connectors", json={"name": name, "config": good}, headers=AUTH)
    assert kafka_again.status_code == 409 and kafka_again.json()["error_code"] == 409
    # An invalid replacement config is refused and the running config stays.
    refused = await http.put(f"/connectors/{name}/config", json={**good, "topic": ""}, headers=AUTH)
    assert refused.status_code == 400 and "'topic'" in refused.json()["message"]
    assert (await rest_client.config(name))["topic"] == topic_name
    # Offsets of a running connector cannot change.
    offsets = {"offsets": [{"partition": {"partition": good["file"]}, "offset": {"position": 0}}]}
    running = await http.patch(f"/connectors/{name}/offsets", json=offsets, headers=AUTH)
    assert (
        running.status_code == 400
        and "STOPPED" in running.json()["message"]
        and name in running.json()["message"]
    )
    bad_offsets = await http.patch(
        f"/connectors/{name}/offsets", json={"offsets": [{"partition": 1}]}, headers=AUTH
    )
    assert bad_offsets.status_code == 400 and "offsets[0]" in bad_offsets.json()["message"]
    assert (await http.delete(f"/connectors/{name}", headers=AUTH)).status_code == 204


async def test_reads_need_the_token_when_configured(rest_client: SluiceClient) -> None:
    async with make_http(rest_client, token=TOKEN, auth_reads=True) as http:
        assert (await http.get("/connectors")).status_code == 401
        assert (await http.get("/connectors/list")).json()["errorCode"] == 401
        assert (await http.get("/connectors", headers=AUTH)).status_code == 200


async def test_secrets_are_masked_in_every_response(
    http: httpx.AsyncClient, topic_name: str, tmp_path: Path
) -> None:
    name = f"secret-{uuid.uuid4().hex[:6]}"
    config = {
        "connector.class": "file-source",
        "file": str(tmp_path / "in.txt"),
        "topic": topic_name,
        "db.password": "hunter2",
    }
    bodies = [(await http.post(f"/connectors/{name}", json=config)).text]
    for path in (
        "/connectors/list",
        f"/connectors/{name}",
        f"/connectors/{name}/config",
        f"/connectors/{name}/tasks",
        f"/kafka/connectors/{name}/config",
        f"/kafka/connectors/{name}/tasks",
        "/allocated/connectors",
        "/allocated/tasks",
        "/connectors?expand=info",
    ):
        response = await http.get(path)
        assert response.status_code == 200, (path, response.text)
        bodies.append(response.text)
    assert all("hunter2" not in b for b in bodies) and all("********" in b for b in bodies[:2])
    assert (await http.delete(f"/connectors/{name}")).status_code == 204
