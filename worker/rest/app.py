"""The ASGI application: both APIs, bearer-token checks, the body-size limit and error bodies.

Holds no state of its own: ``app.state.client`` is a :class:`SluiceClient`, made at start-up
(``sluice rest``) or handed in (tests). Every error leaves as the owning flavour's error body with
a real HTTP status (worker/rest/errors.py); nothing is changed by a request that fails.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse

from sluice.worker.client import SluiceClient
from sluice.worker.errors import SluiceError, one_line
from sluice.worker.rest import backfills, kafka, metrics, rocketmq, verify
from sluice.worker.rest.deps import KAFKA_TAG, ROCKETMQ_TAG, RestSettings, flavour_of
from sluice.worker.rest.errors import RestError, error_response, status_of
from sluice.worker.rest.plugins import version


async def _connect_from_settings() -> SluiceClient:
    # pydantic-settings (~20 ms): only this default connect needs it, not an app given a client
    from sluice.worker.settings import settings as env

    s = env()
    return await SluiceClient.connect(s.temporal_address, s.temporal_namespace, s.task_queue)


def create_app(
    settings: RestSettings | None = None,
    client: SluiceClient | None = None,
    connect: Callable[[], Awaitable[SluiceClient]] | None = None,
) -> FastAPI:
    """The app. Without ``client`` it connects when it starts, on the server's own event loop
    (``connect``, by default to worker.settings' Temporal address and task queue)."""

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
    app.include_router(metrics.router)
    app.include_router(verify.router)
    app.include_router(backfills.router)
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
