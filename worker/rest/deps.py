"""What the routes of both APIs share: bearer-token checks, the JSON body within the size limit,
flat config maps, the flavour of a request (for its error body) and the app's client."""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from sluice.worker.client import SluiceClient
from sluice.worker.rest.errors import Flavour, RestError

ROCKETMQ_TAG = "RocketMQ Connect"
KAFKA_TAG = "Kafka Connect"

bearer = HTTPBearer(auto_error=False, description="SLUICE_REST_TOKEN, when the server has one")


@dataclass(frozen=True)
class RestSettings:
    """What the app needs; ``sluice rest`` fills it from worker.settings (SLUICE_REST_*)."""

    token: str | None = None
    auth_reads: bool = False
    max_body_bytes: int = 1_048_576


def flavour_of(request: Request) -> Flavour:
    route = request.scope.get("route")
    tags = getattr(route, "tags", None) or []
    return Flavour.ROCKETMQ if ROCKETMQ_TAG in tags else Flavour.KAFKA


def client_of(request: Request) -> SluiceClient:
    client: SluiceClient = request.app.state.client
    return client


def _check_token(request: Request, credentials: HTTPAuthorizationCredentials | None) -> None:
    token: str | None = request.app.state.settings.token
    if token is None:
        return
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise RestError(401, "this call needs 'Authorization: Bearer <token>' (SLUICE_REST_TOKEN)")
    if not hmac.compare_digest(credentials.credentials.encode(), token.encode()):
        raise RestError(401, "wrong bearer token")


async def writer(request: Request) -> None:
    """Dependency of every call that changes something: the token, when one is configured."""
    _check_token(request, await bearer(request))


async def reader(request: Request) -> None:
    """Dependency of reads: the token only when SLUICE_REST_AUTH_READS is on."""
    if request.app.state.settings.auth_reads:
        _check_token(request, await bearer(request))


async def json_body(request: Request) -> Any:
    """The request's JSON, read within the size limit; 413 past it, 400 naming the problem."""
    limit: int = request.app.state.settings.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RestError(413, f"request body of {declared} bytes is over the limit of {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RestError(413, f"request body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return parse_json(b"".join(chunks), "request body")


def json_request_body(schema: dict[str, Any]) -> dict[str, Any]:
    """A route's ``openapi_extra``: a required JSON body of ``schema``. FastAPI cannot infer it (the
    routes read the raw body to answer bad JSON in their own error shape), and the OpenAPI test
    (schemathesis) sends bodies by it."""
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def parse_json(raw: bytes | str, what: str) -> Any:
    if not raw:
        raise RestError(400, f"{what} is empty; expected JSON")
    try:
        return json.loads(raw)
    except UnicodeDecodeError:
        raise RestError(400, f"{what} is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise RestError(
            400, f"{what} is malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None


def string_config(raw: Any, what: str) -> dict[str, str]:
    """A flat config map with string values; JSON numbers and booleans become their text (both
    peers' configs are string maps), anything nested is a 400 naming the key."""
    if not isinstance(raw, dict):
        raise RestError(400, f"{what} must be a JSON object of config keys, got {type(raw).__name__}")
    out: dict[str, str] = {}
    for key, value in raw.items():
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            out[key] = str(value)
        else:
            raise RestError(400, f"{what}: field {key!r} must be a string, number or boolean, got {value!r}")
    return out


def string_list(body: dict[str, Any], key: str) -> list[str]:
    """Field ``key`` of a JSON body as a list of strings (absent or null: empty); 400 otherwise."""
    value = body.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RestError(400, f"field {key!r} must be a list of strings")
    return value
