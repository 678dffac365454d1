"""One MQTT client connection for a task (paho-mqtt), with the state a task reports.

Why a wrapper: paho reconnects by itself in its network thread, but a task must tell three cases
apart. A broker that is down (refused TCP connection, lost connection) is waited for, and status
says so (``waiting_for``); a broker that refuses the client (CONNACK: bad user name or password, not
authorized) or a TLS handshake that fails will not get better by waiting, so the next call to
``check`` raises :class:`MqttRefusedError` naming the broker and the reason (a PermissionError: the
runtime retries it a few times, for an operator fixing it, then fails the task).

Sessions: ``persistent`` connects with clean session off (MQTT 3.1.1) or clean start off with a
session expiry (MQTT 5), so the broker keeps the subscriptions and queues what arrives while the task
is away, and hands back what was delivered but never acknowledged when the task comes back. A
connection that finds no session (the first, or one that expired) calls ``on_new_session``.
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sluice.connectors.mqtt.broker import Broker

if TYPE_CHECKING:
    import paho.mqtt.client as paho

log = logging.getLogger(__name__)

#: MQTT 5's largest Receive Maximum: how many QoS 1/2 messages the broker may have unacknowledged
#: with us. A source acknowledges only after its batch committed, so this bounds a batch.
RECEIVE_MAXIMUM = 65535


class MqttRefusedError(PermissionError):
    """The broker refused the client (credentials, authorization) or TLS failed: names both."""


class MqttConnection:
    """A started paho client; see the module docstring."""

    def __init__(
        self,
        broker: Broker,
        *,
        persistent: bool,
        session_expiry_s: int = 0,
        subscriptions: Sequence[tuple[str, int]] = (),
        on_message: Callable[[paho.MQTTMessage], None] | None = None,
        on_new_session: Callable[[], None] | None = None,
        manual_ack: bool = False,
    ) -> None:
        import paho.mqtt.client as paho

        self.broker = broker
        self._subscriptions = list(subscriptions)
        self._lock = threading.Lock()
        self._connected = threading.Event()
        self._problem = f"connecting to {broker.describe}"
        self._refused = ""
        self.session_present = False
        self._on_new_session = on_new_session
        version = paho.MQTTv5 if broker.version5 else paho.MQTTv311
        self.client = paho.Client(
            paho.CallbackAPIVersion.VERSION2,
            client_id=broker.client_id,
            clean_session=None if broker.version5 else not persistent,
            protocol=version,
            manual_ack=manual_ack,
        )
        if broker.username:
            self.client.username_pw_set(broker.username, broker.password or None)
        if broker.tls:
            self.client.tls_set(
                ca_certs=broker.ca_file or None,
                certfile=broker.cert_file or None,
                keyfile=broker.key_file or None,
            )
        self.client.reconnect_delay_set(min_delay=1, max_delay=10)
        self.client.max_inflight_messages_set(RECEIVE_MAXIMUM)
        self.client.max_queued_messages_set(0)
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        if on_message is not None:
            self.client.on_message = lambda _c, _u, msg: on_message(msg)
        self._connect_args = self._connect_kwargs(persistent, session_expiry_s)

    def _connect_kwargs(self, persistent: bool, session_expiry_s: int) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"keepalive": self.broker.keepalive_s}
        if self.broker.version5:
            from paho.mqtt.packettypes import PacketTypes
            from paho.mqtt.properties import Properties

            props = Properties(PacketTypes.CONNECT)
            props.ReceiveMaximum = RECEIVE_MAXIMUM
            if persistent:
                props.SessionExpiryInterval = session_expiry_s
            kwargs.update(clean_start=not persistent, properties=props)
        return kwargs

    def start(self) -> None:
        """Connect (a broker that is down is waited for in the background) and start the network
        thread. TLS failures raise at once."""
        b = self.broker
        try:
            self.client.connect(b.host, b.port, **self._connect_args)
        except ssl.SSLError as exc:
            raise MqttRefusedError(f"{b.describe}: TLS failed: {exc.reason or exc}") from None
        except OSError as exc:
            self._problem = f"{b.describe} unreachable ({exc.strerror or exc}); retrying"
            log.warning("mqtt: %s", self._problem)
            self.client.connect_async(b.host, b.port, **self._connect_args)
        self.client.loop_start()

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        if reason.is_failure:
            with self._lock:
                self._refused = f"{self.broker.describe} refused client {self.broker.client_id!r}: {reason}"
            log.error("mqtt: %s", self._refused)
            return
        self.session_present = bool(getattr(flags, "session_present", False))
        if not self.session_present and self._on_new_session is not None:
            self._on_new_session()
        if self._subscriptions:
            client.subscribe(self._subscriptions)
        with self._lock:
            self._refused, self._problem = "", ""
        self._connected.set()
        log.info(
            "mqtt: connected to %s as %r (session %s); subscribed to %s",
            self.broker.describe, self.broker.client_id,
            "resumed" if self.session_present else "new", [f for f, _ in self._subscriptions],
        )  # fmt: skip

    def _on_disconnect(self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        self._connected.clear()
        with self._lock:
            self._problem = f"{self.broker.describe}: connection lost ({reason}); reconnecting"

    def check(self) -> None:
        """Raise MqttRefusedError when the broker refused the client."""
        with self._lock:
            refused = self._refused
        if refused:
            raise MqttRefusedError(refused)

    def waiting_for(self) -> str:
        """What the connection waits for, or its session and subscriptions once connected."""
        if self._connected.is_set():
            subscribed = ", ".join(f"{f} (QoS {q})" for f, q in self._subscriptions)
            session = "session resumed" if self.session_present else "new session"
            return f"{self.broker.describe}: {session}" + (
                f", subscribed to {subscribed}" if subscribed else ""
            )
        with self._lock:
            return self._refused or self._problem

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    def wait_connected(self, timeout_s: float) -> bool:
        return self._connected.wait(timeout_s)

    def close(self) -> None:
        """Disconnect cleanly: what was not acknowledged stays in the broker's session."""
        try:
            self.client.disconnect()
        finally:
            self.client.loop_stop()
