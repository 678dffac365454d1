"""The values that cross the Temporal boundary: workflow state, update inputs, activity inputs.

Plain dataclasses of JSON-friendly fields only (Temporal's default converter serialises them), so
both the sandboxed workflow and the activities import this module cheaply. Never put records here:
only configs, plans and positions (Temporal's payload limit is 2 MiB).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class ConnectorState(StrEnum):
    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"
    DELETED = "DELETED"


class TaskState(StrEnum):
    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"


# Activity names: the workflow schedules by name so it never imports activity code.
VALIDATE_ACTIVITY = "validate_connector"
RUN_TASK_ACTIVITY = "run_connector_task"
DELETE_OFFSETS_ACTIVITY = "delete_connector_offsets"


def workflow_id_for(connector: str) -> str:
    """The stable workflow id of a connector: one lifecycle per name."""
    return f"sluice-connector-{connector}"


@dataclass(frozen=True)
class ConnectorSpec:
    """A connector as the user declared it. Secret values should be provider references
    (``${env:NAME}``, ``${file:/path:key}``), resolved only inside activities; plaintext secrets
    are protected in history only when the encrypting payload codec is on."""

    name: str
    config: dict[str, str]


@dataclass(frozen=True)
class ValidationResult:
    connector_class: str
    kind: str  # "source" | "sink"
    errors: list[str] = field(default_factory=list)
    task_configs: list[dict[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class TaskInput:
    connector: str
    task_id: int
    kind: str
    config: dict[str, str]
    generation: int
    task_count: int = 1


@dataclass(frozen=True)
class TaskOutcome:
    """What a task activity returns when it ends by itself (bounded sources, tests)."""

    task_id: int
    batches: int
    records: int


@dataclass
class TaskStatus:
    task_id: int
    state: TaskState = TaskState.UNASSIGNED
    error: str = ""
    attempts: int = 0


@dataclass
class ConnectorStatus:
    """Everything the workflow knows; its only state, carried through continue-as-new."""

    name: str
    config: dict[str, str]
    state: ConnectorState = ConnectorState.UNASSIGNED
    connector_class: str = ""
    kind: str = ""
    error: str = ""
    tasks: list[TaskStatus] = field(default_factory=list)
    task_configs: list[dict[str, str]] = field(default_factory=list)
    generation: int = 0


@dataclass(frozen=True)
class RestartRequest:
    only_failed: bool = False


@dataclass(frozen=True)
class DeleteRequest:
    delete_offsets: bool = True


@dataclass(frozen=True)
class Reconfigure:
    config: dict[str, str]
