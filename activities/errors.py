"""How task failures reach Temporal: retryable, or FAILED until someone restarts the task.

The decision is connectors.errors.classify's; this module only dresses it as the ApplicationError
the workflow's retry policy reads (its ``type`` is one of the workflow's non-retryable types, or
the original class name for a retriable error). Messages stay short (Temporal keeps failures in
workflow history, and a 6 MB record once made one "exceed the size limit"): the cause is kept in
the message, the full traceback goes to the worker log.
"""

from __future__ import annotations

import logging

from temporalio.exceptions import ApplicationError

from sluice.connectors.errors import Failure, FailureKind, classify, shorten

log = logging.getLogger(__name__)


def config_error(connector: str, message: str) -> ApplicationError:
    return ApplicationError(
        f"connector {connector}: {shorten(message)}", type=FailureKind.CONFIG.value, non_retryable=True
    )


def failure_error(connector: str, task_id: int, failure: Failure) -> ApplicationError:
    """The ApplicationError of a classified failure, naming the connector and task once."""
    message = failure.message
    if not names_connector(message, connector):
        message = f"connector {connector} task {task_id}: {message}"
    if failure.retriable:
        return ApplicationError(message, type=failure.error_type, non_retryable=False)
    return ApplicationError(message, type=failure.kind.value, non_retryable=True)


def names_connector(message: str, connector: str) -> bool:
    """Whether ``message`` names ``connector`` already, as the runtime does (``connector orders``)
    or as a connector's own errors do (``connector 'orders'``)."""
    return any(f"connector {name}" in message for name in (connector, repr(connector), f'"{connector}"'))


def task_failure(connector: str, task_id: int, exc: BaseException, attempt: int = 1) -> ApplicationError:
    """Classify ``exc`` (raised in the task's ``attempt``-th attempt) as the error to raise.

    Raise it ``from None``: the chained original would carry a JVM stack trace of many KB into
    Temporal; it is logged here instead.
    """
    if isinstance(exc, ApplicationError):
        return exc
    failure = classify(exc, attempt)
    error = failure_error(connector, task_id, failure)
    log.warning(
        "connector %s task %d attempt %d: %s (%s)",
        connector, task_id, attempt, failure.kind.value,
        "retried" if failure.retriable else "task fails", exc_info=exc,
    )  # fmt: skip
    return error
