"""How the connector workflow classifies a task activity's failure, and the backoff it retries with.

One place for the list of errors no retry can fix (the activities raise them as ApplicationError
types; the workflow fails the task at once) and for the rule that keeps stored errors small: a
status lives in workflow state, queries and history, all under Temporal's payload limits, so a long
message keeps its head and tail — the cause and where it happened — and drops the middle.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    FailureError,
    TimeoutType,
)
from temporalio.exceptions import TimeoutError as ActivityTimeoutError

# ApplicationError types a retry cannot fix: the task is FAILED until a user restarts it.
NON_RETRYABLE_ERRORS: tuple[str, ...] = (
    "ConfigError",
    "ConnectorDataError",
    "DataLossError",
    "PlanConflictError",
)
# A SIGTERMed worker hands its task over: retried at once, not an error.
WORKER_SHUTDOWN = "WorkerShutdown"
# Another worker failed the attempt: its own worker stopped renewing its lease (activities.leases).
WORKER_LOST = "WorkerLost"

MAX_ERROR_CHARS = 4_000
_CUT = "\n… [{} characters cut] …\n"

FIRST_RETRY_DELAY = timedelta(seconds=1)


class FailureKind(StrEnum):
    STOPPED = "stopped"  # returned or cancelled: no failure
    HANDOVER = "handover"  # worker shutdown
    RETRIABLE = "retriable"
    FATAL = "fatal"


@dataclass(frozen=True)
class Failure:
    kind: FailureKind
    message: str = ""
    #: the task's worker stopped renewing its lease or heartbeating (killed, hung, cut off): its first
    #: retry need not wait
    worker_lost: bool = False


def clip(message: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``message`` within ``limit`` characters, keeping its head and its tail."""
    if len(message) <= limit:
        return message
    marker = _CUT.format(len(message))  # at least as long as the marker finally used
    head = (limit - len(marker)) * 5 // 8  # the cause usually leads; where it happened often trails
    tail = limit - len(marker) - head
    return message[:head] + _CUT.format(len(message) - head - tail) + message[-tail:]


def classify(exc: BaseException | None) -> Failure:
    """What a finished task activity's exception means for the task."""
    if exc is None:
        return Failure(FailureKind.STOPPED)
    cause = exc.cause if isinstance(exc, ActivityError) and exc.cause is not None else exc
    if isinstance(cause, CancelledError):
        return Failure(FailureKind.STOPPED)
    if isinstance(cause, ApplicationError):
        if cause.type == WORKER_SHUTDOWN:
            return Failure(FailureKind.HANDOVER, clip(str(cause)))
        if cause.type in NON_RETRYABLE_ERRORS or cause.non_retryable:
            return Failure(FailureKind.FATAL, clip(str(cause)))
    text = str(cause) or type(cause).__name__
    if isinstance(cause, FailureError) and cause.cause is not None:  # e.g. a heartbeat timeout's reason
        text = f"{text}: {cause.cause}"
    lost = (isinstance(cause, ActivityTimeoutError) and cause.type == TimeoutType.HEARTBEAT) or (
        isinstance(cause, ApplicationError) and cause.type == WORKER_LOST
    )
    return Failure(FailureKind.RETRIABLE, clip(text), worker_lost=lost)


def retry_delay(attempt: int, max_delay_ms: int) -> timedelta:
    """Backoff before attempt ``attempt`` (2 = first retry): 1 s doubling, capped at the maximum."""
    delay = FIRST_RETRY_DELAY * (2 ** min(max(0, attempt - 2), 20))
    return min(delay, timedelta(milliseconds=max_delay_ms))
