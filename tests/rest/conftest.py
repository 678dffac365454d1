"""REST tests: the app in-process (httpx's ASGI transport) over the real stack — Temporal, a real
`sluice worker` process on a private task queue and offset-store schema (as tests/runtime does),
RocketMQ and the file connectors. One worker serves every REST test of the session."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from sluice.deploy.local.config import StackConfig
from sluice.worker.client import SluiceClient
from sluice.worker.rest.app import create_app
from sluice.worker.rest.deps import RestSettings

TOKEN = "t0ken-for-tests"


@dataclass(frozen=True)
class RestWorker:
    task_queue: str
    log: Path


@pytest.fixture(scope="session")
def rest_worker(stack_config: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestWorker]:
    queue = f"sluice-rest-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "SLUICE_TASK_QUEUE": queue,
        "SLUICE_STORE_SCHEMA": f"s_{uuid.uuid4().hex[:10]}",
        "SLUICE_SPARK_MASTER": "local[2]",
        "SLUICE_SPARK_DRIVER_MEMORY": "1g",
    }
    log = tmp_path_factory.mktemp("rest-worker") / "worker.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sluice.worker.cli", "worker"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    deadline = time.monotonic() + 120
    while b"sluice worker ready" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"worker did not start:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.5)
    yield RestWorker(queue, log)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=40)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="session")
async def rest_client(stack_config: StackConfig, rest_worker: RestWorker) -> SluiceClient:
    return await SluiceClient.connect(stack_config.temporal_address, task_queue=rest_worker.task_queue)


def make_http(client: SluiceClient, **settings: object) -> httpx.AsyncClient:
    app = create_app(RestSettings(**settings), client=client)  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sluice", timeout=120)


@pytest.fixture
async def http(rest_client: SluiceClient) -> AsyncIterator[httpx.AsyncClient]:
    """No token configured: every call allowed (the server's default on 127.0.0.1)."""
    async with make_http(rest_client) as h:
        yield h


@pytest.fixture
async def http_auth(rest_client: SluiceClient) -> AsyncIterator[httpx.AsyncClient]:
    """A token for mutating calls, 4 KiB body limit; no Authorization header sent by default."""
    async with make_http(rest_client, token=TOKEN, max_body_bytes=4096) as h:
        yield h
