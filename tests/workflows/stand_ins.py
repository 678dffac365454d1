"""Same-named stand-ins for the connector activities, driven by keys of the (stand-in) config.

- ``fail.task=<id>``: that task raises a non-retryable data error naming a record position (gen 0);
- ``flaky.task=<id>`` with ``flaky.times=<n>``: that task fails retriably on its first n attempts;
- ``shutdown.task=<id>``: that task hands over once, as a SIGTERMed worker does (WorkerShutdown);
- ``validate.raises``: the validate activity itself raises;
- ``retry.delay.max.ms``, ``retry.timeout.ms``, ``healthy.after.s``: the typed options validation returns.
Other tasks heartbeat until cancelled. Every start is recorded with its workflow run id.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass

from temporalio import activity
from temporalio.exceptions import ApplicationError

from sluice.workflows.types import (
    DELETE_OFFSETS_ACTIVITY,
    NUDGE_TASKS_ACTIVITY,
    RUN_TASK_ACTIVITY,
    VALIDATE_ACTIVITY,
    ConnectorSpec,
    TaskInput,
    TaskOptions,
    TaskOutcome,
    ValidationResult,
)


@dataclass(frozen=True)
class Start:
    connector: str
    task_id: int
    generation: int
    run_id: str


starts: list[Start] = []
deleted: list[str] = []
nudged: list[str] = []
_failures: Counter[tuple[str, int, str]] = Counter()


def starts_of(connector: str) -> list[Start]:
    return [s for s in starts if s.connector == connector]


@activity.defn(name=VALIDATE_ACTIVITY)
async def validate_stand_in(spec: ConnectorSpec) -> ValidationResult:
    if spec.config.get("validate.raises"):
        raise RuntimeError("plugin exploded while validating")
    if spec.config.get("broken"):
        return ValidationResult("stand-in", "source", [f"connector {spec.name}: broken: must not be set"])
    count = int(spec.config.get("tasks.max", "2"))
    options = TaskOptions(
        heartbeat_timeout_s=1,  # cancellation reaches a heartbeating task within ~0.8 s
        retry_timeout_ms=int(spec.config.get("retry.timeout.ms", "-1")),
        retry_delay_max_ms=int(spec.config.get("retry.delay.max.ms", "30000")),
        task_count=count,
        healthy_after_s=float(spec.config.get("healthy.after.s", "60")),
    )
    configs = [{**spec.config, "task": str(i)} for i in range(count)]
    return ValidationResult("stand-in", "source", [], configs, options)


def _once(inp: TaskInput, what: str, times: int) -> bool:
    key = (inp.connector, inp.task_id, what)
    if _failures[key] < times:
        _failures[key] += 1
        return True
    return False


@activity.defn(name=RUN_TASK_ACTIVITY)
async def run_task_stand_in(inp: TaskInput) -> TaskOutcome:
    starts.append(Start(inp.connector, inp.task_id, inp.generation, activity.info().workflow_run_id))
    mine = str(inp.task_id)
    if inp.config.get("fail.task") == mine and inp.generation == 0:
        raise ApplicationError(
            f"connector {inp.connector} task {inp.task_id}: record at lines/broker-a:0@42 cannot be cast",
            type="ConnectorDataError",
            non_retryable=True,
        )
    if inp.config.get("flaky.task") == mine and _once(inp, "flaky", int(inp.config.get("flaky.times", "1"))):
        text = inp.config.get("flaky.message", "broker 127.0.0.1:10911 refused the connection")
        raise ApplicationError(text, type="ConnectionError")
    if inp.config.get("shutdown.task") == mine and _once(inp, "shutdown", 1):
        raise ApplicationError("worker shutting down after batch 3", type="WorkerShutdown")
    while True:
        activity.heartbeat()
        await asyncio.sleep(0.2)


@activity.defn(name=DELETE_OFFSETS_ACTIVITY)
async def delete_offsets_stand_in(connector: str) -> None:
    deleted.append(connector)


@activity.defn(name=NUDGE_TASKS_ACTIVITY)
async def nudge_tasks_stand_in(connector: str) -> None:
    nudged.append(connector)


STAND_INS = [validate_stand_in, run_task_stand_in, delete_offsets_stand_in, nudge_tasks_stand_in]
