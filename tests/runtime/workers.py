"""Runtime fixtures: real `sluice worker` processes and a client on their task queue.

Why one shared worker: a worker is a process with a cold JVM and SparkSession (~7 s, and seconds
more for its first job, competing with the broker's JVMs on two cores). Most runtime tests only
need *a* worker, so the session starts one, on a task queue and store schema of its own, and every
test that does not mark itself ``private_worker`` uses it; connectors a test leaves on its queue
are deleted when it ends, so the next test finds the worker idle. A test that kills or stops a
worker, or changes the worker's environment, marks itself ``private_worker`` and gets its own queue,
schema and processes, as every test did before (the shared worker refuses ``kill``/``terminate``).
A ``fault`` test that restarts a *service* (the broker, a database, the whole stack) but leaves the
worker alone runs on the shared worker, which must ride the restart out as any worker must: after
such a test the worker is checked (alive, and a config check answered through it), so a worker the
fault broke fails that test, not a later one.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sluice.deploy.local.config import StackConfig
from sluice.worker.client import Client, SluiceClient
from tests.databases import TestDatabase, postgres_database

#: Task activities the shared worker runs at once: tests with several tasks, and room for a
#: connector another test is still deleting.
SHARED_WORKER_TASKS = "16"


@dataclass
class WorkerProcess:
    proc: subprocess.Popen[bytes]
    log: Path
    shared: bool = False

    def _own(self, what: str) -> None:
        if self.shared:
            raise AssertionError(f"{what} the session's shared worker: mark the test private_worker")

    def kill(self) -> None:
        """SIGKILL: no graceful shutdown, the batch in flight is abandoned mid-way."""
        self._own("cannot kill")
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def terminate(self) -> None:
        self._own("cannot stop")
        self._stop()

    def _stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGKILL)
                self.proc.wait(timeout=30)


@dataclass(frozen=True)
class RuntimeEnv:
    task_queue: str
    store_schema: str
    env: dict[str, str]


def _runtime_env(**extra: str) -> RuntimeEnv:
    queue = f"sluice-test-{uuid.uuid4().hex[:8]}"
    schema = f"s_{uuid.uuid4().hex[:10]}"
    env = {
        **os.environ,
        "SLUICE_TASK_QUEUE": queue,
        "SLUICE_STORE_SCHEMA": schema,
        # Two cores, as in production: batches are split into several Spark partitions.
        "SLUICE_SPARK_MASTER": "local[2]",
        "SLUICE_SPARK_DRIVER_MEMORY": "1g",
        # Several workers run at once: each serves its metrics on a free port (named in its log).
        "SLUICE_METRICS_PORT": "0",
        **extra,
    }
    return RuntimeEnv(queue, schema, env)


def _start_worker(env: RuntimeEnv, log: Path, shared: bool = False) -> WorkerProcess:
    out = log.open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "sluice.worker.cli", "worker"],
        stdout=out,
        stderr=subprocess.STDOUT,
        env=env.env,
        start_new_session=True,
    )
    wp = WorkerProcess(proc, log, shared)
    deadline = time.monotonic() + 120
    while b"sluice worker ready" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"worker did not start:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.5)
    return wp


@dataclass
class SharedRuntime:
    """The session's worker, started by the first test that asks for it (and again if it died)."""

    env: RuntimeEnv
    log: Path
    worker: WorkerProcess | None = None
    restarts: int = field(default=0)

    def ensure_started(self) -> WorkerProcess:
        if self.worker is None or self.worker.proc.poll() is not None:
            if self.worker is not None:
                self.restarts += 1
            self.worker = _start_worker(self.env, self.log, shared=True)
        return self.worker

    def check_healthy(self, temporal_address: str, after: str) -> None:
        """Fail unless the worker is alive and answers on its queue: a config check is a workflow and
        an activity run by it (``Client.validate``, through the light client: no local checks)."""
        worker = self.worker

        def log() -> str:
            return self.log.read_text(errors="replace")[-3000:]

        if worker is None or worker.proc.poll() is not None:
            raise AssertionError(f"the shared worker died during {after}:\n{log()}")

        async def check() -> list[str]:
            client = await Client.connect(temporal_address, task_queue=self.env.task_queue, answer_timeout=60)
            config = {"connector.class": "file-source", "file": str(self.log), "topic": "T_health"}
            return (await client.validate("health-check", config)).errors

        try:
            with ThreadPoolExecutor(max_workers=1) as pool:
                errors = pool.submit(asyncio.run, check()).result(timeout=120)
        except Exception as exc:
            raise AssertionError(
                f"the shared worker does not answer after {after}: {exc!r}\n{log()}"
            ) from exc
        assert not errors, f"the shared worker's config check after {after} failed: {errors}"


@pytest.fixture(scope="session")
def shared_runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedRuntime]:
    shared = SharedRuntime(
        _runtime_env(SLUICE_MAX_TASKS=SHARED_WORKER_TASKS),
        tmp_path_factory.mktemp("shared-worker") / "worker.log",
    )
    yield shared
    if shared.worker is not None:
        shared.worker._stop()


def _private(request: pytest.FixtureRequest) -> bool:
    """A test with its own worker: it kills, stops or reconfigures one (a ``fault`` test that only
    restarts a service uses the shared worker, checked after it)."""
    return request.node.get_closest_marker("private_worker") is not None


@pytest.fixture
def runtime_env(request: pytest.FixtureRequest, shared_runtime: SharedRuntime) -> RuntimeEnv:
    return _runtime_env() if _private(request) else shared_runtime.env


@pytest.fixture
def start_worker(
    request: pytest.FixtureRequest,
    stack_config: StackConfig,
    runtime_env: RuntimeEnv,
    shared_runtime: SharedRuntime,
    tmp_path: Path,
) -> Iterator[Callable[[], WorkerProcess]]:
    """``start()`` gives a running worker on ``runtime_env``'s queue: a new process for a
    ``private_worker`` test (each call another one), else the session's shared worker."""
    private = _private(request)
    started: list[WorkerProcess] = []

    used_shared = False

    def start() -> WorkerProcess:
        nonlocal used_shared
        if not private:
            used_shared = True
            return shared_runtime.ensure_started()
        wp = _start_worker(runtime_env, tmp_path / f"worker-{len(started)}.log")
        started.append(wp)
        return wp

    yield start
    for wp in started:
        wp._stop()
    if used_shared:  # leave the shared worker idle for the next test
        delete_connectors(stack_config.temporal_address, runtime_env.task_queue)
        if request.node.get_closest_marker("fault") is not None:  # it restarted a service
            shared_runtime.check_healthy(stack_config.temporal_address, request.node.nodeid)


def delete_connectors(temporal_address: str, task_queue: str) -> None:
    """Delete every connector on ``task_queue`` (whatever created it: the client, the REST API, the
    ``temporal`` CLI). On its own thread and event loop: a sync fixture's teardown must not touch
    the loop pytest-asyncio runs the tests on."""

    async def delete_all() -> None:
        client = await SluiceClient.connect(temporal_address, task_queue=task_queue)
        # All at once: each delete waits for its connector's batch in flight, and they are independent.
        # return_exceptions: deleted meanwhile, or failing: best effort.
        await asyncio.gather(*(client.delete(name) for name in await client.list()), return_exceptions=True)

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, delete_all()).result(timeout=300)


@pytest.fixture
def worker_logs(
    request: pytest.FixtureRequest, shared_runtime: SharedRuntime, tmp_path: Path
) -> Callable[[], str]:
    """``logs()``: what this test's workers logged — its private workers' logs, or what the shared
    worker logged since the test began."""
    if _private(request):
        return lambda: "".join(p.read_text(errors="replace") for p in sorted(tmp_path.glob("worker-*.log")))
    log = shared_runtime.log
    start = log.stat().st_size if log.exists() else 0
    return lambda: log.read_bytes()[start:].decode(errors="replace") if log.exists() else ""


@pytest.fixture
async def sluice(stack_config: StackConfig, runtime_env: RuntimeEnv) -> SluiceClient:
    return await SluiceClient.connect(stack_config.temporal_address, task_queue=runtime_env.task_queue)


@pytest.fixture
def target_pg(stack_config: StackConfig) -> Iterator[TestDatabase]:
    """A fresh PostgreSQL database for a pipeline's target (the CDC tests' replica), dropped after."""
    with postgres_database(stack_config) as db:
        yield db
