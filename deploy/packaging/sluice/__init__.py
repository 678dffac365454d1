"""Sluice's Python client: manage connectors from any service with ``pip install sluice``.

``Client`` (async) and ``SyncClient`` talk to Temporal only; a Sluice worker on the task queue runs
the connectors and answers what needs plugin code (config validation, secret field names). The
worker itself, its plugins, the CLI and the REST server come with ``pip install 'sluice[worker]'``.

In the wheel this package holds the repository's folders as ``sluice.workflows``, ``sluice.worker``
… (deploy/packaging/backend.py); in the editable dev install it is this file over the top-level ones.
"""

from worker.client import Client, ConnectorConfig
from worker.client_sync import SyncClient
from worker.errors import (
    ConnectorConfigError,
    ConnectorError,
    ConnectorExistsError,
    ConnectorNotAnsweringError,
    ConnectorNotFoundError,
    ConnectorOffsetsError,
    ConnectorStateError,
    SluiceError,
    TemporalUnavailableError,
)
from workflows.types import (
    ConnectorState,
    ConnectorStatus,
    TaskMetrics,
    TaskState,
    TaskStatus,
    ValidationResult,
)

__all__ = [
    "Client",
    "ConnectorConfig",
    "ConnectorConfigError",
    "ConnectorError",
    "ConnectorExistsError",
    "ConnectorNotAnsweringError",
    "ConnectorNotFoundError",
    "ConnectorOffsetsError",
    "ConnectorState",
    "ConnectorStateError",
    "ConnectorStatus",
    "SluiceError",
    "SyncClient",
    "TaskMetrics",
    "TaskState",
    "TaskStatus",
    "TemporalUnavailableError",
    "ValidationResult",
]
