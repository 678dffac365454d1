"""The values that cross the Temporal boundary: workflow state, update inputs, activity inputs.

Plain dataclasses of JSON-friendly fields only (Temporal's default converter serialises them), so
both the sandboxed workflow and the activities import this module cheaply. Never put records here:
only configs, plans and positions (Temporal's payload limit is 2 MiB).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any


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
NUDGE_TASKS_ACTIVITY = "nudge_connector_tasks"
READ_OFFSETS_ACTIVITY = "read_connector_offsets"
ALTER_OFFSETS_ACTIVITY = "alter_connector_offsets"
RESET_OFFSETS_ACTIVITY = "reset_connector_offsets"
SECRET_FIELDS_ACTIVITY = "connector_secret_fields"
# ApplicationError type of a malformed offsets alter request (activities/offsets.py raises it).
OFFSETS_ERROR = "OffsetsError"


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
class TaskOptions:
    """The runtime settings the workflow itself uses, typed by the validate activity.

    Workflow code never parses a config string: these come out of the declared fields
    (``task.heartbeat.timeout.s``, ``errors.retry.timeout``, ``errors.retry.delay.max.ms``).
    """

    heartbeat_timeout_s: float = 10.0
    retry_timeout_ms: int = -1  # -1: retry retriable failures without limit (Kafka Connect's default)
    retry_delay_max_ms: int = 30_000
    task_count: int = 1
    # Not a user field: a retried task running this long without failing has recovered (tests shorten it).
    healthy_after_s: float = 60.0


@dataclass(frozen=True)
class ValidationResult:
    connector_class: str
    kind: str  # "source" | "sink"
    errors: list[str] = field(default_factory=list)
    task_configs: list[dict[str, str]] = field(default_factory=list)
    # None only in results recorded by versions before 0.2 (replayed histories).
    options: TaskOptions | None = None


@dataclass(frozen=True)
class TaskInput:
    connector: str
    task_id: int
    kind: str
    config: dict[str, str]
    generation: int
    task_count: int = 1
    # The workflow's attempt of this task in its current failure streak (1 = first try): the
    # workflow retries tasks itself, so Temporal's own activity attempt is always 1.
    attempt: int = 1
    # Seconds the task's worker may go without renewing its lease before another worker fails the
    # attempt (task.heartbeat.timeout.s; activities.leases); 0: not leased (an older workflow's
    # task, which Temporal's heartbeat timeout alone watches).
    lease_timeout_s: float = 0.0


@dataclass(frozen=True)
class TaskOutcome:
    """What a task activity returns when it ends by itself (bounded sources, tests)."""

    task_id: int
    batches: int
    records: int


@dataclass(frozen=True)
class TaskMetrics:
    """A running task's throughput and backlog, reported after batches (status, Temporal UI)."""

    last_batch: int = -1  # id of the last committed batch
    last_batch_records: int = 0
    last_batch_time: str = ""  # ISO-8601 UTC, when it committed
    records: int = 0  # records moved by the current task activity
    records_per_s: float = 0.0  # since the previous report
    lag: int = -1  # units between the committed and the latest positions; -1: unknown
    lag_unit: str = "records"  # or "bytes" (file sources count bytes)
    #: per partition, for a task that tells its lag in time (a replicator's source queues): units
    #: and seconds behind (since the oldest message not copied yet was stored)
    partition_lag: dict[str, int] = field(default_factory=dict)
    lag_seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class TaskStatus:
    """One task as the workflow sees it; times are ISO-8601 UTC from ``workflow.now()``."""

    task_id: int
    state: TaskState = TaskState.UNASSIGNED
    error: str = ""  # why the task is FAILED; empty otherwise
    attempts: int = 0  # task activities started for this task, ever (names the activity ids)
    attempt: int = 0  # current attempt of the running task: 1 = first try, 2+ = retries
    retrying: bool = False  # a retriable failure is being retried (waiting, or the retry runs)
    last_error: str = ""  # the latest failure, kept after recovery
    last_error_time: str = ""
    failing_since: str = ""  # first failure of the current retry streak (errors.retry.timeout)
    next_retry_time: str = ""  # when the waiting retry starts; empty when none waits
    running_since: str = ""  # when the current task activity was started
    detail: str = ""  # what the task reports it is doing (``report_task``), e.g. a file it waits for
    metrics: TaskMetrics | None = None  # the latest metrics report; None before the first batch


@dataclass
class ConnectorStatus:
    """Everything a user sees of a connector (the ``status`` query, printed by the CLI)."""

    name: str
    # Values should be strings; anything else (a JSON number from `temporal workflow start`) is
    # rejected by the workflow as a per-field error instead of failing input decoding in a loop.
    config: dict[str, Any]
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


@dataclass(frozen=True)
class AlterOffsets:
    """Update ``alter_offsets``: Kafka Connect's ``{"partition": …, "offset": …}`` entries, exactly as
    the ``offsets`` update returns them (``offset`` None forgets that partition). Parsed by the
    activity, never by workflow code."""

    offsets: list[dict[str, Any]]


@dataclass(frozen=True)
class OffsetsChange:
    """Input of the alter-offsets activity: which connector, and the entries as the user gave them."""

    connector: str
    offsets: list[dict[str, Any]]


@dataclass
class WorkflowState(ConnectorStatus):
    """The workflow's one state: the status plus pending control requests and internal settings.

    Carried whole through continue-as-new, so nothing a user asked for is lost between runs. A
    plain ConnectorStatus (what clients start the workflow with) decodes into it unchanged.
    """

    options: TaskOptions | None = None
    changed: bool = False  # a control request arrived that the task loop has not acted on yet
    restart_all: bool = False  # restart every task once the running ones have stopped
    delete_request: DeleteRequest | None = None
    # Test-only: continue-as-new once history reaches this many events (0: Temporal's suggestion).
    continue_as_new_after_events: int = 0

    def view(self) -> ConnectorStatus:
        """The user-facing part, without the internals."""
        return ConnectorStatus(**{f.name: getattr(self, f.name) for f in fields(ConnectorStatus)})


@dataclass(frozen=True)
class TaskReport:
    """Signal ``report_task``: a task says what it is doing (an empty detail clears it), or, with
    ``metrics``, how it is doing (the detail is then left as it is)."""

    task_id: int
    generation: int
    detail: str = ""
    metrics: TaskMetrics | None = None
