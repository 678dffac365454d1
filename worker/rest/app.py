"""The ASGI application: both APIs, bearer-token checks, the body-size limit and error bodies.

Holds no state of its own: ``app.state.client`` is a :class:`SluiceClient`, made at start-up
(``sluice rest``) or handed in (tests). Every error leaves as the owning flavour's error body with
a real HTTP status (worker/rest/errors.py); nothing is changed by a request that fails.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse

from worker.client import SluiceClient
from worker.errors import SluiceError, one_line
from worker.rest.errors import Flavour, RestError, error_response, status_of
from worker.rest.plugins import version

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


async def _connect_from_settings() -> SluiceClient:
    from worker.settings import settings as env

    s = env()
    return await SluiceClient.connect(s.temporal_address, s.temporal_namespace, s.task_queue)


def create_app(
    settings: RestSettings | None = None,
    client: SluiceClient | None = None,
    connect: Callable[[], Awaitable[SluiceClient]] | None = None,
) -> FastAPI:
    """The app. Without ``client`` it connects when it starts, on the server's own event loop
    (``connect``, by default to worker.settings' Temporal address and task queue)."""
    from worker.rest import kafka, rocketmq

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if client is None:
            app.state.client = await (connect or _connect_from_settings)()
        yield

    app = FastAPI(
        title="Sluice REST API",
        version=version(),
        description=(
            "RocketMQ Connect's REST API (its paths, bodies and `{status, body}` envelope) and Kafka "
            "Connect's REST API over Sluice's connector workflows. Errors carry their real HTTP "
            "status (RocketMQ Connect answers 200). `GET /connectors/{name}/stop` DELETES the "
            "connector, as in RocketMQ Connect; `PUT /connectors/{name}/stop` stops it, keeping it."
        ),
        lifespan=lifespan,
        openapi_tags=[
            {"name": ROCKETMQ_TAG, "description": "RocketMQ Connect-compatible paths (enveloped bodies)"},
            {"name": KAFKA_TAG, "description": "Kafka Connect-compatible paths"},
        ],
    )
    app.state.settings = settings or RestSettings()
    app.state.client = client
    app.include_router(rocketmq.router)  # first: /connectors/list before /connectors/{name}
    app.include_router(kafka.root_router)
    app.include_router(kafka.prefixed_router, prefix="/kafka")

    @app.exception_handler(RestError)
    async def _rest_error(request: Request, exc: RestError) -> JSONResponse:
        return error_response(flavour_of(request), exc.status, exc.message)

    @app.exception_handler(SluiceError)
    async def _sluice_error(request: Request, exc: SluiceError) -> JSONResponse:
        return error_response(flavour_of(request), status_of(exc), str(exc))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}" for e in exc.errors()
        )
        return error_response(flavour_of(request), 400, f"invalid request: {problems}")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(flavour_of(request), exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        return error_response(flavour_of(request), 500, f"unexpected error: {one_line(exc)}")

    return app
