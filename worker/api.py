"""The light client's public names: what ``from sluice import …`` offers (looked up here lazily).

``Client`` (async) and ``SyncClient`` talk to Temporal only; a Sluice worker on the task queue runs
the connectors and answers what needs plugin code (config validation, secret field names). The
worker itself, its plugins, the CLI and the REST server come with ``pip install 'sluice[worker]'``;
nothing imported here needs them (tests/client installs the wheel without PySpark and checks).
"""

from sluice.worker.client import Client, ConnectorConfig
from sluice.worker.client_sync import SyncClient
from sluice.worker.errors import (
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
from sluice.workflows.types import (
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
