"""``GET /metrics`` of the REST server: every connector's and task's state, for alerts.

A task's FAILED state is the connector workflow's (it retries tasks itself and gives up after
``errors.retry.timeout``), not any one worker's, so it is read here from each connector's status,
where ``sluice connector status`` reads it too. Workers serve the throughput series
(activities.metrics); the figures each task last reported (records/s, lag) are repeated here so a
connector's whole picture is on one target. The server's own process series come with them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sluice.worker.client import SluiceClient
from sluice.worker.errors import ConnectorNotFoundError
from sluice.worker.rest.deps import client_of, reader
from sluice.workflows.types import ConnectorStatus

#: Status queries in flight at once (one per connector; each is a workflow query).
CONCURRENT_QUERIES = 16

router = APIRouter(tags=["metrics"])


class _Families(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


async def _statuses(client: SluiceClient) -> list[ConnectorStatus]:
    gate = asyncio.Semaphore(CONCURRENT_QUERIES)

    async def one(name: str) -> ConnectorStatus | None:
        async with gate:
            try:
                return await client.status(name)
            except ConnectorNotFoundError:  # deleted between the list and its query
                return None

    found = await asyncio.gather(*(one(name) for name in await client.list()))
    return [s for s in found if s is not None]


def state_families(statuses: list[ConnectorStatus]) -> list[Metric]:
    """The series of ``statuses``: one sample of value 1 per connector and task, in its state."""
    connector = GaugeMetricFamily(
        "sluice_connector_state", "1 for the state each connector is in.", labels=["connector", "state"]
    )
    task = GaugeMetricFamily(
        "sluice_task_status",
        "1 for the state each task is in, as its connector's workflow sees it (FAILED: given up).",
        labels=["connector", "task", "state"],
    )
    rate = GaugeMetricFamily(
        "sluice_task_records_per_second",
        "Records/s the task last reported (as in sluice connector status).",
        labels=["connector", "task"],
    )
    lag = GaugeMetricFamily(
        "sluice_task_reported_lag",
        "Lag the task last reported, in its unit.",
        labels=["connector", "task", "unit"],
    )
    behind = GaugeMetricFamily(
        "sluice_task_reported_lag_seconds",
        "Seconds each partition was behind as the task last reported (a replicator's source queues).",
        labels=["connector", "task", "partition"],
    )
    for s in statuses:
        connector.add_metric([s.name, s.state.value], 1)
        for t in s.tasks:
            task.add_metric([s.name, str(t.task_id), t.state.value], 1)
            m = t.metrics
            if m is not None:
                rate.add_metric([s.name, str(t.task_id)], m.records_per_s)
                if m.lag >= 0:
                    lag.add_metric([s.name, str(t.task_id), m.lag_unit], m.lag)
                for partition, seconds in m.lag_seconds.items():
                    behind.add_metric([s.name, str(t.task_id), partition], seconds)
    return [connector, task, rate, lag, behind]


@router.get("/metrics", dependencies=[Depends(reader)], response_class=Response)
async def metrics(request: Request) -> Response:
    """Prometheus text: connector and task states, and the REST server's process series."""
    states = CollectorRegistry(auto_describe=False)
    states.register(_Families(state_families(await _statuses(client_of(request)))))
    return Response(generate_latest(REGISTRY) + generate_latest(states), media_type=CONTENT_TYPE_LATEST)
