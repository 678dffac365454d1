"""Metrics reports (``report_task`` with ``metrics``) land in the task's status and the UI's current
details without touching its detail text; stale generations are ignored (Temporal's test server,
stand-in activities: no stack needed)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata

from sluice.worker.client import SluiceClient
from sluice.workflows.connector import ConnectorWorkflow
from sluice.workflows.types import TaskMetrics, TaskReport
from tests.workflows.conftest import WorkerFactory, connector_worker, wait_for  # noqa: F401 - fixture
from tests.workflows.stand_ins import STAND_INS, starts_of
from tests.workflows.test_connector_workflow import _start


@pytest.fixture
async def sluice(connector_worker: WorkerFactory) -> AsyncIterator[SluiceClient]:  # noqa: F811
    async with connector_worker(STAND_INS) as (client, queue):
        yield SluiceClient(client, queue)


async def _details(sluice: SluiceClient, name: str) -> str:
    meta = await sluice.handle(name).query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return meta.current_details


async def test_metrics_reports_reach_status_and_current_details(sluice: SluiceClient) -> None:
    name = f"mx-{uuid.uuid4().hex[:8]}"
    await _start(sluice, name, {"tasks.max": "2"})
    await wait_for(lambda: len(starts_of(name)) == 2, 20, "tasks started")
    handle = sluice.handle(name)
    await handle.signal(ConnectorWorkflow.report_task, TaskReport(1, 0, "waiting for file /x/in.txt"))
    metrics = TaskMetrics(4, 120, "2026-01-01T00:00:00+00:00", 480, 96.0, 7, "bytes")
    await handle.signal(ConnectorWorkflow.report_task, TaskReport(1, 0, metrics=metrics))
    await handle.signal(ConnectorWorkflow.report_task, TaskReport(0, 5, metrics=metrics))  # stale

    async def shown() -> bool:
        return (await sluice.status(name)).tasks[1].metrics == metrics

    await wait_for(shown, 10, "task 1's metrics in status")
    status = await sluice.status(name)
    assert status.tasks[0].metrics is None
    assert status.tasks[1].detail == "waiting for file /x/in.txt"  # a metrics report keeps the detail
    text = await _details(sluice, name)
    assert "96.0 records/s, 480 records moved by the running tasks" in text
    assert "last batch 4: 120 records at 2026-01-01T00:00:00+00:00; 96.0 records/s; lag 7 bytes" in text
    await sluice.delete(name)
