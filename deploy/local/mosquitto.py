"""A private Eclipse Mosquitto (the MQTT broker) in the state folder, from Debian's package.

No system service is assumed: ``mosquitto -c <state>/mosquitto/mosquitto.conf`` runs on
127.0.0.1 only, with a plain listener (``mqtt_port``) and a TLS one (``mqtt_tls_port``) whose
certificate the stack's own CA signed (``<state>/mosquitto/tls``, written once and kept, so a
client that trusts ``cfg.mqtt_ca_file`` keeps trusting it). Anonymous clients are refused; the one
user (``sluice``/``sluice`` by default, StackConfig) is a local development credential on a
loopback-only broker.

The settings keep what Sluice's MQTT connectors promise across outages (docs/mqtt.md, "The local
broker"): sessions and their queued messages are saved to disk every second and on a clean
shutdown, a persistent session's queue has no limit (Mosquitto's default drops what it holds beyond
1,000 messages), and an offline persistent session is kept 7 days.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Final

from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.process import ManagedProcess, StackError, apt_install, ensure_port_free, wait_until

SERVICE = "mosquitto"
BROKER: Final = Path("/usr/sbin/mosquitto")
PASSWD: Final = Path("/usr/bin/mosquitto_passwd")
#: How long the stack's CA and server certificate are valid; they are made once per state folder.
CERT_DAYS: Final = 3650


def ensure_installed() -> None:
    """Install Debian's ``mosquitto`` when missing (root only)."""
    if BROKER.exists() and PASSWD.exists():
        return
    apt_install(SERVICE, "mosquitto", "mosquitto")
    if not BROKER.exists() or not PASSWD.exists():
        raise StackError(f"mosquitto: apt-get installed mosquitto but {BROKER} or {PASSWD} is missing")


def base_dir(cfg: StackConfig) -> Path:
    return cfg.state_dir / "mosquitto"


def tls_files(cfg: StackConfig) -> dict[str, Path]:
    """The TLS material: the CA's certificate (``cfg.mqtt_ca_file``) and key, the server's."""
    tls = cfg.mqtt_ca_file.parent
    return {
        "ca_cert": cfg.mqtt_ca_file,
        "ca_key": tls / "ca.key",
        "server_cert": tls / "server.crt",
        "server_key": tls / "server.key",
    }


def config_text(cfg: StackConfig, *, as_root: bool) -> str:
    """mosquitto.conf of the local broker."""
    base = base_dir(cfg)
    tls = tls_files(cfg)
    lines = [
        "# Written by `sluice stack up` (deploy/local/mosquitto.py) on every start: edits are lost.",
        "per_listener_settings false",
        "allow_anonymous false",
        f"password_file {base / 'passwd'}",
        "",
        "# Sessions and queued messages on disk: saved every second and on a clean shutdown.",
        "persistence true",
        f"persistence_location {base / 'data'}/",
        "autosave_interval 1",
        "# No limit on what an offline persistent session queues (the default drops beyond 1,000).",
        "max_queued_messages 0",
        "max_queued_bytes 0",
        "# Unacknowledged QoS 1/2 messages in flight to one client (the default window is 20).",
        "max_inflight_messages 1000",
        "# An offline persistent session is kept this long (the default: forever).",
        "persistent_client_expiration 7d",
        "",
        # To the service's log (ManagedProcess sends stdout and stderr there); stderr, because
        # Mosquitto 2.0 does not flush stdout: its lines would reach the log only at exit.
        "log_dest stderr",
        "log_type error",
        "log_type warning",
        "log_type notice",
        "log_type information",
        "log_timestamp true",
        "log_timestamp_format %Y-%m-%dT%H:%M:%S",
        "connection_messages true",
    ]
    if as_root:
        # Otherwise Mosquitto drops to user `mosquitto`, which cannot write the state folder.
        lines.append("user root")
    lines += [
        "",
        f"listener {cfg.mqtt_port} {cfg.host}",
        "protocol mqtt",
        "",
        f"listener {cfg.mqtt_tls_port} {cfg.host}",
        "protocol mqtt",
        f"cafile {tls['ca_cert']}",
        f"certfile {tls['server_cert']}",
        f"keyfile {tls['server_key']}",
        "",
    ]
    return "\n".join(lines)


def _write_private(path: Path, data: bytes, mode: int) -> None:
    """Write aside, then rename into place: a reader never sees half a file."""
    draft = path.with_name(f".{path.name}.{os.getpid()}")
    draft.write_bytes(data)
    draft.chmod(mode)
    draft.replace(path)


def ensure_tls(cfg: StackConfig) -> None:
    """Make the stack's CA and the broker's certificate (127.0.0.1, localhost, the stack's host)
    unless all four files are there already: clients keep trusting the same CA."""
    files = tls_files(cfg)
    if all(p.exists() for p in files.values()):
        return
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    until = now + datetime.timedelta(days=CERT_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Sluice local MQTT CA")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    for host in dict.fromkeys(["127.0.0.1", cfg.host]):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cfg.host)]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=True,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(server_key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    files["ca_cert"].parent.mkdir(parents=True, exist_ok=True)
    _write_private(files["ca_key"], key_pem(ca_key), 0o600)
    _write_private(files["server_key"], key_pem(server_key), 0o600)
    _write_private(files["server_cert"], server_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    # The CA's certificate last: the check above sees all four only once each one is complete.
    _write_private(files["ca_cert"], ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)


def connack(
    cfg: StackConfig,
    *,
    user: str | None = None,
    password: str | None = None,
    anonymous: bool = False,
    timeout_s: float = 3.0,
) -> str | None:
    """Connect (MQTT 3.1.1, clean session) to the plain listener and return the CONNACK's reason
    in words ("Success", "Not authorized", …), or None when no CONNACK came (not listening, timed
    out). The stack's credentials unless others are given; ``anonymous`` sends none."""
    import paho.mqtt.client as mqtt  # here: the stack scripts import this module without it

    client = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2,
        client_id=f"sluice-check-{uuid.uuid4().hex[:12]}",
        protocol=mqtt.MQTTv311,
        clean_session=True,
    )
    if not anonymous:
        client.username_pw_set(user or cfg.mqtt_user, cfg.mqtt_password if password is None else password)
    answer: list[str] = []

    def on_connect(*args: object) -> None:
        answer.append(str(args[3]))  # (client, userdata, flags, reason_code, properties)

    client.on_connect = on_connect
    try:
        client.connect(cfg.host, cfg.mqtt_port, keepalive=10)
        deadline = time.monotonic() + timeout_s
        while not answer and time.monotonic() < deadline:
            if client.loop(timeout=0.1) not in (mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_AGAIN):
                break  # the broker closed the connection (after a refusing CONNACK, or none)
        if answer and answer[0] == "Success":
            client.disconnect()
    except OSError:
        pass
    finally:
        sock = client.socket()
        if sock is not None:
            sock.close()
    return answer[0] if answer else None


class Mosquitto:
    def __init__(self, cfg: StackConfig) -> None:
        self.cfg = cfg
        self.base = base_dir(cfg)
        self.conf = self.base / "mosquitto.conf"
        self.password_file = self.base / "passwd"
        self.data_dir = self.base / "data"
        self.proc = ManagedProcess(SERVICE, cfg.state_dir)

    def _write_files(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        ensure_tls(self.cfg)
        # Made again on every start, so a changed password in StackConfig takes effect.
        draft = self.password_file.with_name(f".passwd.{os.getpid()}")
        draft.unlink(missing_ok=True)
        result = subprocess.run(
            [str(PASSWD), "-b", "-c", str(draft), self.cfg.mqtt_user, self.cfg.mqtt_password],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if result.returncode != 0:
            draft.unlink(missing_ok=True)
            raise StackError(
                f"mosquitto: mosquitto_passwd failed: {(result.stderr or result.stdout).strip()}"
            )
        draft.chmod(0o600)
        draft.replace(self.password_file)
        _write_private(self.conf, config_text(self.cfg, as_root=os.geteuid() == 0).encode(), 0o644)

    def start(self) -> None:
        if self.healthy():
            return
        ensure_installed()
        ensure_port_free(SERVICE, self.cfg.host, self.cfg.mqtt_port, "SLUICE_MQTT_PORT")
        ensure_port_free(SERVICE, self.cfg.host, self.cfg.mqtt_tls_port, "SLUICE_MQTT_TLS_PORT")
        self._write_files()
        self.proc.start([str(BROKER), "-c", str(self.conf)])
        wait_until(self.healthy, service=SERVICE, proc=self.proc, timeout_s=30, interval_s=0.2)

    def healthy(self) -> bool:
        """Running, and a real MQTT connect with the stack's user gets CONNACK success."""
        return self.proc.is_running() and connack(self.cfg) == "Success"

    def stop(self) -> None:
        # SIGTERM is Mosquitto's clean shutdown: it writes its persistence file first.
        self.proc.stop(timeout_s=30)
