"""Helpers both APIs share: connector-name checks, walking every connector, response models."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

from sluice.worker.client import SluiceClient
from sluice.worker.errors import ConnectorNotFoundError
from sluice.worker.rest.errors import RestError
from sluice.workflows.types import ConnectorStatus

# Names become Temporal workflow ids and search-attribute values: printable, bounded.
_NAME = re.compile(r"^[^\x00-\x1f\x7f/\\]{1,200}$")


def check_new_name(name: str) -> str:
    """A name to create a connector under; 400 naming the problem."""
    if not _NAME.match(name) or name != name.strip():
        raise RestError(
            400,
            f"connector name {name[:80]!r} is not allowed: 1-200 printable characters, no '/' or '\\', "
            "no leading or trailing spaces",
        )
    return name


def check_name(name: str) -> str:
    """A name to look up: one that could never have been created is simply not found."""
    if not _NAME.match(name) or name != name.strip():
        raise ConnectorNotFoundError(name[:200])
    return name


async def all_statuses(client: SluiceClient) -> list[ConnectorStatus]:
    """Every running connector's status; one deleted between list and status is skipped."""
    out = []
    for name in await client.list():
        try:
            out.append(await client.status(name))
        except ConnectorNotFoundError:
            continue
    return out


async def worker_ids(client: SluiceClient) -> list[str]:
    """Identities of the workers polling the task queue (Temporal knows them; Sluice keeps none)."""
    response = await client.client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.client.namespace,
            task_queue=TaskQueue(name=client.task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return sorted({p.identity for p in response.pollers})


def worker_label(client: SluiceClient) -> str:
    """The worker id shown in status: tasks run on any worker of the queue, named by the queue."""
    return f"sluice@{client.task_queue}"


class Envelope(BaseModel):
    """RocketMQ Connect's success body."""

    status: int = 200
    body: Any


class RocketMQError(BaseModel):
    errorCode: int  # noqa: N815 - RocketMQ Connect's field name
    message: str


class KafkaError(BaseModel):
    error_code: int
    message: str


def error_responses(model: type[BaseModel], *codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": model, "description": "error; the message names what is wrong"} for code in codes}
