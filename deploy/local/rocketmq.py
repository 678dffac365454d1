"""Apache RocketMQ 5.x (name server, broker with the gRPC proxy in local mode) from Maven Central jars.

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
from pathlib import Path

from sluice.connectors.rocketmq.errors import RocketMQError
from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.deploy.local.config import REPO_ROOT, StackConfig
from sluice.deploy.local.maven import copy_dependencies
from sluice.deploy.local.process import ManagedProcess, StackError, ensure_port_free, port_open, wait_until

POM = REPO_ROOT / "deploy" / "rocketmq" / "pom.xml"
BROKER_NAME = "broker-a"
CLUSTER_NAME = "DefaultCluster"
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


def lib_dir(cfg: StackConfig) -> Path:
    return home(cfg) / "lib"


def ensure_jars(cfg: StackConfig) -> Path:
    """Resolve the RocketMQ jars with Maven once per pom.xml content."""
    return copy_dependencies("rocketmq", POM, lib_dir(cfg))


def _jvm(cfg: StackConfig, heap: str) -> list[str]:
    return [
        java_binary(),
        f"-Xms{heap}",
        f"-Xmx{heap}",
        "-XX:+UseG1GC",
        "-XX:MaxDirectMemorySize=1g",
        *_JAVA_OPENS,
        f"-Drocketmq.home.dir={home(cfg)}",
        f"-Duser.home={home(cfg)}",
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


def mqadmin(cfg: StackConfig, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    """RocketMQ's admin tool: ``mqadmin(cfg, "updateTopic", "-t", "T", "-c", "DefaultCluster")``."""
    if not args:
        raise ValueError("mqadmin needs a sub-command")
    return java_tool(
        cfg,
        "org.apache.rocketmq.tools.command.MQAdminStartup",
        *args,
        "-n",
        cfg.namesrv_address,
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
    def __init__(self, cfg: StackConfig) -> None:
        self.cfg = cfg
        self.proc = ManagedProcess("rocketmq-namesrv", cfg.state_dir)

    def start(self) -> None:
        if self.healthy():
            return
        ensure_jars(self.cfg)
        ensure_port_free("rocketmq name server", self.cfg.host, self.cfg.namesrv_port, "SLUICE_NAMESRV_PORT")
        conf = home(self.cfg) / "conf" / "namesrv.properties"
        _write_properties(conf, {"listenPort": self.cfg.namesrv_port, "bindAddress": self.cfg.host})
        self.proc.start(
            [*_jvm(self.cfg, "256m"), "org.apache.rocketmq.namesrv.NamesrvStartup", "-c", str(conf)],
            env={"ROCKETMQ_HOME": str(home(self.cfg))},
        )
        wait_until(self.healthy, service="rocketmq name server", proc=self.proc, timeout_s=60)

    def healthy(self) -> bool:
        return self.proc.is_running() and port_open(self.cfg.host, self.cfg.namesrv_port)

    def stop(self) -> None:
        self.proc.stop()


class Broker:
    """Broker + gRPC proxy (local mode) in one JVM."""

    def __init__(self, cfg: StackConfig) -> None:
        self.cfg = cfg
        self.proc = ManagedProcess("rocketmq-broker", cfg.state_dir)

    def _write_config(self) -> tuple[Path, Path]:
        store = home(self.cfg) / "store"
        broker_conf = home(self.cfg) / "conf" / "broker.properties"
        _write_properties(
            broker_conf,
            {
                "brokerClusterName": CLUSTER_NAME,
                "brokerName": BROKER_NAME,
                "brokerId": 0,
                "brokerIP1": self.cfg.host,
                "bindAddress": self.cfg.host,
                "listenPort": self.cfg.broker_port,
                "haListenPort": self.cfg.broker_port + 1,
                "namesrvAddr": self.cfg.namesrv_address,
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
        proxy_conf = home(self.cfg) / "conf" / "rmq-proxy.json"
        proxy_conf.write_text(
            json.dumps(
                {
                    "rocketMQClusterName": CLUSTER_NAME,
                    "namesrvAddr": self.cfg.namesrv_address,
                    "grpcServerPort": self.cfg.proxy_port,
                    "remotingListenPort": self.cfg.proxy_port + 1,
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
            ("rocketmq broker", self.cfg.broker_port, "SLUICE_BROKER_PORT"),
            ("rocketmq broker (fast remoting, its port - 2)", self.cfg.broker_port - 2, "SLUICE_BROKER_PORT"),
            ("rocketmq broker (HA, its port + 1)", self.cfg.broker_port + 1, "SLUICE_BROKER_PORT"),
            ("rocketmq proxy", self.cfg.proxy_port, "SLUICE_PROXY_PORT"),
            ("rocketmq proxy (remoting, its port + 1)", self.cfg.proxy_port + 1, "SLUICE_PROXY_PORT"),
        ):
            ensure_port_free(service, self.cfg.host, port, env_var)
        broker_conf, proxy_conf = self._write_config()
        self.proc.start(
            [
                *_jvm(self.cfg, "1g"),
                "org.apache.rocketmq.proxy.ProxyStartup",
                "-pm",
                "Local",
                "-bc",
                str(broker_conf),
                "-pc",
                str(proxy_conf),
                "-n",
                self.cfg.namesrv_address,
            ],
            env={"ROCKETMQ_HOME": str(home(self.cfg))},
        )
        wait_until(self.healthy, service="rocketmq broker", proc=self.proc, timeout_s=120, interval_s=1)

    def registered(self, timeout_s: float = REGISTERED_TIMEOUT_S) -> bool:
        """The broker is listed by the name server (what clients need to find it): the name
        server's cluster info (what ``mqadmin clusterList`` shows) names a master at this broker's
        address. A name server that is down, slow or answers without it means no.

        Asked with Sluice's own client, not ``mqadmin``: a health check must not start a JVM.
        """
        client = SyncRocketMQClient(
            self.cfg.namesrv_address, connect_timeout_s=timeout_s, request_timeout_s=timeout_s, max_retries=0
        )
        try:
            info = client.cluster_info(timeout_s=timeout_s)
        except (RocketMQError, OSError):
            return False
        finally:
            client.close()
        return self.cfg.broker_address in info.masters.values()

    def healthy(self) -> bool:
        return (
            self.proc.is_running()
            and port_open(self.cfg.host, self.cfg.broker_port)
            and port_open(self.cfg.host, self.cfg.proxy_port)
            and self.registered()
        )

    def stop(self) -> None:
        self.proc.stop(timeout_s=60)
