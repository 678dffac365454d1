"""The local stack's MQTT broker (Mosquitto): its user, its TLS listener, and a persistent session
that keeps more than Mosquitto's default queue limit across an outage and a broker restart.

The tests that take ``stack_config`` run against the real broker (the ``stack`` lane); the others
check the generated files and the settings alone (``make test-fast``).
"""

from __future__ import annotations

import dataclasses
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from cryptography import x509

from sluice.deploy.local import mosquitto, stack
from sluice.deploy.local.config import StackConfig
from sluice.worker.settings import Settings

#: Enough to pass Mosquitto's default limit of 1,000 queued messages per offline session.
QUEUED = 3_000


def _payload(i: int) -> bytes:
    """Binary, distinct per message, every byte value somewhere: 0x00, 0xff, invalid UTF-8."""
    return i.to_bytes(4, "big") + bytes((i + k) % 256 for k in range(64)) + b"\x00\xff\xfe\x80"


class Session:
    """One paho client on its own network thread: CONNACK, SUBACKs, PUBACKs and messages, waited for."""

    def __init__(self, client_id: str | None = None, *, clean_session: bool = True) -> None:
        self.client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=client_id or f"sluice-test-{uuid.uuid4().hex[:12]}",
            protocol=mqtt.MQTTv311,
            clean_session=clean_session,
        )
        self.client.max_inflight_messages_set(100)
        self.connack = threading.Event()
        self.reason: Any = None
        self.session_present: bool | None = None
        self.messages: list[tuple[str, bytes, int, bool]] = []
        self.received = threading.Condition()
        self.subacks: dict[int, list[Any]] = {}
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.on_subscribe = self._on_subscribe

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        self.reason, self.session_present = reason, flags.session_present
        self.connack.set()

    def _on_message(self, client: Any, userdata: Any, message: mqtt.MQTTMessage) -> None:
        with self.received:
            self.messages.append((message.topic, message.payload, message.qos, bool(message.dup)))
            self.received.notify_all()

    def _on_subscribe(
        self, client: Any, userdata: Any, mid: int, reasons: list[Any], properties: Any
    ) -> None:
        with self.received:
            self.subacks[mid] = reasons
            self.received.notify_all()

    def connect(
        self,
        cfg: StackConfig,
        *,
        user: str | None = None,
        password: str | None = None,
        host: str | None = None,
        **tls: Any,
    ) -> str:
        """Connect and wait for the CONNACK; its reason in words ("Success", "Not authorized").
        ``tls`` (paho's ``tls_set`` arguments) connects to the TLS listener."""
        if user is not None:
            self.client.username_pw_set(user, password)
        port = cfg.mqtt_port
        if tls:
            self.client.tls_set(**tls)
            port = cfg.mqtt_tls_port
        self.client.connect(host or cfg.host, port, keepalive=30)
        self.client.loop_start()
        assert self.connack.wait(10), "no CONNACK within 10 s"
        return str(self.reason)

    def subscribe(self, topic: str, qos: int = 1) -> None:
        result, mid = self.client.subscribe(topic, qos)
        assert result == mqtt.MQTT_ERR_SUCCESS
        with self.received:
            assert self.received.wait_for(lambda: mid in self.subacks, timeout=10), "no SUBACK"
        assert [r.value for r in self.subacks[mid]] == [qos]

    def wait_for_messages(self, count: int, timeout_s: float) -> list[tuple[str, bytes, int, bool]]:
        with self.received:
            self.received.wait_for(lambda: len(self.messages) >= count, timeout=timeout_s)
            return list(self.messages)

    def close(self) -> None:
        self.client.disconnect()  # also ends the network thread's reconnect attempts of a refused client
        self.client.loop_stop()


@pytest.fixture
def sessions() -> Iterator[list[Session]]:
    """Every session a test opens, closed when it ends (failed or not)."""
    opened: list[Session] = []
    yield opened
    for session in opened:
        session.close()


def _open(sessions: list[Session], cfg: StackConfig, client_id: str | None = None, **kwargs: Any) -> Session:
    clean = kwargs.pop("clean_session", True)
    session = Session(client_id, clean_session=clean)
    sessions.append(session)
    reason = session.connect(cfg, user=cfg.mqtt_user, password=cfg.mqtt_password, **kwargs)
    assert reason == "Success", reason
    return session


def _publish_all(session: Session, topic: str, payloads: list[bytes]) -> None:
    infos = [session.client.publish(topic, p, qos=1) for p in payloads]
    deadline = time.monotonic() + 60
    for info in infos:
        info.wait_for_publish(timeout=max(0.1, deadline - time.monotonic()))
        assert info.is_published(), f"no PUBACK for message {info.mid}"


def test_the_stacks_user_round_trips_a_binary_qos1_message(
    stack_config: StackConfig, sessions: list[Session]
) -> None:
    topic = f"sluice/test/{uuid.uuid4().hex}/round-trip"
    subscriber = _open(sessions, stack_config)
    subscriber.subscribe(topic, qos=1)
    publisher = _open(sessions, stack_config)
    body = bytes(range(256)) * 40 + "é😀".encode() + b"\x00"
    _publish_all(publisher, topic, [body])
    got = subscriber.wait_for_messages(1, timeout_s=10)
    assert got == [(topic, body, 1, False)]


def test_a_wrong_password_and_anonymous_clients_are_refused(
    stack_config: StackConfig, sessions: list[Session]
) -> None:
    wrong = Session()
    sessions.append(wrong)
    assert (
        wrong.connect(stack_config, user=stack_config.mqtt_user, password="not-the-password")
        == "Not authorized"
    )
    anonymous = Session()
    sessions.append(anonymous)
    assert anonymous.connect(stack_config) == "Not authorized"
    unknown = Session()
    sessions.append(unknown)
    assert (
        unknown.connect(stack_config, user="nobody", password=stack_config.mqtt_password) == "Not authorized"
    )
    # The stack's own check says the same.
    assert mosquitto.connack(stack_config, password="not-the-password") == "Not authorized"
    assert mosquitto.connack(stack_config, anonymous=True) == "Not authorized"
    assert mosquitto.connack(stack_config) == "Success"


def test_tls_with_the_stacks_ca_connects_and_without_it_is_refused(
    stack_config: StackConfig, sessions: list[Session]
) -> None:
    ca = stack_config.mqtt_ca_file
    assert ca.is_file()
    session = _open(sessions, stack_config, ca_certs=str(ca), cert_reqs=ssl.CERT_REQUIRED)
    sock = session.client.socket()
    assert isinstance(sock, ssl.SSLSocket) and sock.version() in ("TLSv1.2", "TLSv1.3")
    assert sock.getpeername()[1] == stack_config.mqtt_tls_port
    topic = f"sluice/test/{uuid.uuid4().hex}/tls"
    session.subscribe(topic)
    _publish_all(session, topic, [b"\x00over tls\xff"])
    assert session.wait_for_messages(1, timeout_s=10) == [(topic, b"\x00over tls\xff", 1, False)]
    # The certificate names localhost too (hostname checked: paho's default).
    _open(sessions, stack_config, host="localhost", ca_certs=str(ca), cert_reqs=ssl.CERT_REQUIRED)

    # The system's CAs do not know the stack's: verification fails in the handshake.
    stranger = Session()
    sessions.append(stranger)
    stranger.client.username_pw_set(stack_config.mqtt_user, stack_config.mqtt_password)
    stranger.client.tls_set(cert_reqs=ssl.CERT_REQUIRED)
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        stranger.client.connect(stack_config.host, stack_config.mqtt_tls_port, keepalive=30)


@pytest.mark.fault
def test_a_persistent_session_keeps_3000_queued_messages_across_a_broker_restart(
    stack_config: StackConfig, sessions: list[Session]
) -> None:
    """More than Mosquitto's default per-session queue (1,000, beyond which it drops) queue while
    the subscriber is offline, the broker restarts, and the subscriber gets every one, in order."""
    topic = f"sluice/test/{uuid.uuid4().hex}/persistent"
    client_id = f"sluice-test-persistent-{uuid.uuid4().hex[:8]}"
    subscriber = _open(sessions, stack_config, client_id, clean_session=False)
    assert subscriber.session_present is False
    subscriber.subscribe(topic, qos=1)
    subscriber.close()  # offline; the session and its subscription stay on the broker

    payloads = [_payload(i) for i in range(QUEUED)]
    publisher = _open(sessions, stack_config)
    _publish_all(publisher, topic, payloads)  # every one acknowledged: the broker holds them
    publisher.close()

    stack.restart_service(stack_config, "mosquitto")  # SIGTERM: saved on shutdown, loaded at start

    back = _open(sessions, stack_config, client_id, clean_session=False)
    assert back.session_present is True
    got = back.wait_for_messages(QUEUED, timeout_s=60)
    assert len(got) == QUEUED, f"{len(got)} of {QUEUED} queued messages arrived"
    assert [m[1] for m in got] == payloads  # byte-exact, in order, none twice
    assert {(m[0], m[2]) for m in got} == {(topic, 1)}
    time.sleep(0.5)
    assert len(back.messages) == QUEUED  # nothing more (no redelivery)
    # Clean up the broker-side session: a clean connect with the same id discards it.
    back.close()
    _open(sessions, stack_config, client_id, clean_session=True).close()


def test_restart_service_knows_mqtt_as_mosquitto(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[str] = []

    class Fake:
        def stop(self) -> None:
            calls.append("stop")

        def start(self) -> None:
            calls.append("start")

    cfg = Settings(state_dir=tmp_path).stack
    monkeypatch.setattr(stack, "services", lambda cfg: {"mosquitto": Fake()})
    stack.restart_service(cfg, "mqtt")
    assert calls == ["stop", "start"]


def test_the_stack_lists_mosquitto_with_its_user_ports_and_ca(tmp_path: Path) -> None:
    cfg = Settings(state_dir=tmp_path, mqtt_port=21883, mqtt_tls_port=28883).stack
    assert "mosquitto" in stack.SERVICE_NAMES and list(stack.services(cfg)) == list(stack.SERVICE_NAMES)
    assert stack.SERVICE_NAMES.index("mosquitto") > stack.SERVICE_NAMES.index("postgres")
    ca = tmp_path / "mosquitto" / "tls" / "ca.crt"
    assert stack._address(cfg, "mosquitto") == (
        f"mqtt://sluice:***@127.0.0.1:21883 (TLS mqtts://127.0.0.1:28883, CA {ca})"
    )
    broker = stack.services(cfg)["mosquitto"]
    assert isinstance(broker, mosquitto.Mosquitto)
    assert broker.proc.name == "mosquitto" and broker.proc.log_file == tmp_path / "logs" / "mosquitto.log"


def test_stack_config_mqtt_defaults_urls_and_settings(tmp_path: Path) -> None:
    cfg = StackConfig(
        state_dir=tmp_path,
        pg_port=1,
        temporal_port=2,
        temporal_ui_port=3,
        namesrv_port=4,
        broker_port=5,
        proxy_port=6,
        spark_master="local[1]",
    )
    assert (cfg.mqtt_port, cfg.mqtt_tls_port, cfg.mqtt_user, cfg.mqtt_password) == (
        11883,
        18883,
        "sluice",
        "sluice",
    )
    assert cfg.mqtt_url() == "mqtt://sluice:sluice@127.0.0.1:11883"
    assert cfg.mqtt_url(hide_password=True) == "mqtt://sluice:***@127.0.0.1:11883"
    assert cfg.mqtt_url(tls=True) == "mqtts://sluice:sluice@127.0.0.1:18883"
    assert cfg.mqtt_ca_file == tmp_path / "mosquitto" / "tls" / "ca.crt"
    odd = dataclasses.replace(cfg, mqtt_user="a@b", mqtt_password="p:w/@")
    assert odd.mqtt_url() == "mqtt://a%40b:p%3Aw%2F%40@127.0.0.1:11883"
    s = Settings(state_dir=tmp_path)
    assert (s.stack.mqtt_port, s.stack.mqtt_tls_port) == (11883, 18883)


def test_the_ports_come_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SLUICE_MQTT_PORT", "21883")
    monkeypatch.setenv("SLUICE_MQTT_TLS_PORT", "28883")
    monkeypatch.setenv("SLUICE_STATE_DIR", str(tmp_path))
    cfg = Settings().stack
    assert (cfg.mqtt_port, cfg.mqtt_tls_port) == (21883, 28883)


def test_the_config_keeps_queued_messages_and_refuses_anonymous(tmp_path: Path) -> None:
    cfg = Settings(state_dir=tmp_path, mqtt_port=21883, mqtt_tls_port=28883).stack
    lines = mosquitto.config_text(cfg, as_root=True).splitlines()
    for line in (
        "per_listener_settings false",
        "allow_anonymous false",
        f"password_file {tmp_path / 'mosquitto' / 'passwd'}",
        "persistence true",
        f"persistence_location {tmp_path / 'mosquitto' / 'data'}/",
        "autosave_interval 1",
        "max_queued_messages 0",
        "max_queued_bytes 0",
        "max_inflight_messages 1000",
        "persistent_client_expiration 7d",
        "listener 21883 127.0.0.1",
        "listener 28883 127.0.0.1",
        f"cafile {cfg.mqtt_ca_file}",
        "user root",
    ):
        assert line in lines, line
    tls_listener = lines.index("listener 28883 127.0.0.1")
    assert lines.index(f"certfile {tmp_path / 'mosquitto/tls/server.crt'}") > tls_listener
    assert "user root" not in mosquitto.config_text(cfg, as_root=False).splitlines()


def test_the_tls_material_is_made_once_for_127_0_0_1_and_localhost(tmp_path: Path) -> None:
    cfg = Settings(state_dir=tmp_path).stack
    mosquitto.ensure_tls(cfg)
    files = mosquitto.tls_files(cfg)
    first = {name: path.read_bytes() for name, path in files.items()}
    assert oct(files["ca_key"].stat().st_mode & 0o777) == oct(0o600)
    assert oct(files["server_key"].stat().st_mode & 0o777) == oct(0o600)
    mosquitto.ensure_tls(cfg)
    assert {name: path.read_bytes() for name, path in files.items()} == first  # kept, not remade

    ca = x509.load_pem_x509_certificate(first["ca_cert"])
    server = x509.load_pem_x509_certificate(first["server_cert"])
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert server.issuer == ca.subject
    server.verify_directly_issued_by(ca)
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert files["ca_cert"] == cfg.mqtt_ca_file
