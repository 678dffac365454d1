"""MQTT ↔ RocketMQ on the local stack's Mosquitto (connectors.mqtt), with RocketMQ Connect's MQTT
connector configs: 20,000 QoS 1 messages from simulated devices reach RocketMQ byte-exact through a
worker SIGKILL and a Mosquitto restart in the middle, with duplicates only of what was in flight at
the crash; and RocketMQ messages are published to MQTT in order, each key's payloads as sent.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.connectors.rocketmq.values import OutgoingMessage
from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.stack import restart_service
from tests.runtime.helpers import FAST_HEARTBEAT, wait_for

DEVICES = 10
BATCH = 1000


def _client(cfg: StackConfig, client_id: str = "", *, persistent: bool = False) -> Any:
    import paho.mqtt.client as paho

    client = paho.Client(
        paho.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=not persistent,
        protocol=paho.MQTTv311,
    )  # fmt: skip
    client.username_pw_set(cfg.mqtt_user, cfg.mqtt_password)
    client.max_inflight_messages_set(1000)
    client.connect(cfg.host, cfg.mqtt_port)
    client.loop_start()
    deadline = time.monotonic() + 10
    while not client.is_connected() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.is_connected(), "the test's MQTT client could not connect"
    return client


def _payload(i: int) -> bytes:
    """Binary, not UTF-8 text: the device number, the sequence number and bytes 0..255."""
    return i.to_bytes(4, "big") + bytes(range(256))[i % 200 :] + os.urandom(8)


def _publish(client: Any, prefix: str, start: int, stop: int, sent: dict[bytes, str]) -> None:
    infos = []
    for i in range(start, stop):
        body, topic = _payload(i), f"{prefix}/{i % DEVICES}/data"
        sent[body] = topic
        infos.append(client.publish(topic, body, qos=1))
    for info in infos:
        info.wait_for_publish(60)
        assert info.is_published()


def _messages(admin: SyncRocketMQClient, topic: str) -> list[Any]:
    out = []
    for mq in admin.queues(topic):
        out += admin.pull_range(mq, 0, admin.max_offset(mq), max_per_request=512)
    return out


@pytest.fixture
def publisher(stack_config: StackConfig) -> Iterator[Any]:
    client = _client(stack_config)
    yield client
    client.loop_stop()
    client.disconnect()


@pytest.mark.fault
@pytest.mark.private_worker  # SIGKILLs its worker
@pytest.mark.timeout(600)
async def test_mqtt_source_loses_nothing_through_a_worker_kill_and_a_broker_restart(
    start_worker, sluice, stack_config: StackConfig, rocketmq_admin: SyncRocketMQClient, topic_name: str,
    publisher: Any,
) -> None:  # fmt: skip
    prefix = f"dev-{uuid.uuid4().hex[:8]}"
    name = f"mqtt-{uuid.uuid4().hex[:8]}"
    first = start_worker()
    await sluice.create(name, {
        "connector.class": "org.apache.rocketmq.connect.mqtt.connector.MqttSourceConnector",
        "mqttBrokerUrl": f"tcp://{stack_config.host}:{stack_config.mqtt_port}",
        "mqttAccessKey": stack_config.mqtt_user, "mqttSecretKey": stack_config.mqtt_password,
        "sourceTopic": f"{prefix}/+/data", "connect.topicname": topic_name,
        "value.converter": "bytes", "batch.max.records": str(BATCH), **FAST_HEARTBEAT,
    })  # fmt: skip
    sent: dict[bytes, str] = {}

    async def subscribed() -> bool:  # the session exists once a message published now arrives
        publisher.publish(f"{prefix}/probe/data", b"probe", qos=1).wait_for_publish(10)
        return any(m.body == b"probe" for m in _messages(rocketmq_admin, topic_name))

    await wait_for(subscribed, 120, "the task's subscription", interval_s=1)
    devices = ThreadPoolExecutor(1)
    publishing = devices.submit(_publish, publisher, prefix, 0, 12000, sent)
    await wait_for(lambda: len(_messages(rocketmq_admin, topic_name)) >= 2000, 120, "the first messages")
    first.kill()  # SIGKILL mid-stream: a batch sent and not committed, messages held and not acked
    start_worker()  # meanwhile the devices go on publishing, queued in the task's session
    publishing.result(120)
    await wait_for(lambda: len(_messages(rocketmq_admin, topic_name)) >= 8000, 180, "messages after the kill")
    restart_service(stack_config, "mosquitto")  # the broker restarts while the task catches up
    await wait_for(publisher.is_connected, 60, "the devices reconnected")
    _publish(publisher, prefix, 12000, 20000, sent)
    expected = set(sent)
    await wait_for(
        lambda: {m.body for m in _messages(rocketmq_admin, topic_name)} >= expected, 240, "every payload"
    )
    got = [m for m in _messages(rocketmq_admin, topic_name) if m.body != b"probe"]
    bodies = Counter(m.body for m in got)
    assert set(bodies) == expected  # every payload byte-exact, nothing else
    for m in got:
        assert m.keys == sent[m.body]  # the MQTT topic is the key, and a property
        assert m.properties["mqtt.topic"] == sent[m.body] and m.properties["mqtt.qos"] == "1"
    duplicates = sum(bodies.values()) - len(bodies)
    print(f"duplicates: {duplicates} of {len(bodies)}")
    # at least once: only what was in flight at the kill and at the broker's restart comes again,
    # at most a batch sent and not committed and one committed whose acknowledgements had not
    # reached the broker, per fault (docs/mqtt.md)
    assert duplicates <= 2 * 2 * BATCH
    status = await sluice.status(name)
    assert [t.state for t in status.tasks] == ["RUNNING"], status
    await sluice.delete(name)


@pytest.mark.timeout(300)
async def test_mqtt_sink_publishes_each_record_in_order_after_its_acknowledgement(
    start_worker, sluice, stack_config: StackConfig, rocketmq_admin: SyncRocketMQClient, topic_name: str
) -> None:
    prefix = f"out-{uuid.uuid4().hex[:8]}"
    received: list[tuple[str, bytes]] = []
    subscriber = _client(stack_config, f"sub-{prefix}", persistent=True)
    subscriber.on_message = lambda _c, _u, msg: received.append((msg.topic, bytes(msg.payload)))
    subscriber.subscribe(f"{prefix}/#", qos=1)
    mqs = rocketmq_admin.queues(topic_name)
    expected: dict[str, list[bytes]] = {}
    for q, mq in enumerate(mqs):
        batch = []
        for i in range(250):
            key = f"k{q}-{i % 5}"
            body = bytes([q, i % 256, 0xFF]) + f"v{i}".encode()
            batch.append(OutgoingMessage(body, keys=key))
            expected.setdefault(f"{prefix}/{key}", []).append(body)
        rocketmq_admin.send_batch(mq, batch)
    start_worker()
    name = f"mqtt-sink-{uuid.uuid4().hex[:8]}"
    await sluice.create(name, {
        "connector.class": "org.apache.rocketmq.connect.mqtt.connector.MqttSinkConnector",
        "mqttBrokerUrl": f"tcp://{stack_config.host}:{stack_config.mqtt_port}",
        "mqttAccessKey": stack_config.mqtt_user, "mqttSecretKey": stack_config.mqtt_password,
        "sinkTopic": prefix + "/${key}", "connect.topicnames": topic_name, "value.converter": "bytes",
        "key.converter": "string", **FAST_HEARTBEAT,
    })  # fmt: skip
    total = sum(len(v) for v in expected.values())
    await wait_for(lambda: len(received) >= total, 180, "every record published")
    got: dict[str, list[bytes]] = {}
    for topic, body in received:
        got.setdefault(topic, []).append(body)
    assert got == expected  # each key's payloads, byte-exact, in order, once
    await sluice.delete(name)
    subscriber.loop_stop()
    subscriber.disconnect()


def _v5_client(cfg: StackConfig) -> Any:
    import paho.mqtt.client as paho

    client = paho.Client(paho.CallbackAPIVersion.VERSION2, protocol=paho.MQTTv5)
    client.username_pw_set(cfg.mqtt_user, cfg.mqtt_password)
    client.connect(cfg.host, cfg.mqtt_port)
    client.loop_start()
    deadline = time.monotonic() + 10
    while not client.is_connected() and time.monotonic() < deadline:
        time.sleep(0.05)
    return client


@pytest.mark.timeout(300)
async def test_tasks_share_a_filter_and_mqtt5_properties_and_oversized_payloads_are_kept(
    start_worker, sluice, stack_config: StackConfig, rocketmq_admin: SyncRocketMQClient, topic_name: str
) -> None:
    """Two tasks share the filter ($share/<connector>/...): each message reaches RocketMQ through one
    of them; MQTT 5 user properties and content type become message properties; a payload over
    RocketMQ's 4 MiB goes to the dead-letter topic under errors.tolerance=all, the rest flows."""
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    prefix, dead = f"sh-{uuid.uuid4().hex[:8]}", f"DLQ_{uuid.uuid4().hex[:10]}"
    name = f"mqtt-{uuid.uuid4().hex[:8]}"
    start_worker()
    await sluice.create(name, {
        "connector.class": "mqtt-source", "mqtt.broker.url": f"tcp://{stack_config.host}:{stack_config.mqtt_port}",
        "mqtt.username": stack_config.mqtt_user, "mqtt.password": stack_config.mqtt_password,
        "mqtt.topics": f"{prefix}/#", "topic": topic_name, "tasks.max": "2", "value.converter": "bytes",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dead, **FAST_HEARTBEAT,
    })  # fmt: skip
    device = _v5_client(stack_config)

    async def subscribed() -> bool:  # both tasks' sessions exist once probes reach RocketMQ twice over
        device.publish(f"{prefix}/probe", b"probe", qos=1).wait_for_publish(10)
        parts = {m.properties.get("sluice.partition") for m in _messages(rocketmq_admin, topic_name)}
        return len(parts) == 2

    await wait_for(subscribed, 120, "both tasks' shared subscriptions", interval_s=0.5)
    props = Properties(PacketTypes.PUBLISH)
    props.UserProperty = [("site", "north"), ("unit", "°C")]
    props.ContentType = "application/octet-stream"
    sent = {}
    for i in range(2000):
        body = i.to_bytes(4, "big") + b"\xff\x00"
        sent[body] = f"{prefix}/{i % 3}"
        device.publish(sent[body], body, qos=1, properties=props)
    big = b"\x01" * (5 * 1024 * 1024)
    device.publish(f"{prefix}/big", big, qos=1).wait_for_publish(30)

    def arrived() -> bool:
        return {m.body for m in _messages(rocketmq_admin, topic_name)} >= set(sent)

    await wait_for(arrived, 180, "every message through one task or the other")
    got = [m for m in _messages(rocketmq_admin, topic_name) if m.body in sent]
    assert sorted(m.body for m in got) == sorted(sent)  # each once, byte-exact
    assert {m.properties["sluice.partition"].split(":")[0] for m in got} == {"task0", "task1"}
    assert all(m.properties["site"] == "north" and m.properties["unit"] == "°C" for m in got)
    assert all(m.properties["mqtt.content.type"] == "application/octet-stream" for m in got)
    await wait_for(
        lambda: rocketmq_admin.topic_exists(dead) and _messages(rocketmq_admin, dead), 60, "the dead letter"
    )
    (letter,) = _messages(rocketmq_admin, dead)
    assert (
        letter.properties["sluice.original.size"] == str(len(big)) and letter.body == big[: len(letter.body)]
    )
    assert "maximum message size" in letter.properties["sluice.error"]
    status = await sluice.status(name)
    assert [t.state for t in status.tasks] == ["RUNNING", "RUNNING"], status
    shared = f"subscribed to $share/{name}/{prefix}/# (QoS 1)"  # the session, shown per task
    assert all(shared in t.detail for t in status.tasks), [t.detail for t in status.tasks]
    device.loop_stop()
    device.disconnect()
    await sluice.delete(name)
