"""A Spark standalone cluster and a Spark Connect server on 127.0.0.1, from pyspark's own distribution.

Why: a worker's ``SLUICE_SPARK_MASTER`` may be ``local[*]``, a standalone master (``spark://``) or a
Spark Connect server (``sc://``); the tests run pipelines on each, and anyone can try a cluster
master the same way without installing Spark (docs/spark-clusters.md). The pyspark wheel carries
``bin/spark-class``, ``bin/spark-submit`` and every jar these need, Spark Connect's included, so
nothing is downloaded.

Each process is a ``ManagedProcess`` under a state folder of the caller's (pid and log files), bound
to 127.0.0.1 on free ports, and stopped with its whole process group (the standalone worker's
executors are its children).
"""

from __future__ import annotations

import json
import socket
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from sluice.deploy.local.process import ManagedProcess, StackError, port_open, wait_until

HOST = "127.0.0.1"
CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: Heap of the master and worker daemons (Spark's default, 1g each, is far more than they need).
DAEMON_MEMORY = "256m"


def spark_home() -> Path:
    """pyspark's own distribution: bin/, sbin/ and jars/ of the installed Spark version."""
    import pyspark

    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _spark_env(python: str) -> dict[str, str]:
    """Environment of every Spark process here: this distribution, loopback only, and ``python``
    for the Python workers a Connect server (or an executor) starts."""
    return {
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": HOST,
        "PYSPARK_PYTHON": python,
    }


class _Started:
    """``with`` starts it and stops it; a start that fails half-way stops what it started."""

    def start(self) -> str:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@dataclass
class StandaloneCluster(_Started):
    """A standalone master and ``workers`` workers of ``cores`` cores each (``with`` starts and stops).

    ``master_url`` is what ``SLUICE_SPARK_MASTER`` is set to; a worker process then runs its
    Spark jobs on this cluster's executors.
    """

    state_dir: Path
    workers: int = 1
    cores: int = 2
    memory: str = "2g"
    python: str = sys.executable
    port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    def _processes(self) -> list[ManagedProcess]:
        names = ["spark-master", *(f"spark-worker-{i}" for i in range(self.workers))]
        return [ManagedProcess(name, self.state_dir) for name in names]

    def start(self, timeout_s: float = 90) -> str:
        """Start the master, then the workers; return once every worker is registered."""
        spark_class = str(spark_home() / "bin" / "spark-class")
        env = {**_spark_env(self.python), "SPARK_DAEMON_MEMORY": DAEMON_MEMORY}
        master, *workers = self._processes()
        master.start(
            [spark_class, "org.apache.spark.deploy.master.Master",
             "--host", HOST, "--port", str(self.port), "--webui-port", str(self.ui_port)],
            env=env,
        )  # fmt: skip
        wait_until(
            lambda: port_open(HOST, self.port), service="Spark master", proc=master, timeout_s=timeout_s
        )
        for worker in workers:
            work_dir = self.state_dir / worker.name
            work_dir.mkdir(parents=True, exist_ok=True)
            worker.start(
                [spark_class, "org.apache.spark.deploy.worker.Worker", self.master_url,
                 "--host", HOST, "--cores", str(self.cores), "--memory", self.memory,
                 "--webui-port", str(free_port()), "--work-dir", str(work_dir)],
                env=env,
            )  # fmt: skip
        wait_until(
            lambda: self.alive_workers() >= self.workers,
            service="Spark standalone workers",
            proc=master,
            timeout_s=timeout_s,
        )
        return self.master_url

    def alive_workers(self) -> int:
        """Workers the master counts as alive (its web UI's JSON status)."""
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.ui_port}/json/", timeout=2) as answer:
                return int(json.load(answer).get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def stop(self) -> None:
        """Workers first (with their executors), then the master."""
        for proc in reversed(self._processes()):
            proc.stop(timeout_s=20)


@dataclass
class ConnectServer(_Started):
    """A Spark Connect server (``with`` starts and stops it); its own Spark runs on ``master``.

    ``url`` is what ``SLUICE_SPARK_MASTER`` is set to. The server, not the client, starts the
    Python workers that run data sources and Arrow functions, with ``python``.
    """

    state_dir: Path
    master: str = "local[2]"
    driver_memory: str = "1g"
    python: str = sys.executable
    port: int = field(default_factory=free_port)

    @property
    def url(self) -> str:
        return f"sc://{HOST}:{self.port}"

    @property
    def process(self) -> ManagedProcess:
        return ManagedProcess("spark-connect", self.state_dir)

    @property
    def local_dir(self) -> Path:
        """The server's scratch space: shuffle files, and the files sessions add (``addArtifacts``)."""
        return self.state_dir / "local"

    def start(self, timeout_s: float = 120) -> str:
        """Start the server; return its ``sc://`` URL once it accepts connections."""
        jars = spark_home() / "jars"
        if not any(jars.glob("spark-connect_*.jar")):
            raise StackError(f"Spark Connect server: no spark-connect jar in {jars} (pyspark >= 4 ships it)")
        self.process.start(
            [str(spark_home() / "bin" / "spark-submit"), "--class", CONNECT_SERVER_CLASS,
             "--name", "sluice-connect-server", "--master", self.master,
             "--driver-memory", self.driver_memory,
             "--conf", f"spark.connect.grpc.binding.address={HOST}",
             "--conf", f"spark.connect.grpc.binding.port={self.port}",
             "--conf", "spark.ui.enabled=false",
             "--conf", f"spark.local.dir={self.local_dir}"],
            env=_spark_env(self.python),
            cwd=self.state_dir,
        )  # fmt: skip
        wait_until(
            lambda: port_open(HOST, self.port),
            service="Spark Connect server",
            proc=self.process,
            timeout_s=timeout_s,
        )
        return self.url

    def stop(self) -> None:
        self.process.stop(timeout_s=20)


def _main() -> None:
    """``python -m sluice.deploy.local.spark_cluster <state folder>``: both, until Ctrl-C."""
    import signal

    state = Path(sys.argv[1] if len(sys.argv) > 1 else ".sluice/spark").resolve()
    state.mkdir(parents=True, exist_ok=True)
    with StandaloneCluster(state) as cluster, ConnectServer(state) as server:
        print(f"SLUICE_SPARK_MASTER={cluster.master_url}  (standalone)", flush=True)
        print(f"SLUICE_SPARK_MASTER={server.url}  (Spark Connect)", flush=True)
        print(f"logs in {state / 'logs'}; Ctrl-C stops both", flush=True)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        signal.sigwait({signal.SIGINT, signal.SIGTERM})


if __name__ == "__main__":
    _main()
