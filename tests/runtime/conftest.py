"""Runtime fixtures: real `sluice worker` processes (killable) and a client on a private task queue."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from deploy.local.config import StackConfig
from tests.databases import TestDatabase, postgres_database
from worker.client import SluiceClient


@dataclass
class WorkerProcess:
    proc: subprocess.Popen[bytes]
    log: Path

    def kill(self) -> None:
        """SIGKILL: no graceful shutdown, the batch in flight is abandoned mid-way."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass(frozen=True)
class RuntimeEnv:
    task_queue: str
    store_schema: str
    env: dict[str, str]


@pytest.fixture
def runtime_env(stack_config: StackConfig, tmp_path: Path) -> RuntimeEnv:
    queue = f"sluice-test-{uuid.uuid4().hex[:8]}"
    schema = f"s_{uuid.uuid4().hex[:10]}"
    env = {
        **os.environ,
        "SLUICE_TASK_QUEUE": queue,
        "SLUICE_STORE_SCHEMA": schema,
        # Two cores, as in production: batches are split into several Spark partitions.
        "SLUICE_SPARK_MASTER": "local[2]",
        "SLUICE_SPARK_DRIVER_MEMORY": "1g",
    }
    return RuntimeEnv(queue, schema, env)


@pytest.fixture
def start_worker(runtime_env: RuntimeEnv, tmp_path: Path) -> Iterator[Callable[[], WorkerProcess]]:
    started: list[WorkerProcess] = []

    def start() -> WorkerProcess:
        log = tmp_path / f"worker-{len(started)}.log"
        out = log.open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "worker.cli", "worker"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=runtime_env.env,
            start_new_session=True,
        )
        wp = WorkerProcess(proc, log)
        started.append(wp)
        deadline = time.monotonic() + 120
        while b"sluice worker ready" not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"worker did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)
        return wp

    yield start
    for wp in started:
        wp.terminate()


@pytest.fixture
async def sluice(stack_config: StackConfig, runtime_env: RuntimeEnv) -> SluiceClient:
    return await SluiceClient.connect(stack_config.temporal_address, task_queue=runtime_env.task_queue)


@pytest.fixture
def target_pg(stack_config: StackConfig) -> Iterator[TestDatabase]:
    """A fresh PostgreSQL database for a pipeline's target (the CDC tests' replica), dropped after."""
    with postgres_database(stack_config) as db:
        yield db
