"""The local stack: real services that answer real requests, restart with their state, fail clearly."""

from __future__ import annotations

import dataclasses
import random
import re
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import create_engine, text
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

from sluice.deploy.local import stack
from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.process import StackError
from sluice.deploy.local.rocketmq import create_topic, mqadmin


@activity.defn
async def shout(word: str) -> str:
    return word.upper() + "!"


@workflow.defn
class ShoutWorkflow:
    @workflow.run
    async def run(self, word: str) -> str:
        return await workflow.execute_activity(shout, word, start_to_close_timeout=timedelta(seconds=30))


def test_postgres_answers_sql(stack_config: StackConfig) -> None:
    engine = create_engine(stack_config.database_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT current_user, current_database()")).one() == ("sluice", "sluice")
        assert conn.execute(text("SELECT inet_server_addr()::text")).scalar_one().startswith("127.0.0.1")
    engine.dispose()


async def test_temporal_workflow_round_trip_with_a_real_worker(stack_config: StackConfig) -> None:
    client = await Client.connect(stack_config.temporal_address, namespace=stack_config.temporal_namespace)
    queue = f"stack-test-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[ShoutWorkflow], activities=[shout]):
        result = await client.execute_workflow(
            ShoutWorkflow.run, "sluice", id=f"shout-{uuid.uuid4()}", task_queue=queue
        )
    assert result == "SLUICE!"


def test_temporal_has_the_runtime_search_attributes(stack_config: StackConfig) -> None:
    from sluice.deploy.local.temporal import SEARCH_ATTRIBUTES, Temporal

    assert Temporal(stack_config).missing_search_attributes() == []
    assert {"ConnectorName", "ConnectorClass", "ConnectorState"} <= set(SEARCH_ATTRIBUTES)


def test_rocketmq_send_and_consume_with_the_official_tools(
    stack_config: StackConfig, topic_name: str
) -> None:
    body = f"hello-{uuid.uuid4().hex}"
    sent = mqadmin(stack_config, "sendMessage", "-t", topic_name, "-p", body, "-k", "key1", "-c", "tagA")
    assert sent.returncode == 0 and "SEND_OK" in sent.stdout, sent.stdout + sent.stderr
    match = re.search(r"broker-a\s+(\d+)\s+SEND_OK", sent.stdout)
    assert match, sent.stdout
    consumed = mqadmin(
        stack_config,
        "consumeMessage",
        "-t",
        topic_name,
        "-b",
        "broker-a",
        "-i",
        match.group(1),
        "-o",
        "0",
        "-c",
        "1",
    )
    assert consumed.returncode == 0, consumed.stderr
    assert body in consumed.stdout


def test_status_json_reports_every_service_healthy(stack_config: StackConfig) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "sluice.worker.cli", "stack", "status", "--output", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    import json

    report = json.loads(out.stdout)
    assert report["healthy"] is True
    assert {s["name"] for s in report["services"]} >= {
        "postgres",
        "mariadb",
        "temporal",
        "rocketmq-namesrv",
        "rocketmq-broker",
        "rocketmq-replica-namesrv",
        "rocketmq-replica-broker",
        "opensearch",
        "mosquitto",
    }
    assert "local" in next(s for s in report["services"] if s["name"] == "spark")["address"]


#: Where the private stack's ports go, relative to a base port. Services bind ports derived from
#: their own (Temporal +10 and +11, the broker -2 and +1, the proxy +1, OpenSearch +100), so the
#: layout leaves those free too, and every one is checked before the stack starts.
_PORT_OFFSETS = {
    "pg_port": 0,
    "temporal_ui_port": 1,
    "namesrv_port": 2,
    "broker_port": 5,
    "proxy_port": 7,
    "mariadb_port": 9,
    "opensearch_port": 10,
    "temporal_port": 20,
    "replica_namesrv_port": 11,
    "replica_broker_port": 14,
    "replica_proxy_port": 16,
    "mqtt_port": 18,
    "mqtt_tls_port": 19,
}
_DERIVED_OFFSETS = (3, 6, 8, 12, 15, 17, 30, 31, 110)


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _private_ports() -> dict[str, int]:
    """Ports for a second stack, below the kernel's ephemeral range (32768-60999 here).

    Ports the kernel hands out (what binding port 0 returns) are the local ports of outgoing
    connections too: a service's derived port next to one may be taken by a client connection a
    moment later, and the broker then dies binding it.
    """
    offsets = [*_PORT_OFFSETS.values(), *_DERIVED_OFFSETS]
    for _ in range(200):
        base = random.randrange(20000, 32000 - max(offsets))
        if all(_bindable(base + offset) for offset in offsets):
            return {name: base + offset for name, offset in _PORT_OFFSETS.items()}
    raise RuntimeError("no free block of ports for a private stack between 20000 and 32000")


@pytest.fixture
def private_stack(stack_config: StackConfig) -> Iterator[StackConfig]:
    """A second, empty stack on other ports and its own state folder; jars copied from the main one.

    The folder is under the main state folder (not pytest's tmp_path, which the `postgres` user
    running the server cannot enter when tests run as root).
    """
    import shutil

    from sluice.deploy.local import opensearch
    from sluice.deploy.local.rocketmq import lib_dir

    state = stack_config.state_dir / "test-stacks" / uuid.uuid4().hex[:8]
    cfg = dataclasses.replace(
        stack_config,
        state_dir=state,
        **_private_ports(),
    )
    shutil.copytree(lib_dir(stack_config), lib_dir(cfg))
    shutil.copytree(opensearch.home(stack_config) / "lib", opensearch.lib_dir(cfg))
    shutil.copytree(opensearch.module_dir(stack_config), opensearch.module_dir(cfg))
    yield cfg
    stack.down(cfg)
    shutil.rmtree(state, ignore_errors=True)


@pytest.mark.slow
def test_stack_from_nothing_then_down_and_up_keeps_state(private_stack: StackConfig) -> None:
    cfg = private_stack
    assert not any(s.healthy for s in stack.status(cfg) if s.name != "spark")
    assert all(s.healthy for s in stack.up(cfg))
    engine = create_engine(cfg.database_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE survivor (v text)"))
        conn.execute(text("INSERT INTO survivor VALUES ('still here')"))
    engine.dispose()
    maria = create_engine(cfg.mariadb_url())
    with maria.begin() as conn:
        conn.execute(text("CREATE TABLE survivor (v varchar(20))"))
        conn.execute(text("INSERT INTO survivor VALUES ('still here 😀')"))
    maria.dispose()
    create_topic(cfg, "SurvivorTopic", queues=2)
    _mqtt_retained(cfg, "survivor", b"still here \x00\xff")

    stack.down(cfg)
    assert not any(s.healthy for s in stack.status(cfg) if s.name != "spark")

    assert all(s.healthy for s in stack.up(cfg))
    engine = create_engine(cfg.database_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT v FROM survivor")).scalar_one() == "still here"
    engine.dispose()
    maria = create_engine(cfg.mariadb_url())
    with maria.connect() as conn:
        assert conn.execute(text("SELECT v FROM survivor")).scalar_one() == "still here 😀"
    maria.dispose()
    listed = mqadmin(cfg, "topicList")
    assert "SurvivorTopic" in listed.stdout
    assert _mqtt_retained(cfg, "survivor") == b"still here \x00\xff"  # Mosquitto's persistence file


def _mqtt_retained(cfg: StackConfig, topic: str, payload: bytes | None = None) -> bytes | None:
    """Publish ``payload`` retained on ``topic`` (QoS 1, acknowledged), or read what is retained there."""
    import paho.mqtt.client as mqtt
    import paho.mqtt.subscribe

    auth = {"username": cfg.mqtt_user, "password": cfg.mqtt_password}
    if payload is not None:
        client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
        client.username_pw_set(cfg.mqtt_user, cfg.mqtt_password)
        client.connect(cfg.host, cfg.mqtt_port)
        client.loop_start()
        client.publish(topic, payload, qos=1, retain=True).wait_for_publish(timeout=10)
        client.disconnect()
        client.loop_stop()
        return None
    message = paho.mqtt.subscribe.simple(topic, qos=1, hostname=cfg.host, port=cfg.mqtt_port, auth=auth)
    return message.payload if isinstance(message, mqtt.MQTTMessage) else None


def test_port_taken_fails_clearly_and_leaves_nothing_half_started(stack_config: StackConfig) -> None:
    cfg = dataclasses.replace(
        stack_config,
        state_dir=stack_config.state_dir / "test-stacks" / uuid.uuid4().hex[:8],
        **{**_private_ports(), "temporal_port": stack_config.temporal_port},  # taken by the running stack
    )
    with pytest.raises(
        StackError, match=r"temporal: port 127\.0\.0\.1:\d+ is already taken.*SLUICE_TEMPORAL_PORT"
    ):
        stack.up(cfg)
    # the services started beside temporal (its wave) were stopped again when it failed.
    assert not any(s.healthy for s in stack.status(cfg) if s.name in ("postgres", "mariadb", "temporal"))
    import shutil

    shutil.rmtree(cfg.state_dir, ignore_errors=True)


def test_opensearch_answers_http(stack_config: StackConfig) -> None:
    import json
    import urllib.request

    with urllib.request.urlopen(stack_config.opensearch_url, timeout=10) as response:
        about = json.load(response)
    assert about["version"]["number"] == "2.19.6" and about["version"]["distribution"] == "opensearch"
    listed = {s.name: s for s in stack.status(stack_config)}
    assert listed["opensearch"].healthy and listed["opensearch"].address == stack_config.opensearch_url
    assert listed["opensearch"].log.endswith("opensearch.log")


def test_opensearch_port_taken_fails_naming_the_service(stack_config: StackConfig) -> None:
    from sluice.deploy.local.opensearch import OpenSearch

    cfg = dataclasses.replace(
        stack_config,
        state_dir=stack_config.state_dir / "test-stacks" / uuid.uuid4().hex[:8],
        opensearch_port=stack_config.pg_port,  # taken by the running stack
    )
    with pytest.raises(
        StackError, match=r"opensearch: port 127\.0\.0\.1:\d+ is already taken.*SLUICE_OPENSEARCH_PORT"
    ):
        OpenSearch(cfg).start()


def test_the_start_waves_hold_every_service_once_each_after_what_it_needs() -> None:
    waves = [name for wave in stack.WAVES for name in wave]
    assert sorted(waves) == sorted(stack.SERVICE_NAMES) and len(waves) == len(set(waves))
    position = {name: i for i, wave in enumerate(stack.WAVES) for name in wave}
    # a broker registers with its name server, so it starts in a later wave
    assert position["rocketmq-broker"] > position["rocketmq-namesrv"]
    assert position["rocketmq-replica-broker"] > position["rocketmq-replica-namesrv"]
