"""A schemathesis property run against /openapi.json: generated calls to every operation (both
flavours) find no 5xx and no response outside the document — status code, content type and body
schema. The server is real (uvicorn in a thread) over the session's worker and task queue.
Bounded (few examples per operation) so it runs in about a minute."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from sluice.deploy.local.config import StackConfig
from sluice.worker.client import SluiceClient
from sluice.worker.rest.app import create_app
from sluice.worker.rest.deps import RestSettings
from tests.rest.conftest import RestWorker


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(stack_config: StackConfig, rest_worker: RestWorker) -> Iterator[str]:
    async def connect() -> SluiceClient:
        return await SluiceClient.connect(stack_config.temporal_address, task_queue=rest_worker.task_queue)

    port = _free_port()
    app = create_app(RestSettings(max_body_bytes=65536), connect=connect)
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=lambda: asyncio.run(srv.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.1)
    url = f"http://127.0.0.1:{port}"
    yield url
    # Whatever the run created on the session's queue is deleted (RocketMQ's stop/all deletes).
    httpx.get(f"{url}/connectors/stop/all", timeout=120)
    srv.should_exit = True
    thread.join(timeout=30)


@pytest.fixture(scope="module")
def api_schema(server: str) -> schemathesis.schemas.BaseSchema:
    return schemathesis.openapi.from_url(f"{server}/openapi.json")


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def test_no_server_errors_and_no_schema_violations(api_schema: schemathesis.schemas.BaseSchema) -> None:
    failures: list[str] = []
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) > 40, "both flavours' operations are in the document"
    for operation in operations:

        @settings(
            max_examples=3,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        @given(case=operation.as_strategy())
        def run(case: schemathesis.Case) -> None:
            case.call_and_validate(checks=CHECKS, timeout=60)

        try:
            run()
        except Exception as exc:  # noqa: BLE001 - collect every operation's failure, then report
            failures.append(f"{operation.method.upper()} {operation.path}: {str(exc)[:600]}")
    assert not failures, "\n\n".join(failures)


def test_document_and_docs_are_served(server: str) -> None:
    doc = httpx.get(f"{server}/openapi.json").json()
    assert "/connectors/{name}/offsets" in doc["paths"] and "/plugin/config/validate" in doc["paths"]
    assert "/kafka/connectors/{name}/status" in doc["paths"]
    assert httpx.get(f"{server}/docs").status_code == 200
