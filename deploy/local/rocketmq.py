"""Apache RocketMQ 5.x (name server, broker with the gRPC proxy in local mode) from Maven Central jars.

The stack runs two clusters (``Layout``): the worker's own (``DefaultCluster``) and a second one,
``ReplicaCluster``, with its own name server, broker, ports and store, that the replicator copies
into (docs/replicator.md). Both share the jars.

The jars are resolved by Maven from ``deploy/rocketmq/pom.xml`` into ``<state>/rocketmq/lib`` and run
with ``java -cp``; no release archive is downloaded. The broker runs inside the proxy process in
*local* mode (``ProxyStartup -pm Local``), which serves the remoting protocol Sluice speaks on the
broker port and the gRPC API the official 5.x clients use on the proxy port, in one JVM.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sluice.connectors.rocketmq.errors import RocketMQError
from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.deploy.local.config import REPO_ROOT, StackConfig
from sluice.deploy.local.maven import copy_dependencies
from sluice.deploy.local.process import ManagedProcess, StackError, ensure_port_free, port_open, wait_until

POM = REPO_ROOT / "deploy" / "rocketmq" / "pom.xml"
BROKER_NAME = "broker-a"
CLUSTER_NAME = "DefaultCluster"
REPLICA_CLUSTER_NAME = "ReplicaCluster"
REPLICA_BROKER_NAME = "broker-r"
#: How long the broker's health check waits for the name server's cluster info.
REGISTERED_TIMEOUT_S = 3.0

# Java 17 needs these for RocketMQ's direct-buffer and reflection tricks.
_JAVA_OPENS = [
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
]


def java_binary(service: str = "rocketmq") -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise StackError(
            f"{service}: Java is missing; install a JDK 17 (`apt-get install -y openjdk-17-jdk-headless`)"
        )
    return found


def home(cfg: StackConfig) -> Path:
    return cfg.state_dir / "rocketmq"


@dataclass(frozen=True)
class Layout:
    """One cluster of the stack: its service names, cluster and broker names, ports and store."""

    service: str  # "rocketmq" or "rocketmq-replica": "<service>-namesrv", "<service>-broker"
    cluster: str
    broker: str
    namesrv_port: int
    broker_port: int
    proxy_port: int
    env_prefix: str  # of the port settings, for the error naming a taken port
    host: str

    @property
    def namesrv_address(self) -> str:
        return f"{self.host}:{self.namesrv_port}"

    @property
    def broker_address(self) -> str:
        return f"{self.host}:{self.broker_port}"

    @property
    def proxy_address(self) -> str:
        return f"{self.host}:{self.proxy_port}"

    def home(self, cfg: StackConfig) -> Path:
        """Its config and store (the jars are shared: ``lib_dir``)."""
        return cfg.state_dir / self.service


def primary(cfg: StackConfig) -> Layout:
    """The worker's own cluster."""
    return Layout("rocketmq", CLUSTER_NAME, BROKER_NAME, cfg.namesrv_port, cfg.broker_port, cfg.proxy_port,
                  "SLUICE_", cfg.host)  # fmt: skip


def replica(cfg: StackConfig) -> Layout:
    """The second cluster, a replicator's target."""
    return Layout("rocketmq-replica", REPLICA_CLUSTER_NAME, REPLICA_BROKER_NAME, cfg.replica_namesrv_port,
                  cfg.replica_broker_port, cfg.replica_proxy_port, "SLUICE_REPLICA_", cfg.host)  # fmt: skip


def lib_dir(cfg: StackConfig) -> Path:
    return home(cfg) / "lib"


def ensure_jars(cfg: StackConfig) -> Path:
    """Resolve the RocketMQ jars with Maven once per pom.xml content."""
    return copy_dependencies("rocketmq", POM, lib_dir(cfg))


def _jvm(cfg: StackConfig, heap: str, layout: Layout | None = None) -> list[str]:
    return [
        java_binary(),
        f"-Xms{heap}",
        f"-Xmx{heap}",
        "-XX:+UseG1GC",
        "-XX:MaxDirectMemorySize=1g",
        *_JAVA_OPENS,
        f"-Drocketmq.home.dir={(layout or primary(cfg)).home(cfg)}",
        f"-Duser.home={(layout or primary(cfg)).home(cfg)}",
        "-cp",
        f"{lib_dir(cfg)}/*",
    ]


def java_tool(
    cfg: StackConfig, main_class: str, *args: str, timeout_s: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run a Java main class from the RocketMQ jars (e.g. the benchmark producer)."""
    env = {**os.environ, "ROCKETMQ_HOME": str(home(cfg)), "NAMESRV_ADDR": cfg.namesrv_address}
    return subprocess.run(
        [*_jvm(cfg, "256m"), main_class, *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
    )


def mqadmin(
    cfg: StackConfig, *args: str, timeout_s: float = 60, namesrv: str | None = None
) -> subprocess.CompletedProcess[str]:
    """RocketMQ's admin tool: ``mqadmin(cfg, "updateTopic", "-t", "T", "-c", "DefaultCluster")``
    (``namesrv``: another cluster's, the replica's)."""
    if not args:
        raise ValueError("mqadmin needs a sub-command")
    return java_tool(
        cfg,
        "org.apache.rocketmq.tools.command.MQAdminStartup",
        *args,
        "-n",
        namesrv or cfg.namesrv_address,
        timeout_s=timeout_s,
    )


def create_topic(cfg: StackConfig, topic: str, queues: int = 4) -> None:
    result = mqadmin(
        cfg, "updateTopic", "-t", topic, "-c", CLUSTER_NAME, "-r", str(queues), "-w", str(queues)
    )
    if result.returncode != 0 or "success" not in result.stdout:
        raise StackError(
            f"rocketmq: could not create topic {topic}: {result.stdout[-500:]}{result.stderr[-500:]}"
        )


def _write_properties(path: Path, values: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))


class NameServer:
    def __init__(self, cfg: StackConfig, layout: Layout | None = None) -> None:
        self.cfg = cfg
        self.layout = layout or primary(cfg)
        self.proc = ManagedProcess(f"{self.layout.service}-namesrv", cfg.state_dir)

    def start(self) -> None:
        if self.healthy():
            return
        ensure_jars(self.cfg)
        ensure_port_free(
            f"{self.layout.service} name server", self.cfg.host, self.layout.namesrv_port,
            f"{self.layout.env_prefix}NAMESRV_PORT",
        )  # fmt: skip
        conf = self.layout.home(self.cfg) / "conf" / "namesrv.properties"
        _write_properties(conf, {"listenPort": self.layout.namesrv_port, "bindAddress": self.cfg.host})
        self.proc.start(
            [
                *_jvm(self.cfg, "256m", self.layout),
                "org.apache.rocketmq.namesrv.NamesrvStartup",
                "-c",
                str(conf),
            ],
            env={"ROCKETMQ_HOME": str(self.layout.home(self.cfg))},
        )
        wait_until(self.healthy, service=f"{self.layout.service} name server", proc=self.proc, timeout_s=60)

    def healthy(self) -> bool:
        return self.proc.is_running() and port_open(self.cfg.host, self.layout.namesrv_port)

    def stop(self) -> None:
        self.proc.stop()


class Broker:
    """Broker + gRPC proxy (local mode) in one JVM."""

    def __init__(self, cfg: StackConfig, layout: Layout | None = None) -> None:
        self.cfg = cfg
        self.layout = layout or primary(cfg)
        self.proc = ManagedProcess(f"{self.layout.service}-broker", cfg.state_dir)

    @property
    def _heap(self) -> str:
        """The replica carries copies only (tests, demos, the benchmark): half the heap."""
        return "1g" if self.layout.service == "rocketmq" else "512m"

    def _write_config(self) -> tuple[Path, Path]:
        store = self.layout.home(self.cfg) / "store"
        broker_conf = self.layout.home(self.cfg) / "conf" / "broker.properties"
        _write_properties(
            broker_conf,
            {
                "brokerClusterName": self.layout.cluster,
                "brokerName": self.layout.broker,
                "brokerId": 0,
                "brokerIP1": self.cfg.host,
                "bindAddress": self.cfg.host,
                "listenPort": self.layout.broker_port,
                "haListenPort": self.layout.broker_port + 1,
                "namesrvAddr": self.layout.namesrv_address,
                "storePathRootDir": store,
                "storePathCommitLog": store / "commitlog",
                "autoCreateTopicEnable": "false",
                "autoCreateSubscriptionGroup": "true",
                "mappedFileSizeCommitLog": 256 * 1024 * 1024,
                "flushDiskType": "ASYNC_FLUSH",
                # Retention: commit log files older than 12 hours are deleted at 4 am, or at once
                # while the disk is over 75 % used (RocketMQ's own threshold; it was 95 here, above
                # the 90 % at which the broker refuses messages, so nothing was ever freed before
                # that). Tests and benchmarks write gigabytes an hour: a development machine's
                # stack kept 55 GB of them, 2 % short of refusing every message.
                "deleteWhen": "04",
                "fileReservedTime": 12,
                "diskMaxUsedSpaceRatio": 75,
                # A broker over diskSpaceCleanForciblyRatio (85 % of the disk by default) deletes its
                # oldest commit log files even when no consumer has read them, while its consume
                # queues still index them: a full machine then loses a test's or a demo's messages
                # in silence. Keep what is stored; the broker refuses new messages at 90 % used.
                "cleanFileForciblyEnable": "false",
                "enablePropertyFilter": "true",
                # Micro-batches pull up to 1,000+ messages per request; the broker's defaults cap a pull
                # at 32 messages (256 KiB) from memory, which would make every range read chatty.
                "maxTransferCountOnMessageInMemory": 2048,
                "maxTransferBytesOnMessageInMemory": 8 * 1024 * 1024,
                "maxTransferCountOnMessageInDisk": 2048,
                "maxTransferBytesOnMessageInDisk": 8 * 1024 * 1024,
            },
        )
        proxy_conf = self.layout.home(self.cfg) / "conf" / "rmq-proxy.json"
        proxy_conf.write_text(
            json.dumps(
                {
                    "rocketMQClusterName": self.layout.cluster,
                    "namesrvAddr": self.layout.namesrv_address,
                    "grpcServerPort": self.layout.proxy_port,
                    "remotingListenPort": self.layout.proxy_port + 1,
                }
            )
        )
        return broker_conf, proxy_conf

    def start(self) -> None:
        if self.healthy():
            return
        ensure_jars(self.cfg)
        # The broker also listens on its port - 2 (the "fast" remoting port) and + 1 (HA), the proxy
        # on its port + 1 (remoting): a taken one kills the JVM with a bind error, so name it first.
        for service, port, env_var in (
            (
                f"{self.layout.service} broker",
                self.layout.broker_port,
                f"{self.layout.env_prefix}BROKER_PORT",
            ),
            (
                f"{self.layout.service} broker (fast remoting, its port - 2)",
                self.layout.broker_port - 2,
                f"{self.layout.env_prefix}BROKER_PORT",
            ),
            (
                f"{self.layout.service} broker (HA, its port + 1)",
                self.layout.broker_port + 1,
                f"{self.layout.env_prefix}BROKER_PORT",
            ),
            (f"{self.layout.service} proxy", self.layout.proxy_port, f"{self.layout.env_prefix}PROXY_PORT"),
            (
                f"{self.layout.service} proxy (remoting, its port + 1)",
                self.layout.proxy_port + 1,
                f"{self.layout.env_prefix}PROXY_PORT",
            ),
        ):
            ensure_port_free(service, self.cfg.host, port, env_var)
        broker_conf, proxy_conf = self._write_config()
        self.proc.start(
            [
                *_jvm(self.cfg, self._heap, self.layout),
                "org.apache.rocketmq.proxy.ProxyStartup",
                "-pm",
                "Local",
                "-bc",
                str(broker_conf),
                "-pc",
                str(proxy_conf),
                "-n",
                self.layout.namesrv_address,
            ],
            env={"ROCKETMQ_HOME": str(self.layout.home(self.cfg))},
        )
        wait_until(
            self.healthy, service=f"{self.layout.service} broker", proc=self.proc, timeout_s=120, interval_s=1
        )

    def registered(self, timeout_s: float = REGISTERED_TIMEOUT_S) -> bool:
        """The broker is listed by the name server (what clients need to find it): the name
        server's cluster info (what ``mqadmin clusterList`` shows) names a master at this broker's
        address. A name server that is down, slow or answers without it means no.

        Asked with Sluice's own client, not ``mqadmin``: a health check must not start a JVM.
        """
        client = SyncRocketMQClient(
            self.layout.namesrv_address,
            connect_timeout_s=timeout_s,
            request_timeout_s=timeout_s,
            max_retries=0,
        )
        try:
            info = client.cluster_info(timeout_s=timeout_s)
        except (RocketMQError, OSError):
            return False
        finally:
            client.close()
        return self.layout.broker_address in info.masters.values()

    def healthy(self) -> bool:
        return (
            self.proc.is_running()
            and port_open(self.cfg.host, self.layout.broker_port)
            and port_open(self.cfg.host, self.layout.proxy_port)
            and self.registered()
        )

    def stop(self) -> None:
        self.proc.stop(timeout_s=60)
