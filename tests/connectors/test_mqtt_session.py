"""The MQTT connection a task holds, against the local stack's Mosquitto: refused credentials and a
failed TLS handshake name the broker and the reason; a broker that is not there is waited for and
said so; TLS with the stack's CA connects; and a source task whose broker is down plans nothing and
says what it waits for."""

from __future__ import annotations

import socket
import time

import pytest

from sluice.connectors.mqtt.broker import broker_of
from sluice.connectors.mqtt.session import MqttConnection, MqttRefusedError
from sluice.connectors.mqtt.source import MqttSourceConnector
from sluice.deploy.local.config import StackConfig


def _connection(url: str, user: str, password: str, ca: str = "") -> MqttConnection:
    config = {
        "mqtt.broker.url": url,
        "mqtt.username": user,
        "mqtt.password": password,
        "mqtt.tls.ca.file": ca,
    }
    return MqttConnection(broker_of(config, "sluice-test-session"), persistent=False)


def _refusal(connection: MqttConnection) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            connection.check()
        except MqttRefusedError as exc:
            return str(exc)
        time.sleep(0.05)
    return ""


def test_wrong_credentials_are_refused_naming_the_broker_and_the_reason(stack_config: StackConfig) -> None:
    url = f"tcp://{stack_config.host}:{stack_config.mqtt_port}"
    connection = _connection(url, stack_config.mqtt_user, "not-the-password")
    connection.start()
    try:
        refused = _refusal(connection)
    finally:
        connection.close()
    assert f"MQTT broker {url} refused client 'sluice-test-session'" in refused, refused
    assert "authorized" in refused.lower() or "password" in refused.lower(), refused
    assert "not-the-password" not in refused


def test_tls_needs_the_brokers_ca(stack_config: StackConfig) -> None:
    url = f"ssl://{stack_config.host}:{stack_config.mqtt_tls_port}"
    without = _connection(url, stack_config.mqtt_user, stack_config.mqtt_password)
    with pytest.raises(MqttRefusedError, match=f"MQTT broker {url}: TLS failed: CERTIFICATE_VERIFY_FAILED"):
        without.start()
    trusted = _connection(
        url, stack_config.mqtt_user, stack_config.mqtt_password, str(stack_config.mqtt_ca_file)
    )
    trusted.start()
    try:
        assert trusted.wait_connected(10)
        assert trusted.waiting_for() == f"MQTT broker {url}: new session"
    finally:
        trusted.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_source_whose_broker_is_down_waits_and_says_so(stack_config: StackConfig) -> None:
    url = f"tcp://127.0.0.1:{_free_port()}"
    connector = MqttSourceConnector()
    config = connector.parse({
        "connector.class": "mqtt-source", "name": "iot", "mqtt.broker.url": url, "mqtt.topics": "a/#",
        "topic": "T",
    })  # fmt: skip
    task = MqttSourceConnector.task_class(config, 0)
    try:
        (partition,) = task.partitions()
        assert task.latest_positions({}) == task.earliest_positions()  # nothing to plan
        assert task.waiting_for() == f"MQTT broker {url} unreachable (Connection refused); retrying"
    finally:
        task.close()
    assert partition == "task0:a/#"


@pytest.mark.parametrize("version", ["3.1.1", "5"])
def test_what_a_task_did_not_see_committed_comes_again_and_what_it_did_never(
    version: str, stack_config: StackConfig
) -> None:
    """The persistent session over both protocol versions: messages read but never committed are
    delivered again to the next task with the same client id; committed ones are acknowledged and
    are not."""
    import uuid

    import paho.mqtt.client as paho

    from sluice.connectors.model import BatchPlan, PartitionRange
    from sluice.connectors.positions import Position

    prefix = f"sess-{uuid.uuid4().hex[:8]}"
    config = MqttSourceConnector().parse({
        "connector.class": "mqtt-source", "name": f"s-{prefix}", "mqtt.version": version,
        "mqtt.broker.url": f"tcp://{stack_config.host}:{stack_config.mqtt_port}",
        "mqtt.username": stack_config.mqtt_user, "mqtt.password": stack_config.mqtt_password,
        "mqtt.topics": f"{prefix}/#", "topic": "T", "mqtt.replay.wait.ms": "3000",
    })  # fmt: skip
    publisher = paho.Client(paho.CallbackAPIVersion.VERSION2)
    publisher.username_pw_set(stack_config.mqtt_user, stack_config.mqtt_password)
    publisher.connect(stack_config.host, stack_config.mqtt_port)
    publisher.loop_start()

    def positions(task: object, want: int, committed: int = 0) -> int:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            ends = task.latest_positions({partition: Position((committed,))})  # type: ignore[attr-defined]
            (end,) = ends.values()
            if end.offset >= want:
                return int(end.offset)
            time.sleep(0.05)
        raise AssertionError(f"the task received fewer than {want} messages")

    task = MqttSourceConnector.task_class(config, 0)
    partition = f"task0:{prefix}/#"
    positions(task, 0)
    deadline = time.monotonic() + 10
    while "subscribed to" not in task.waiting_for() and time.monotonic() < deadline:
        time.sleep(0.05)  # connected and subscribing: the session exists from here on
    time.sleep(0.2)  # the SUBACK
    for i in range(4):
        publisher.publish(f"{prefix}/d", f"m{i}".encode(), qos=1).wait_for_publish(5)
    positions(task, 4)
    read = task.read([PartitionRange(partition, Position((0,)), Position((4,)))]).to_table()
    assert read.column("value").to_pylist() == [b"m0", b"m1", b"m2", b"m3"]
    task.committed(BatchPlan("c", 0, 1, (PartitionRange(partition, Position((0,)), Position((2,))),)))
    time.sleep(0.5)  # the acknowledgements reach the broker
    task.close()  # m2 and m3 were read, never committed

    again = MqttSourceConnector.task_class(config, 0)
    try:
        positions(again, 4, committed=2)  # numbered on from the committed position
        read = again.read([PartitionRange(partition, Position((2,)), Position((4,)))]).to_table()
        assert read.column("value").to_pylist() == [b"m2", b"m3"]  # only what was not committed
    finally:
        again.close()
        publisher.loop_stop()
        publisher.disconnect()
