"""RocketMQ Connect's REST paths, bodies and ``{"status": 200, "body": …}`` envelope.

Shapes follow the responses recorded from RocketMQ Connect's runtime (shared/reference). Where
Sluice differs, on purpose:

- errors carry their HTTP status (RocketMQ Connect answers 200 with ``errorCode`` in the body);
- ``GET /connectors/{name}/stop`` DELETES the connector, as in RocketMQ Connect (offsets are kept,
  so a connector created again under the name resumes); Kafka's ``PUT …/stop`` only stops it;
- an unknown connector is 404 everywhere (RocketMQ Connect "deletes" one that never existed);
- ``/plugin/config/validate`` validates (RocketMQ Connect answers "not implemented").

``GET /connectors/{name}`` (with ``?config=``) lives in worker/rest/kafka.py, which shares the path.
"""

from __future__ import annotations

import contextlib
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from sluice.worker.errors import ConnectorNotFoundError
from sluice.worker.rest import plugins, views
from sluice.worker.rest.common import (
    Envelope,
    RocketMQError,
    all_statuses,
    check_name,
    check_new_name,
    error_responses,
    worker_ids,
    worker_label,
)
from sluice.worker.rest.deps import (
    ROCKETMQ_TAG,
    client_of,
    json_body,
    json_request_body,
    reader,
    string_config,
    writer,
)
from sluice.worker.rest.errors import RestError

router = APIRouter(
    tags=[ROCKETMQ_TAG],
    responses=error_responses(RocketMQError, 400, 401, 404, 409, 413, 500, 503),
)
READ = [Depends(reader)]
WRITE = [Depends(writer)]
CONFIG_BODY = json_request_body(
    {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "example": {
            "connector.class": "org.apache.rocketmq.connect.file.FileSourceConnector",
            "filename": "/tmp/in.txt",
            "connect.topicname": "fileTopic",
        },
    }
)


def ok(body: Any) -> Envelope:
    return Envelope(status=200, body=body)


async def create(request: Request, name: str, config: dict[str, str]) -> Envelope:
    """RocketMQ Connect's create: the body echoes the config (secrets masked)."""
    await client_of(request).create(check_new_name(name), config)
    return ok(views.mask(config))


@router.post("/connectors/{name}", dependencies=WRITE, openapi_extra=CONFIG_BODY)
async def create_connector(request: Request, name: str) -> Envelope:
    """Create a connector from a flat config map (RocketMQ Connect's create)."""
    return await create(request, name, string_config(await json_body(request), "config"))


@router.get("/connectors/list", dependencies=READ)
async def list_connectors(request: Request) -> Envelope:
    client = client_of(request)
    worker = worker_label(client)
    return ok(
        {
            s.name: {"status": views.rmq_status(s, worker), "info": views.rmq_info(s)}
            for s in await all_statuses(client)
        }
    )


async def _lifecycle_all(request: Request, action: str, done: str) -> Envelope:
    client = client_of(request)
    names = await client.list()
    if not names:
        return ok(f"No connector needs to be {done}, please add connector first")
    for name in names:
        with contextlib.suppress(ConnectorNotFoundError):  # deleted since the listing
            if action == "stop":
                await client.delete(name, delete_offsets=False)
            else:
                await getattr(client, action)(name)
    return ok(f"All connectors {done} successfully")


@router.get("/connectors/stop/all", dependencies=WRITE)
async def stop_all(request: Request) -> Envelope:
    """DELETES every connector (RocketMQ Connect's meaning of stop); offsets are kept."""
    return await _lifecycle_all(request, "stop", "stopped")


@router.get("/connectors/pause/all", dependencies=WRITE)
async def pause_all(request: Request) -> Envelope:
    return await _lifecycle_all(request, "pause", "paused")


@router.get("/connectors/resume/all", dependencies=WRITE)
async def resume_all(request: Request) -> Envelope:
    return await _lifecycle_all(request, "resume", "resumed")


@router.get("/connectors/{name}/config", dependencies=READ)
async def connector_config(request: Request, name: str) -> Envelope:
    return ok(views.rmq_info(await client_of(request).status(check_name(name))))


@router.get("/connectors/{name}/status", dependencies=READ)
async def connector_status(request: Request, name: str) -> Envelope:
    client = client_of(request)
    return ok(views.rmq_status(await client.status(check_name(name)), worker_label(client)))


@router.get("/connectors/{name}/tasks", dependencies=READ)
async def connector_tasks(request: Request, name: str) -> Envelope:
    return ok(views.tasks_view(await client_of(request).status(check_name(name))))


@router.get("/connectors/{name}/tasks/{task}/status", dependencies=READ)
async def task_status(request: Request, name: str, task: int) -> Envelope:
    client = client_of(request)
    status = await client.status(check_name(name))
    found = [t for t in status.tasks if t.task_id == task]
    if not found:
        raise RestError(404, f"connector {name} has no task {task}")
    return ok(views.rmq_task_status(found[0], worker_label(client)))


@router.get("/connectors/{name}/stop", dependencies=WRITE)
async def stop_connector(request: Request, name: str) -> Envelope:
    """DELETES the connector (RocketMQ Connect's meaning); its offsets are kept. To stop and keep
    a connector use Kafka Connect's ``PUT /connectors/{name}/stop``."""
    await client_of(request).delete(check_name(name), delete_offsets=False)
    return ok(f"Connector [{name}] deleted successfully")


@router.get("/connectors/{name}/pause", dependencies=WRITE)
async def pause_connector(request: Request, name: str) -> Envelope:
    await client_of(request).pause(check_name(name))
    return ok(f"Connector [{name}] paused successfully")


@router.get("/connectors/{name}/resume", dependencies=WRITE)
async def resume_connector(request: Request, name: str) -> Envelope:
    await client_of(request).resume(check_name(name))
    return ok(f"Connector [{name}] resumed successfully")


@router.get("/getClusterInfo", dependencies=READ)
async def cluster_info(request: Request) -> Envelope:
    """The workers polling Sluice's task queue (Temporal's view)."""
    return ok(await worker_ids(client_of(request)))


@router.get("/allocated/connectors", dependencies=READ)
async def allocated_connectors(request: Request) -> Envelope:
    return ok({s.name: views.mask(s.config) for s in await all_statuses(client_of(request))})


@router.get("/allocated/tasks", dependencies=READ)
async def allocated_tasks(request: Request) -> Envelope:
    return ok(views.allocated_tasks(await all_statuses(client_of(request))))


def _plugin_list() -> list[dict[str, str]]:
    return [
        {"className": name, "type": kind.upper(), "version": plugins.version()}
        for name, kind in plugins.plugins()
    ]


@router.get("/plugin/list", dependencies=READ)
async def plugin_list() -> Envelope:
    return ok(_plugin_list())


@router.get("/plugin/list/connectors", dependencies=READ)
async def plugin_list_connectors() -> Envelope:
    return ok(_plugin_list())


@router.get("/plugin/reload", dependencies=WRITE)
async def plugin_reload() -> Envelope:
    """Plugins are discovered on every call (entry points), so there is nothing to reload."""
    return ok("Plugin reload successfully")


@router.get("/plugin/config", dependencies=READ)
async def plugin_config(plugin: Annotated[str, Query(description="connector class or alias")]) -> Envelope:
    return ok(plugins.config_definitions(plugin))


@router.post("/plugin/config/validate", dependencies=READ, openapi_extra=CONFIG_BODY)
async def plugin_config_validate_post(request: Request) -> Envelope:
    """Per-field errors of a config (POST form of the PUT below)."""
    return await plugin_config_validate(request)


@router.put("/plugin/config/validate", dependencies=READ, openapi_extra=CONFIG_BODY)
async def plugin_config_validate(request: Request) -> Envelope:
    """Per-field errors of a config (Kafka Connect's ConfigInfos shape inside the envelope)."""
    config = string_config(await json_body(request), "config")
    plugin = config.get("connector.class") or config.get("connector-class")
    if not plugin:
        raise RestError(400, "field 'connector.class' is required")
    try:
        return ok(plugins.validate(plugin, config))
    except RestError as exc:  # an unknown class given in the body is the body's fault
        raise RestError(400, f"field 'connector.class': {exc.message}") from None
