"""How task failures reach Temporal: retryable, or FAILED until someone restarts the task."""

from __future__ import annotations

from temporalio.exceptions import ApplicationError


def config_error(connector: str, message: str) -> ApplicationError:
    return ApplicationError(f"connector {connector}: {message}", type="ConfigError", non_retryable=True)


def data_error(connector: str, task_id: int, message: str) -> ApplicationError:
    """A record a converter, transform or sink cannot handle: retrying would fail the same way."""
    return ApplicationError(
        f"connector {connector} task {task_id}: {message}", type="ConnectorDataError", non_retryable=True
    )
