"""HTTP errors of the REST API, in the body shape of the flavour that owns the path.

RocketMQ Connect's paths answer ``{"errorCode": N, "message": …}`` and Kafka Connect's
``{"error_code": N, "message": …}``; unlike RocketMQ Connect (which answers HTTP 200 for errors)
the HTTP status is always N, so clients can trust it. No traceback ever reaches a response.
"""

from __future__ import annotations

from enum import StrEnum

from starlette.responses import JSONResponse

from sluice.worker.errors import (
    BackfillNotFoundError,
    BackfillRequestError,
    ConnectorConfigError,
    ConnectorExistsError,
    ConnectorNotAnsweringError,
    ConnectorNotFoundError,
    ConnectorOffsetsError,
    ConnectorStateError,
    SluiceError,
    TemporalUnavailableError,
)


class Flavour(StrEnum):
    ROCKETMQ = "rocketmq"
    KAFKA = "kafka"


class RestError(Exception):
    """An HTTP error with a one-line message that names the connector, field or plugin."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error_response(flavour: Flavour, status: int, message: str) -> JSONResponse:
    key = "errorCode" if flavour == Flavour.ROCKETMQ else "error_code"
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({key: status, "message": " ".join(message.split())}, status, headers=headers)


def status_of(exc: SluiceError) -> int:
    """The HTTP status of a client error (Kafka Connect's choices)."""
    if isinstance(exc, ConnectorNotFoundError | BackfillNotFoundError):
        return 404
    if isinstance(exc, ConnectorExistsError | ConnectorStateError):
        return 409
    if isinstance(exc, ConnectorConfigError | ConnectorOffsetsError | BackfillRequestError):
        return 400
    if isinstance(exc, TemporalUnavailableError | ConnectorNotAnsweringError):
        return 503
    return 500
