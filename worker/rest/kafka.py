"""Kafka Connect's REST API (the most complete peer), with its status codes.

Served twice: at the root, except the four GET paths RocketMQ Connect also has
(``/connectors/{name}/config|status|tasks``, ``…/tasks/{id}/status``: those answer RocketMQ
Connect's envelope there), and complete under ``/kafka`` so Kafka Connect tools work unchanged
with the base URL ``http://host:8082/kafka``.

Mapping onto Sluice's lifecycle: ``PUT …/stop`` is STOPPED with offsets kept; ``POST …/restart``
restarts all tasks (``onlyFailed=true``: only failed ones); ``POST …/tasks/{id}/restart`` restarts
the failed tasks when that task failed, else every task (Sluice restarts tasks together);
``DELETE /connectors/{name}`` keeps offsets, as Kafka Connect does.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from sluice.activities.offsets import OffsetsFormatError, parse_offsets
from sluice.worker.errors import ConnectorNotFoundError, ConnectorStateError, SluiceError
from sluice.worker.rest import plugins, rocketmq, views
from sluice.worker.rest.common import (
    KafkaError,
    all_statuses,
    check_name,
    check_new_name,
    error_responses,
    worker_label,
)
from sluice.worker.rest.deps import (
    KAFKA_TAG,
    client_of,
    json_body,
    json_request_body,
    parse_json,
    reader,
    string_config,
    writer,
)
from sluice.worker.rest.errors import Flavour, RestError, error_response, status_of

READ = [Depends(reader)]
WRITE = [Depends(writer)]
ROCKETMQ_SHARED = {"config", "status", "tasks", "task_status"}


CONFIG_SCHEMA = {"type": "object", "additionalProperties": {"type": "string"}}
CONFIG_BODY = json_request_body(CONFIG_SCHEMA)
PATCH_BODY = json_request_body({"type": "object"})
CREATE_BODY = json_request_body(
    {
        "type": "object",
        "required": ["name", "config"],
        "properties": {
            "name": {"type": "string"},
            "config": CONFIG_SCHEMA,
            "initial_state": {"type": "string", "enum": ["RUNNING", "PAUSED", "STOPPED"]},
        },
        "example": {
            "name": "local-file-source",
            "config": {
                "connector.class": "FileStreamSource",
                "tasks.max": "1",
                "file": "/tmp/test.txt",
                "topic": "connect-test",
            },
        },
    }
)
OFFSETS_BODY = json_request_body(
    {
        "type": "object",
        "required": ["offsets"],
        "properties": {
            "offsets": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["partition", "offset"],
                    "properties": {"partition": {"type": "object"}, "offset": {"type": ["object", "null"]}},
                },
            }
        },
    }
)


def _info_and_status(statuses: list[Any], expand: list[str], worker: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for s in statuses:
        entry: dict[str, Any] = {}
        if "status" in expand:
            entry["status"] = views.kafka_status(s, worker)
        if "info" in expand:
            entry["info"] = views.kafka_info(s)
        out[s.name] = entry
    return out


async def _create(
    request: Request, name: str, config: dict[str, str], initial: str = "RUNNING"
) -> dict[str, Any]:
    client = client_of(request)
    status = await client.create(check_new_name(name), config)
    if not status.kind:  # not validated by the workflow yet: the kind the client's check found
        # connector plugins (~35 ms): loaded on first use, not when the REST app is imported
        from sluice.activities.validation import validate_config

        status.kind = validate_config(name, config).kind
    if initial == "PAUSED":
        status = await client.pause(name)
    elif initial == "STOPPED":
        status = await client.stop(name)
    return views.kafka_info(status)


def _offsets_state_error(exc: ConnectorStateError) -> RestError:
    """Kafka Connect answers 400 when offsets are changed on a connector that is not STOPPED."""
    return RestError(
        400, f"{exc}; connectors must be in the STOPPED state before their offsets can be modified"
    )


def make_router(*, shared_with_rocketmq: bool) -> APIRouter:
    """Every Kafka Connect path; without the four RocketMQ-shared GETs when ``shared_with_rocketmq``."""
    router = APIRouter(
        tags=[KAFKA_TAG], responses=error_responses(KafkaError, 400, 401, 404, 409, 413, 500, 503)
    )

    @router.get("/", dependencies=READ)
    async def server_info() -> dict[str, str]:
        return {"version": plugins.version(), "commit": "sluice", "kafka_cluster_id": "sluice"}

    @router.get("/connectors", dependencies=READ, response_model=None)
    async def list_connectors(
        request: Request,
        expand: Annotated[list[str], Query(description="status and/or info")] = [],  # noqa: B006
    ) -> list[str] | dict[str, Any]:
        client = client_of(request)
        unknown = sorted(set(expand) - {"status", "info"})
        if unknown:
            raise RestError(400, f"expand takes 'status' and 'info', got {unknown}")
        if not expand:
            return await client.list()
        return _info_and_status(await all_statuses(client), expand, worker_label(client))

    @router.post("/connectors", dependencies=WRITE, status_code=201, openapi_extra=CREATE_BODY)
    async def create_connector(request: Request) -> dict[str, Any]:
        body = await json_body(request)
        if not isinstance(body, dict):
            raise RestError(400, "request body must be a JSON object {name, config, initial_state}")
        name, raw_config = body.get("name"), body.get("config")
        if not isinstance(name, str) or not name:
            raise RestError(400, "field 'name' is required (a non-empty string)")
        if raw_config is None:
            raise RestError(400, f"connector {name}: field 'config' is required")
        config = string_config(raw_config, f"connector {name}: config")
        if config.get("name", name) != name:
            raise RestError(400, f"connector {name}: config 'name' {config['name']!r} differs from 'name'")
        initial = body.get("initial_state", "RUNNING")
        if initial not in ("RUNNING", "PAUSED", "STOPPED"):
            raise RestError(400, f"connector {name}: initial_state must be RUNNING, PAUSED or STOPPED")
        config.pop("name", None)
        return await _create(request, name, config, initial)

    either = {
        "anyOf": [{"$ref": "#/components/schemas/KafkaError"}, {"$ref": "#/components/schemas/RocketMQError"}]
    }
    both_errors: dict[int | str, dict[str, Any]] = {
        code: {
            "description": "error: Kafka's body, or RocketMQ's with ?config=",
            "content": {"application/json": {"schema": either}},
        }
        for code in (400, 401, 404, 409, 413, 500, 503)
    }

    @router.get("/connectors/{name}", dependencies=READ, response_model=None, responses=both_errors)
    async def connector_info(
        request: Request,
        name: str,
        config: Annotated[
            str | None, Query(description="RocketMQ Connect's create: the config as JSON")
        ] = None,
    ) -> Any:
        """Kafka Connect's connector info; with ``?config=<json>`` RocketMQ Connect's create (enveloped)."""
        if config is None:
            return views.kafka_info(await client_of(request).status(check_name(name)))
        try:
            await writer(request)
            parsed = string_config(parse_json(config, "query param 'config'"), "config")
            return (await rocketmq.create(request, name, parsed)).model_dump()
        except RestError as exc:
            return error_response(Flavour.ROCKETMQ, exc.status, exc.message)
        except SluiceError as exc:
            return error_response(Flavour.ROCKETMQ, status_of(exc), str(exc))

    if not shared_with_rocketmq:

        @router.get("/connectors/{name}/config", dependencies=READ)
        async def connector_config(request: Request, name: str) -> dict[str, Any]:
            status = await client_of(request).status(check_name(name))
            return views.mask(status.config)

        @router.get("/connectors/{name}/status", dependencies=READ)
        async def connector_status(request: Request, name: str) -> dict[str, Any]:
            client = client_of(request)
            return views.kafka_status(await client.status(check_name(name)), worker_label(client))

        @router.get("/connectors/{name}/tasks", dependencies=READ)
        async def connector_tasks(request: Request, name: str) -> list[dict[str, Any]]:
            return views.tasks_view(await client_of(request).status(check_name(name)))

        @router.get("/connectors/{name}/tasks/{task}/status", dependencies=READ)
        async def task_status(request: Request, name: str, task: int) -> dict[str, Any]:
            client = client_of(request)
            status = await client.status(check_name(name))
            found = [t for t in status.tasks if t.task_id == task]
            if not found:
                raise RestError(404, f"connector {name} has no task {task}")
            return views.kafka_task_status(found[0], worker_label(client))

    @router.put("/connectors/{name}/config", dependencies=WRITE, openapi_extra=CONFIG_BODY)
    async def put_config(request: Request, name: str, response: Response) -> dict[str, Any]:
        """Create (201) or replace (200) the connector's config."""
        config = string_config(await json_body(request), f"connector {name}: config")
        if config.get("name", name) != name:
            raise RestError(400, f"connector {name}: config 'name' {config['name']!r} differs from the path")
        config.pop("name", None)
        client = client_of(request)
        try:
            await client.status(check_name(name))
        except ConnectorNotFoundError:
            response.status_code = 201
            return await _create(request, name, config)
        return views.kafka_info(await client.reconfigure(name, config))

    @router.patch("/connectors/{name}/config", dependencies=WRITE, openapi_extra=PATCH_BODY)
    async def patch_config(request: Request, name: str) -> dict[str, Any]:
        """Merge keys into the config; a key set to null is removed."""
        patch = await json_body(request)
        if not isinstance(patch, dict):
            raise RestError(400, f"connector {name}: the patch must be a JSON object")
        removed = {k for k, v in patch.items() if v is None}
        changes = string_config({k: v for k, v in patch.items() if v is not None}, f"connector {name}: patch")
        client = client_of(request)
        current = await client.config(check_name(name))
        merged = {k: v for k, v in {**current, **changes}.items() if k not in removed and k != "name"}
        return views.kafka_info(await client.reconfigure(name, merged))

    @router.put("/connectors/{name}/pause", dependencies=WRITE, status_code=202)
    async def pause(request: Request, name: str) -> None:
        await client_of(request).pause(check_name(name))

    @router.put("/connectors/{name}/resume", dependencies=WRITE, status_code=202)
    async def resume(request: Request, name: str) -> None:
        await client_of(request).resume(check_name(name))

    @router.put("/connectors/{name}/stop", dependencies=WRITE, status_code=204)
    async def stop(request: Request, name: str) -> None:
        """STOPPED: no task runs, config and offsets kept (offsets may then be altered)."""
        await client_of(request).stop(check_name(name))

    @router.post("/connectors/{name}/restart", dependencies=WRITE, status_code=202, response_model=None)
    async def restart(
        request: Request,
        name: str,
        includeTasks: bool = False,
        onlyFailed: bool = False,  # noqa: N803
    ) -> Any:
        client = client_of(request)
        status = await client.restart(check_name(name), only_failed=onlyFailed)
        if not includeTasks and not onlyFailed:
            return Response(status_code=204)
        return views.kafka_status(status, worker_label(client))

    @router.post("/connectors/{name}/tasks/{task}/restart", dependencies=WRITE, status_code=204)
    async def restart_task(request: Request, name: str, task: int) -> None:
        client = client_of(request)
        status = await client.status(check_name(name))
        found = [t for t in status.tasks if t.task_id == task]
        if not found:
            raise RestError(404, f"connector {name} has no task {task}")
        await client.restart(name, only_failed=found[0].state == "FAILED")

    @router.delete("/connectors/{name}", dependencies=WRITE, status_code=204)
    async def delete(request: Request, name: str) -> None:
        """Delete the connector; its offsets are kept (Kafka Connect's behaviour)."""
        await client_of(request).delete(check_name(name), delete_offsets=False)

    @router.get("/connectors/{name}/offsets", dependencies=READ)
    async def get_offsets(request: Request, name: str) -> dict[str, Any]:
        return {"offsets": await client_of(request).offsets(check_name(name))}

    @router.patch("/connectors/{name}/offsets", dependencies=WRITE, openapi_extra=OFFSETS_BODY)
    async def alter_offsets(request: Request, name: str) -> dict[str, str]:
        body = await json_body(request)
        if not isinstance(body, dict) or "offsets" not in body:
            raise RestError(400, f'connector {name}: the body must be {{"offsets": [...]}}')
        try:
            parse_offsets(name, body["offsets"])
        except OffsetsFormatError as exc:
            raise RestError(400, str(exc)) from None
        client = client_of(request)
        check_name(name)
        try:
            await client.alter_offsets(name, body["offsets"])
        except ConnectorStateError as exc:
            raise _offsets_state_error(exc) from None
        return {"message": "The offsets for this connector have been altered successfully"}

    @router.delete("/connectors/{name}/offsets", dependencies=WRITE)
    async def reset_offsets(request: Request, name: str) -> dict[str, str]:
        client = client_of(request)
        try:
            await client.reset_offsets(check_name(name))
        except ConnectorStateError as exc:
            raise _offsets_state_error(exc) from None
        return {"message": "The offsets for this connector have been reset successfully"}

    @router.get("/connector-plugins", dependencies=READ)
    async def connector_plugins(connectorsOnly: bool = True) -> list[dict[str, str]]:  # noqa: N803
        return [{"class": n, "type": k, "version": plugins.version()} for n, k in plugins.plugins()]

    @router.get("/connector-plugins/{plugin}/config", dependencies=READ)
    async def plugin_config(plugin: str) -> list[dict[str, Any]]:
        return plugins.config_definitions(plugin)

    @router.put(
        "/connector-plugins/{plugin}/config/validate",
        dependencies=READ,
        openapi_extra=CONFIG_BODY,
    )
    async def validate(request: Request, plugin: str) -> dict[str, Any]:
        config = string_config(await json_body(request), f"plugin {plugin}: config")
        return plugins.validate(plugin, config)

    return router


root_router = make_router(shared_with_rocketmq=True)
prefixed_router = make_router(shared_with_rocketmq=False)
