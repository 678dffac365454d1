"""`sluice rest`: serve the REST API with uvicorn on SLUICE_REST_HOST:SLUICE_REST_PORT."""

from __future__ import annotations

import uvicorn

from sluice.worker.rest.app import create_app
from sluice.worker.rest.deps import RestSettings
from sluice.worker.settings import settings


def rest_settings() -> RestSettings:
    s = settings()
    return RestSettings(
        token=s.rest_token.get_secret_value() if s.rest_token is not None else None,
        auth_reads=s.rest_auth_reads,
        max_body_bytes=s.rest_max_body_bytes,
    )


def serve(host: str | None = None, port: int | None = None) -> int:
    """Run until interrupted; 127.0.0.1:8082 unless configured (RocketMQ Connect's port)."""

    s = settings()
    uvicorn.run(
        create_app(rest_settings()),
        host=host or s.rest_host,
        port=port or s.rest_port,
        log_level="info",
        server_header=False,
    )
    return 0
