"""ConnectorWorkflow: the durable lifecycle of one connector.

Lifecycle (one workflow per connector name, id ``sluice-connector-<name>``):
1. validate the config and split it into task configs (an activity: plugin code is not workflow code);
2. run every task as a long-running, heartbeating activity that loops micro-batches and resumes
   from the offset store when retried — on this worker or, after a crash, on another one;
3. react to updates — pause, resume, stop, restart (all or failed tasks), reconfigure, delete —
   by cancelling the task activities between batches and starting them again as the new state asks;
4. continue-as-new when Temporal suggests it, carrying the one state dataclass.

The workflow holds no records and imports no Spark, SQL or network code (sandbox-safe).
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from workflows.types import (
        DELETE_OFFSETS_ACTIVITY,
        RUN_TASK_ACTIVITY,
        VALIDATE_ACTIVITY,
        ConnectorSpec,
        ConnectorState,
        ConnectorStatus,
        DeleteRequest,
        Reconfigure,
        RestartRequest,
        TaskInput,
        TaskState,
        TaskStatus,
        ValidationResult,
    )

CONNECTOR_NAME = SearchAttributeKey.for_keyword("ConnectorName")
CONNECTOR_CLASS = SearchAttributeKey.for_keyword("ConnectorClass")
CONNECTOR_STATE = SearchAttributeKey.for_keyword("ConnectorState")

# Errors a retry cannot fix: the task is marked FAILED and waits for a restart.
NON_RETRYABLE = ["ConfigError", "ConnectorDataError", "DataLossError", "PlanConflictError"]
TASK_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    # Infrastructure failures (a service restarting, a worker dying) retry forever with backoff, as
    # Kafka Connect's workers do; errors a retry cannot fix are non-retryable and fail the task.
    maximum_attempts=0,
    non_retryable_error_types=NON_RETRYABLE,
)


def _heartbeat_timeout(config: dict[str, str]) -> timedelta:
    return timedelta(seconds=float(config.get("task.heartbeat.timeout.s", "10")))


@workflow.defn(name="ConnectorWorkflow")
class ConnectorWorkflow:
    def __init__(self) -> None:
        self.s = ConnectorStatus(name="", config={})
        self._changed = False
        self._delete: DeleteRequest | None = None
        self._restart_all = False

    # ---- run ---------------------------------------------------------------------------------
    @workflow.run
    async def run(self, status: ConnectorStatus) -> ConnectorStatus:
        self.s = status
        if not self.s.connector_class:
            result = await self._validate(self.s.config)
            if result.errors:
                self.s.state = ConnectorState.FAILED
                self.s.error = "invalid configuration: " + "; ".join(result.errors)
                self._publish()
                return self.s
            self._apply_validation(result)
            self.s.state = ConnectorState.RUNNING
        self._publish()

        while True:
            if self._delete is not None:
                return await self._finish_delete(self._delete)
            if self.s.state == ConnectorState.RUNNING and any(
                t.state == TaskState.RUNNING for t in self.s.tasks
            ):
                await self._run_tasks()
            else:
                await workflow.wait_condition(lambda: self._changed or self._should_continue_as_new())
                self._changed = False
            if self._should_continue_as_new() and self._delete is None:
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self.s)

    def _should_continue_as_new(self) -> bool:
        return workflow.info().is_continue_as_new_suggested()

    async def _validate(self, config: dict[str, str]) -> ValidationResult:
        return await workflow.execute_activity(
            VALIDATE_ACTIVITY,
            ConnectorSpec(self.s.name, config),
            result_type=ValidationResult,
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=RetryPolicy(maximum_attempts=5, non_retryable_error_types=NON_RETRYABLE),
        )

    def _apply_validation(self, result: ValidationResult) -> None:
        self.s.connector_class = result.connector_class
        self.s.kind = result.kind
        self.s.task_configs = result.task_configs
        self.s.tasks = [
            TaskStatus(task_id=i, state=TaskState.RUNNING) for i in range(len(result.task_configs))
        ]
        self.s.error = ""

    async def _run_tasks(self) -> None:
        """Run the RUNNING tasks until a control change needs them all stopped."""
        handles: dict[int, workflow.ActivityHandle[object]] = {}
        while True:
            for task in self.s.tasks:
                if task.state == TaskState.RUNNING and task.task_id not in handles:
                    handles[task.task_id] = self._start_task(task)
            self._publish()
            await workflow.wait_condition(
                lambda: (
                    self._changed or any(h.done() for h in handles.values()) or self._should_continue_as_new()
                )
            )
            self._changed = False
            for task_id, handle in list(handles.items()):
                if handle.done():
                    del handles[task_id]
                    self._record_task_end(task_id, handle)
            stop_all = (
                self._delete is not None
                or self._restart_all
                or self.s.state != ConnectorState.RUNNING
                or self._should_continue_as_new()
            )
            if not handles and not any(t.state == TaskState.RUNNING for t in self.s.tasks):
                if all(t.state == TaskState.FAILED for t in self.s.tasks):
                    self.s.state = ConnectorState.FAILED
                    self.s.error = "all tasks failed"
                self._publish()
                return
            if stop_all:
                await self._cancel(handles)
                if self._restart_all:
                    self._restart_all = False
                    for task in self.s.tasks:
                        task.state = TaskState.RUNNING
                        task.error = ""
                    continue
                final = TaskState.PAUSED if self.s.state == ConnectorState.PAUSED else TaskState.STOPPED
                for task in self.s.tasks:
                    if task.state == TaskState.RUNNING:
                        task.state = final
                self._publish()
                return

    def _start_task(self, task: TaskStatus) -> workflow.ActivityHandle[object]:
        task.attempts += 1
        config = self.s.task_configs[task.task_id]
        return workflow.start_activity(
            RUN_TASK_ACTIVITY,
            TaskInput(self.s.name, task.task_id, self.s.kind, config, self.s.generation, len(self.s.tasks)),
            start_to_close_timeout=timedelta(days=3650),
            heartbeat_timeout=_heartbeat_timeout(config),
            retry_policy=TASK_RETRY,
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            activity_id=f"task-{task.task_id}-g{self.s.generation}-a{task.attempts}",
            summary=f"{self.s.name} task {task.task_id}",
        )

    def _task(self, task_id: int) -> TaskStatus:
        """The task's status; a placeholder when a reconfigure removed it while it was stopping."""
        return self.s.tasks[task_id] if task_id < len(self.s.tasks) else TaskStatus(task_id)

    @staticmethod
    def _failure(handle: workflow.ActivityHandle[object]) -> str | None:
        """Why a finished task activity failed; None when it returned or was cancelled."""
        exc = handle.exception()
        if exc is None or isinstance(exc, ActivityError) and isinstance(exc.cause, CancelledError):
            return None
        cause = exc.cause if isinstance(exc, ActivityError) and exc.cause else exc
        return str(cause)[:2000]

    def _record_task_end(self, task_id: int, handle: workflow.ActivityHandle[object]) -> None:
        task = self._task(task_id)
        error = self._failure(handle)
        if error is None:
            task.state = TaskState.STOPPED
        else:
            task.state, task.error = TaskState.FAILED, error

    async def _cancel(self, handles: dict[int, workflow.ActivityHandle[object]]) -> None:
        for handle in handles.values():
            handle.cancel()
        for task_id, handle in handles.items():
            with contextlib.suppress(ActivityError, CancelledError):
                await handle
            # A task that failed while stopping is FAILED; the rest get the connector's final state.
            error = self._failure(handle) if handle.done() else None
            if error is not None:
                task = self._task(task_id)
                task.state, task.error = TaskState.FAILED, error
        handles.clear()

    async def _finish_delete(self, request: DeleteRequest) -> ConnectorStatus:
        if request.delete_offsets:
            await workflow.execute_activity(
                DELETE_OFFSETS_ACTIVITY, self.s.name, start_to_close_timeout=timedelta(minutes=2)
            )
        self.s.state = ConnectorState.DELETED
        for task in self.s.tasks:
            task.state = TaskState.STOPPED
        self._publish()
        return self.s

    # ---- visibility --------------------------------------------------------------------------
    def _publish(self) -> None:
        """Connector state into search attributes and the UI's current details."""
        workflow.upsert_search_attributes(
            [
                CONNECTOR_NAME.value_set(self.s.name),
                CONNECTOR_CLASS.value_set(self.s.connector_class or "unknown"),
                CONNECTOR_STATE.value_set(str(self.s.state)),
            ]
        )
        lines = [f"**{self.s.name}** ({self.s.kind or '?'}: {self.s.connector_class}) — {self.s.state}"]
        if self.s.error:
            lines.append(f"error: {self.s.error}")
        lines += [
            f"- task {t.task_id}: {t.state}" + (f" — {t.error}" if t.error else "") for t in self.s.tasks
        ]
        workflow.set_current_details("\n".join(lines))

    def _poke(self) -> None:
        self._changed = True

    # ---- queries -----------------------------------------------------------------------------
    @workflow.query
    def status(self) -> ConnectorStatus:
        return self.s

    @workflow.query
    def config(self) -> dict[str, str]:
        return self.s.config

    @workflow.query
    def tasks(self) -> list[dict[str, str]]:
        return self.s.task_configs

    # ---- updates -----------------------------------------------------------------------------
    @workflow.update
    async def pause(self) -> ConnectorStatus:
        self.s.state = ConnectorState.PAUSED
        self._poke()
        return self.s

    @pause.validator
    def _validate_pause(self) -> None:
        self._require(ConnectorState.RUNNING, ConnectorState.PAUSED)

    @workflow.update
    async def resume(self) -> ConnectorStatus:
        self.s.state = ConnectorState.RUNNING
        for task in self.s.tasks:
            if task.state in (TaskState.PAUSED, TaskState.STOPPED, TaskState.UNASSIGNED):
                task.state = TaskState.RUNNING
        self._poke()
        return self.s

    @resume.validator
    def _validate_resume(self) -> None:
        self._require(ConnectorState.PAUSED, ConnectorState.STOPPED, ConnectorState.RUNNING)

    @workflow.update
    async def stop(self) -> ConnectorStatus:
        self.s.state = ConnectorState.STOPPED
        self._poke()
        return self.s

    @stop.validator
    def _validate_stop(self) -> None:
        self._require(
            ConnectorState.RUNNING, ConnectorState.PAUSED, ConnectorState.STOPPED, ConnectorState.FAILED
        )

    @workflow.update
    async def restart(self, request: RestartRequest) -> ConnectorStatus:
        self.s.generation += 1
        if request.only_failed:
            for task in self.s.tasks:
                if task.state == TaskState.FAILED:
                    task.state, task.error = TaskState.RUNNING, ""
        else:
            self._restart_all = True
            for task in self.s.tasks:
                if task.state == TaskState.FAILED:
                    task.state, task.error = TaskState.RUNNING, ""
        self.s.state, self.s.error = ConnectorState.RUNNING, ""
        self._poke()
        return self.s

    @restart.validator
    def _validate_restart(self, request: RestartRequest) -> None:
        self._require(
            ConnectorState.RUNNING, ConnectorState.FAILED, ConnectorState.PAUSED, ConnectorState.STOPPED
        )

    @workflow.update
    async def reconfigure(self, request: Reconfigure) -> ConnectorStatus:
        result = await self._validate(request.config)
        if result.errors:
            raise ApplicationError("invalid configuration: " + "; ".join(result.errors), type="ConfigError")
        previous = self.s.state
        self.s.config = dict(request.config)
        self.s.generation += 1
        self._restart_all = previous == ConnectorState.RUNNING
        self._apply_validation(result)
        if previous != ConnectorState.RUNNING:
            for task in self.s.tasks:
                task.state = TaskState.STOPPED if previous == ConnectorState.STOPPED else TaskState.PAUSED
        self._poke()
        return self.s

    @reconfigure.validator
    def _validate_reconfigure(self, request: Reconfigure) -> None:
        self._require(
            ConnectorState.RUNNING, ConnectorState.PAUSED, ConnectorState.STOPPED, ConnectorState.FAILED
        )
        if not request.config.get("connector.class"):
            raise ValueError("reconfigure: connector.class is required")

    @workflow.update
    async def delete(self, request: DeleteRequest) -> None:
        self._delete = request
        self._poke()

    def _require(self, *allowed: ConnectorState) -> None:
        if self._delete is not None or self.s.state == ConnectorState.DELETED:
            raise ValueError(f"connector {self.s.name} is being deleted")
        if self.s.state not in allowed:
            raise ValueError(
                f"connector {self.s.name} is {self.s.state}; this needs one of {[str(a) for a in allowed]}"
            )
