"""Where every service of the local stack listens and keeps its state.

A plain frozen value built from the process's settings (``sluice.worker.settings.settings().stack``), so
the stack scripts, the runtime and the tests agree on ports without passing them around or reading
the environment themselves. Everything binds to 127.0.0.1 only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

# Not Path.resolve(): Temporal's workflow sandbox forbids it, and test workflows import this module.
REPO_ROOT = Path(os.path.abspath(__file__)).parents[2]


@dataclass(frozen=True)
class StackConfig:
    """Addresses and state folder of the local stack (docs/configuration.md, 'Configuration reference')."""

    state_dir: Path
    pg_port: int
    temporal_port: int
    temporal_ui_port: int
    namesrv_port: int
    broker_port: int
    proxy_port: int
    spark_master: str
    mariadb_port: int = 13306
    #: The second RocketMQ cluster (a replicator's target): its name server, broker and proxy.
    replica_namesrv_port: int = 29876
    replica_broker_port: int = 20911
    replica_proxy_port: int = 28081
    #: OpenSearch's HTTP port; its transport port (node to node, unused by clients) is this + 100.
    opensearch_port: int = 19200
    #: Mosquitto (the MQTT broker): plain MQTT, and MQTT over TLS (the stack's own CA: mqtt_ca_file).
    mqtt_port: int = 11883
    mqtt_tls_port: int = 18883
    host: str = "127.0.0.1"
    pg_user: str = "sluice"
    pg_database: str = "sluice"
    temporal_namespace: str = "default"
    #: The local MariaDB's all-privileges user (replication included). A fixed, documented local
    #: development credential: MariaDB listens on 127.0.0.1 only.
    mariadb_user: str = "sluice"
    mariadb_password: str = "sluice"
    mariadb_database: str = "sluice"
    #: The local Mosquitto's one user (anonymous clients are refused). A fixed, documented local
    #: development credential like MariaDB's: the broker listens on 127.0.0.1 only.
    mqtt_user: str = "sluice"
    mqtt_password: str = "sluice"

    @property
    def database_url(self) -> str:
        """SQLAlchemy URL of the offset store (psycopg 3 driver)."""
        return f"postgresql+psycopg://{self.pg_user}@{self.host}:{self.pg_port}/{self.pg_database}"

    def mariadb_url(self, database: str | None = None, *, hide_password: bool = False) -> str:
        """SQLAlchemy URL of the local MariaDB (PyMySQL driver), for ``database`` or the default one."""
        password = "***" if hide_password else self.mariadb_password
        return (
            f"mysql+pymysql://{self.mariadb_user}:{password}@{self.host}:{self.mariadb_port}/"
            f"{database or self.mariadb_database}"
        )

    def mqtt_url(self, *, hide_password: bool = False, tls: bool = False) -> str:
        """URL of the local MQTT broker with the stack's user: ``mqtt://`` on ``mqtt_port``, or
        ``mqtts://`` on ``mqtt_tls_port`` (verify it with ``mqtt_ca_file``)."""
        password = "***" if hide_password else quote(self.mqtt_password, safe="")
        scheme, port = ("mqtts", self.mqtt_tls_port) if tls else ("mqtt", self.mqtt_port)
        return f"{scheme}://{quote(self.mqtt_user, safe='')}:{password}@{self.host}:{port}"

    @property
    def mqtt_ca_file(self) -> Path:
        """The CA certificate (PEM) that signed the local broker's TLS certificate; written by the
        first `sluice stack up` and kept (deploy/local/mosquitto.py)."""
        return self.state_dir / "mosquitto" / "tls" / "ca.crt"

    @property
    def temporal_address(self) -> str:
        return f"{self.host}:{self.temporal_port}"

    @property
    def temporal_ui_url(self) -> str:
        return f"http://{self.host}:{self.temporal_ui_port}"

    @property
    def namesrv_address(self) -> str:
        return f"{self.host}:{self.namesrv_port}"

    @property
    def broker_address(self) -> str:
        return f"{self.host}:{self.broker_port}"

    @property
    def proxy_address(self) -> str:
        return f"{self.host}:{self.proxy_port}"

    @property
    def replica_namesrv_address(self) -> str:
        return f"{self.host}:{self.replica_namesrv_port}"

    @property
    def replica_broker_address(self) -> str:
        return f"{self.host}:{self.replica_broker_port}"

    @property
    def replica_proxy_address(self) -> str:
        return f"{self.host}:{self.replica_proxy_port}"

    @property
    def opensearch_url(self) -> str:
        return f"http://{self.host}:{self.opensearch_port}"

    @property
    def opensearch_transport_port(self) -> int:
        return self.opensearch_port + 100

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"
