"""REST tests: the app in-process (httpx's ASGI transport) over the real stack — Temporal, the
session's shared `sluice worker` (``tests.runtime.workers``: its own task queue and offset-store
schema), RocketMQ and the file connectors. The REST tests need nothing of the worker the runtime
tests do not (same environment, no keys of their own), so they use the same process; whatever
connectors a REST test leaves on its queue are deleted when it ends, as for the runtime tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from sluice.deploy.local.config import StackConfig
from sluice.worker.client import SluiceClient
from sluice.worker.rest.app import create_app
from sluice.worker.rest.deps import RestSettings
from tests.runtime.workers import SharedRuntime

TOKEN = "t0ken-for-tests"


@dataclass(frozen=True)
class RestWorker:
    task_queue: str
    log: Path


@pytest.fixture(scope="session")
def rest_worker(stack_config: StackConfig, shared_runtime: SharedRuntime) -> RestWorker:
    """The session's shared worker, started if no test has started it yet."""
    shared_runtime.ensure_started()
    return RestWorker(shared_runtime.env.task_queue, shared_runtime.log)


@pytest.fixture(autouse=True)
def _rest_worker_idle(request: pytest.FixtureRequest) -> None:
    """A REST test takes the shared worker as a runtime test does (``start_worker``: running before
    it, restarted if a test before it died; the connectors it left on the queue deleted after it)."""
    if "rest_worker" in request.fixturenames:
        # Through getfixturevalue: an autouse fixture's parameters would put every test in the stack lane.
        request.getfixturevalue("start_worker")()


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
