"""Where an MQTT connector connects and as whom: the broker URL, credentials, TLS, protocol version,
and RocketMQ Connect's key names for them.

Keys (Sluice's, with RocketMQ Connect's MQTT connector keys as aliases):

- ``mqtt.broker.url`` (``mqttBrokerUrl``): ``tcp://host:port`` or ``mqtt://`` for plain TCP,
  ``ssl://``, ``tls://`` or ``mqtts://`` for TLS (default ports 1883 and 8883);
- ``mqtt.username`` (``mqttAccessKey``) and ``mqtt.password`` (``mqttSecretKey``, a secret);
- ``mqtt.password.hmac``: RocketMQ Connect's rule for a cloud MQTT service, where the password sent
  is Base64(HmacSHA1(client id, key = the secret key)); off by default (a plain password);
- ``mqtt.tls.ca.file``, ``mqtt.tls.cert.file``, ``mqtt.tls.key.file``: the CA that signed the
  broker's certificate, and a client certificate for brokers that ask for one;
- ``mqtt.version``: ``5`` (default) or ``3.1.1``;
- ``mqtt.client.id``: the session's client id (default ``sluice-<connector>-<task>``): a persistent
  session is found again by it, so it must stay the same across restarts.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from sluice.connectors.config import ConfigField

PLAIN_SCHEMES: Final = ("tcp", "mqtt")
TLS_SCHEMES: Final = ("ssl", "tls", "mqtts")


def url_problem(value: Any) -> str | None:
    """Validator: a broker URL Sluice connects to."""
    try:
        parse_url(str(value))
    except ValueError as exc:
        return str(exc)
    return None


def parse_url(url: str) -> tuple[str, int, bool]:
    """``(host, port, tls)`` of a broker URL."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in PLAIN_SCHEMES + TLS_SCHEMES:
        raise ValueError(
            f"{url!r} is not an MQTT broker URL: expected tcp://host:port or ssl://host:port "
            f"(schemes {', '.join(PLAIN_SCHEMES + TLS_SCHEMES)})"
        )
    if not parts.hostname:
        raise ValueError(f"{url!r} names no host")
    tls = scheme in TLS_SCHEMES
    try:
        port = parts.port or (8883 if tls else 1883)
    except ValueError:
        raise ValueError(f"{url!r} has a port that is not a number") from None
    return parts.hostname, port, tls


BROKER_FIELDS: Final = (
    ConfigField("mqtt.broker.url", str, doc="tcp://host:port, or ssl://host:port for TLS",
                validator=url_problem, aliases=("mqttBrokerUrl",)),
    ConfigField("mqtt.username", str, "", doc="user name", aliases=("mqttAccessKey",)),
    ConfigField("mqtt.password", str, "", doc="password", secret=True, aliases=("mqttSecretKey",)),
    ConfigField("mqtt.password.hmac", bool, False, doc="send Base64(HmacSHA1(client id, mqtt.password)) "
                "as the password (RocketMQ Connect's rule for a cloud MQTT service)"),
    ConfigField("mqtt.tls.ca.file", str, "", doc="CA certificate file that signed the broker's"),
    ConfigField("mqtt.tls.cert.file", str, "", doc="client certificate file (brokers that ask for one)"),
    ConfigField("mqtt.tls.key.file", str, "", doc="client certificate's key file", secret=True),
    ConfigField("mqtt.version", str, "5", choices=("5", "3.1.1"), normalize=lambda v: str(v).strip()),
    ConfigField("mqtt.client.id", str, "", doc="session client id (default sluice-<connector>-<task>)"),
    ConfigField("mqtt.keepalive.s", int, 30, doc="keep-alive interval",
                validator=lambda v: None if 5 <= v <= 65535 else "must be between 5 and 65535"),
)  # fmt: skip


@dataclass(frozen=True)
class Broker:
    """How to reach one broker as one client; ``describe`` is how errors and status name it."""

    host: str
    port: int
    tls: bool
    username: str = ""
    password: str = field(default="", repr=False)
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = field(default="", repr=False)
    version5: bool = True
    client_id: str = ""
    keepalive_s: int = 30

    @property
    def describe(self) -> str:
        return f"MQTT broker {'ssl' if self.tls else 'tcp'}://{self.host}:{self.port}"


def broker_of(config: Mapping[str, Any], client_id: str) -> Broker:
    """The broker of a parsed config, connecting as ``client_id`` unless ``mqtt.client.id`` says."""
    host, port, tls = parse_url(str(config["mqtt.broker.url"]))
    client = str(config.get("mqtt.client.id") or "") or client_id
    password = str(config.get("mqtt.password") or "")
    if password and config.get("mqtt.password.hmac"):
        password = hmac_password(client, password)
    text = {
        k: str(config.get(f"mqtt.{k}") or "")
        for k in ("username", "tls.ca.file", "tls.cert.file", "tls.key.file")
    }
    return Broker(
        host, port, tls, username=text["username"], password=password, ca_file=text["tls.ca.file"],
        cert_file=text["tls.cert.file"], key_file=text["tls.key.file"],
        version5=str(config.get("mqtt.version", "5")) == "5", client_id=client,
        keepalive_s=int(config.get("mqtt.keepalive.s") or 30),
    )  # fmt: skip


def hmac_password(client_id: str, secret_key: str) -> str:
    """RocketMQ Connect's MQTT password: Base64(HmacSHA1(data = client id, key = secret key))."""
    digest = hmac.new(secret_key.encode(), client_id.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


def client_id_of(connector: str, task_id: int, role: str) -> str:
    """A stable client id: a persistent session is the broker's record of this id."""
    return f"sluice-{role}-{connector}-{task_id}"[:128]
