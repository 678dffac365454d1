"""What the two APIs show of a connector: RocketMQ Connect's and Kafka Connect's JSON shapes,
built from the workflow's :class:`ConnectorStatus`, with secrets masked in every one of them.

The shapes follow the recorded RocketMQ Connect responses (shared/reference) and Kafka Connect's
REST documentation; only the worker id differs (Sluice has no per-task worker: Temporal places
task activities on any worker of the task queue, so the id is ``sluice@<task queue>``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.connectors.secrets import redact
from sluice.workflows.types import ConnectorStatus, TaskState, TaskStatus


def mask(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with secret values replaced: the connector's declared secret fields (when its
    class loads) and every secret-looking key."""
    # connector plugins (~35 ms): loaded on first use, not when the REST app is imported
    from sluice.connectors.plugins import load_connector_class

    secret: frozenset[str] = frozenset()
    cls_name = str(config.get("connector.class") or config.get("connector-class") or "")
    if cls_name:
        try:
            cls = load_connector_class(cls_name)
            fields = cls.full_config_def()
            secret = fields.secret_names | {a for f in fields.fields if f.secret for a in f.aliases}
        except Exception:  # noqa: BLE001 - an unloadable class still gets key-pattern masking
            secret = frozenset()
    return redact(config, secret)


def kind_upper(status: ConnectorStatus) -> str:
    return status.kind.upper() if status.kind else "UNKNOWN"


def trace(task: TaskStatus) -> str | None:
    return task.error or None


def connector_trace(status: ConnectorStatus) -> str | None:
    return status.error or None


def task_ids(status: ConnectorStatus) -> list[dict[str, Any]]:
    count = max(len(status.task_configs), len(status.tasks))
    return [{"connector": status.name, "task": i} for i in range(count)]


# ---- RocketMQ Connect ------------------------------------------------------------------------
def partition_lag(task: TaskStatus) -> dict[str, dict[str, float]] | None:
    """Each partition's lag in records and seconds, for a task that tells it (a replicator's
    source queues): an extra field of the task's status, which Connect clients pass over."""
    m = task.metrics
    if m is None or not m.lag_seconds:
        return None
    return {
        p: {"records": m.partition_lag.get(p, -1), "seconds": s} for p, s in sorted(m.lag_seconds.items())
    }


def rmq_task_status(task: TaskStatus, worker: str) -> dict[str, Any]:
    doc = {"state": str(task.state), "trace": trace(task), "workerId": worker, "id": task.task_id}
    lag = partition_lag(task)
    return {**doc, "lag": lag} if lag else doc


def rmq_status(status: ConnectorStatus, worker: str) -> dict[str, Any]:
    return {
        "name": status.name,
        "connector": {"state": str(status.state), "trace": connector_trace(status), "workerId": worker},
        "tasks": [rmq_task_status(t, worker) for t in status.tasks],
        "type": kind_upper(status),
    }


def rmq_info(status: ConnectorStatus) -> dict[str, Any]:
    return {
        "name": status.name,
        "config": mask(status.config),
        "tasks": task_ids(status),
        "type": kind_upper(status),
    }


def tasks_view(status: ConnectorStatus) -> list[dict[str, Any]]:
    """Both APIs: ``[{"id": {"connector", "task"}, "config": {...}}]``."""
    return [
        {"id": {"connector": status.name, "task": i}, "config": mask(config)}
        for i, config in enumerate(status.task_configs)
    ]


_ALLOCATED = {
    TaskState.RUNNING: "runningTasks",
    TaskState.PAUSED: "stoppedTasks",
    TaskState.STOPPED: "stoppedTasks",
    TaskState.FAILED: "errorTasks",
    TaskState.UNASSIGNED: "pendingTasks",
}


def allocated_tasks(statuses: list[ConnectorStatus]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {
        k: [] for k in ("pendingTasks", "stoppedTasks", "errorTasks", "stoppingTasks", "runningTasks")
    }
    for status in statuses:
        for task in status.tasks:
            config = status.task_configs[task.task_id] if task.task_id < len(status.task_configs) else {}
            out[_ALLOCATED[task.state]].append(
                {"connectorName": status.name, "config": mask(config), "taskState": str(task.state)}
            )
    return out


# ---- Kafka Connect ---------------------------------------------------------------------------
def kafka_task_status(task: TaskStatus, worker: str) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": task.task_id, "state": str(task.state), "worker_id": worker}
    if task.error:
        doc["trace"] = task.error
    lag = partition_lag(task)
    if lag:
        doc["lag"] = lag
    return doc


def kafka_status(status: ConnectorStatus, worker: str) -> dict[str, Any]:
    connector: dict[str, Any] = {"state": str(status.state), "worker_id": worker}
    if status.error:
        connector["trace"] = status.error
    return {
        "name": status.name,
        "connector": connector,
        "tasks": [kafka_task_status(t, worker) for t in status.tasks],
        "type": status.kind or "unknown",
    }


def kafka_info(status: ConnectorStatus) -> dict[str, Any]:
    return {
        "name": status.name,
        "config": mask({**status.config, "name": status.name}),
        "tasks": task_ids(status),
        "type": status.kind or "unknown",
    }
