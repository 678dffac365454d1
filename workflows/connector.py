"""ConnectorWorkflow: the durable lifecycle of one connector.

Lifecycle (one workflow per connector name, id ``sluice-connector-<name>``):
1. validate the config and split it into task configs (an activity: plugin code is not workflow
   code); the activity also hands back the typed options the workflow uses (heartbeat timeout,
   retry budget), so workflow code parses nothing a user wrote. Any invalid config ends FAILED;
2. run every task as a long-running, heartbeating activity that loops micro-batches and resumes
   from the offset store when started again — on this worker or, after a crash, on another one.
   The activity gets one attempt; the workflow retries it (workflows/tasks.py) so status can show
   the attempt, the last error and whether a retry is pending;
3. react to updates — pause, resume, stop, restart (all or failed tasks), reconfigure, delete —
   by cancelling the task activities between batches and starting them again as the new state asks;
4. continue-as-new when Temporal suggests it: the task activities are cancelled between batches,
   every task keeps its state (RUNNING stays RUNNING) and the one state dataclass, pending control
   requests included, is carried into the new run, which starts the RUNNING tasks again.

The workflow holds no records and imports no Spark, SQL or network code (sandbox-safe).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from sluice.workflows import search_attributes as sa
    from sluice.workflows import start_input
    from sluice.workflows import tasks as task_rules
    from sluice.workflows.checks import validate_in_workflow
    from sluice.workflows.failures import NON_RETRYABLE_ERRORS, Failure, FailureKind, classify, clip
    from sluice.workflows.offsets import OffsetUpdates
    from sluice.workflows.status_text import details
    from sluice.workflows.types import (
        DELETE_OFFSETS_ACTIVITY,
        NUDGE_TASKS_ACTIVITY,
        RUN_TASK_ACTIVITY,
        ConnectorState,
        ConnectorStatus,
        DeleteRequest,
        Reconfigure,
        RestartRequest,
        TaskInput,
        TaskOptions,
        TaskReport,
        TaskState,
        TaskStatus,
        ValidationResult,
        WorkflowState,
    )

# Behaviour changes since histories recorded by 0.1 (tests/workflows/histories/connector_lifecycle.json):
# search attributes upserted only when they change; typed options fetched for state that lacks them.
PATCH_PUBLISH_ON_CHANGE = "sluice-publish-on-change"
PATCH_TYPED_OPTIONS = "sluice-typed-options"
PATCH_LOST_WORKER_RETRY = "sluice-lost-worker-retries-at-once"
PATCH_NUDGE_TASKS = "sluice-nudge-tasks-before-waiting-for-them"
PATCH_RECONFIGURE_STARTS_FAILED = "sluice-reconfigure-starts-a-failed-connector"
NUDGE_TIMEOUT = timedelta(seconds=5)

# One attempt: the workflow retries the task itself (workflows/tasks.py) so status tells the truth.
TASK_RETRY = RetryPolicy(maximum_attempts=1, non_retryable_error_types=list(NON_RETRYABLE_ERRORS))

Handles = dict[int, workflow.ActivityHandle[object]]


@workflow.defn(name="ConnectorWorkflow")
class ConnectorWorkflow(OffsetUpdates):
    @workflow.init
    def __init__(self, state: WorkflowState | ConnectorStatus | Any = None) -> None:
        """State from the input before any handler runs: an update that arrives with the start (a
        ``stop`` right after ``create``) sees the connector's real name and state.

        ``Any`` last: plain JSON that fits neither dataclass (``temporal workflow start`` with a
        missing ``config``, no input at all) arrives raw and the connector ends FAILED naming each
        field (workflows/start_input.py) instead of its first workflow task failing in a loop.
        """
        self._bad_input = not isinstance(state, ConnectorStatus)
        if isinstance(state, WorkflowState):
            self.s = state
        elif isinstance(state, ConnectorStatus):
            self.s = WorkflowState(**vars(state))
        else:
            self.s = start_input.failed_state(state, workflow.info().workflow_id)
        self.s.name = self.s.name or start_input.name_from(None, workflow.info().workflow_id)
        self._published: tuple[str, str, str, str] | None = None
        self._offsets_busy = 0  # offset changes in flight (workflows/offsets.py)

    # ---- run ---------------------------------------------------------------------------------
    @workflow.run
    async def run(self, state: WorkflowState | ConnectorStatus | Any = None) -> ConnectorStatus:
        """Start from a client's ConnectorStatus(name, config) or the state a previous run carried
        (``__init__`` has taken it; updates accepted since then are already in ``self.s``).

        Temporal decodes the input as the first type of the union that fits: always WorkflowState,
        whose extra fields all have defaults; the union lets clients pass a plain ConnectorStatus.
        """
        if self._bad_input:
            self._publish()
            return self.s.view()
        if not self.s.connector_class:
            result = await self._validate(self.s.config)
            if result.errors:
                self.s.state = ConnectorState.FAILED
                self.s.error = clip("invalid configuration: " + "; ".join(result.errors))
                self._publish()
                return self.s.view()
            self._apply_validation(result)
            if self.s.state == ConnectorState.UNASSIGNED:
                self.s.state = ConnectorState.RUNNING
            else:  # paused or stopped while it was being validated: its tasks wait for a resume
                held = TaskState.PAUSED if self.s.state == ConnectorState.PAUSED else TaskState.STOPPED
                for task in self.s.tasks:
                    task.state = held
        elif self.s.options is None and workflow.patched(PATCH_TYPED_OPTIONS):
            result = await self._validate(self.s.config)
            self.s.options = result.options
        self._publish()

        while True:
            if self.s.delete_request is not None:
                return await self._finish_delete(self.s.delete_request)
            if self.s.state == ConnectorState.RUNNING and any(
                t.state == TaskState.RUNNING for t in self.s.tasks
            ):
                await self._run_tasks()
            else:
                self._settle()
                await workflow.wait_condition(lambda: self.s.changed or self._should_continue_as_new())
                self.s.changed = False
            if self._should_continue_as_new() and self.s.delete_request is None:
                await workflow.wait_condition(workflow.all_handlers_finished)
                if self.s.delete_request is None:
                    workflow.continue_as_new(self.s)

    def _should_continue_as_new(self) -> bool:
        info = workflow.info()
        limit = self.s.continue_as_new_after_events
        return info.is_continue_as_new_suggested() or (
            limit > 0 and info.get_current_history_length() >= limit
        )

    async def _validate(self, config: dict[str, object]) -> ValidationResult:
        """Validate and split ``config`` (workflows/checks.py); every outcome is a result."""
        return await validate_in_workflow(self.s.name, config)

    def _apply_validation(self, result: ValidationResult) -> None:
        self.s.connector_class = result.connector_class
        self.s.kind = result.kind
        self.s.task_configs = result.task_configs
        self.s.options = result.options
        self.s.tasks = [
            TaskStatus(task_id=i, state=TaskState.RUNNING) for i in range(len(result.task_configs))
        ]
        self.s.error = ""

    @property
    def _options(self) -> TaskOptions:
        return self.s.options or task_rules.legacy_options(len(self.s.tasks))

    def _settle(self) -> None:
        """A connector that is not RUNNING has no RUNNING task (e.g. paused just before continue-as-new)."""
        if self.s.state not in (ConnectorState.PAUSED, ConnectorState.STOPPED):
            return
        final = TaskState.PAUSED if self.s.state == ConnectorState.PAUSED else TaskState.STOPPED
        moved = [t for t in self.s.tasks if t.state == TaskState.RUNNING]
        for task in moved:
            task_rules.stopped(task, final)
        if moved:
            self._publish()

    async def _run_tasks(self) -> None:
        """Run the RUNNING tasks until a control change (or continue-as-new) needs them all stopped."""
        handles: Handles = {}
        while True:
            now = workflow.now()
            # Started even if a handler has just paused or stopped the connector: the wait below
            # sees the change at once and the start and its cancel never leave this workflow task
            # (histories recorded by 0.1 number their activities this way).
            for task in self.s.tasks:
                if (
                    task.state == TaskState.RUNNING
                    and task.task_id not in handles
                    and task_rules.due(task, now)
                ):
                    handles[task.task_id] = self._start_task(task)
            self._publish()
            await self._wait(
                lambda: (
                    self.s.changed
                    or any(h.done() for h in handles.values())
                    or self._should_continue_as_new()
                ),
                task_rules.next_wakeup(self.s.tasks, set(handles), self._options, workflow.now()),
            )
            self.s.changed = False
            for task_id, handle in list(handles.items()):
                if handle.done():
                    del handles[task_id]
                    self._record_task_end(task_id, handle.exception())
            now = workflow.now()
            if any(
                [task_rules.recovered(t, self._options, now) for t in self.s.tasks if t.task_id in handles]
            ):
                self._publish()
            stop_all = (
                self.s.delete_request is not None
                or self.s.restart_all
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
                if self.s.restart_all:
                    self.s.restart_all = False
                    for task in self.s.tasks:
                        task.state = TaskState.RUNNING
                        task_rules.reset(task)
                    continue
                if self.s.state == ConnectorState.RUNNING and self.s.delete_request is None:
                    return  # continue-as-new: every task keeps its state; the next run restarts them
                final = TaskState.PAUSED if self.s.state == ConnectorState.PAUSED else TaskState.STOPPED
                for task in self.s.tasks:
                    if task.state == TaskState.RUNNING:
                        task_rules.stopped(task, final)
                self._publish()
                return

    @staticmethod
    async def _wait(condition: Callable[[], bool], timeout: timedelta | None) -> None:
        if timeout is None:
            await workflow.wait_condition(condition)
            return
        with contextlib.suppress(asyncio.TimeoutError):
            await workflow.wait_condition(condition, timeout=timeout)

    def _start_task(self, task: TaskStatus) -> workflow.ActivityHandle[object]:
        task_rules.started(task, workflow.now())
        config = self.s.task_configs[task.task_id]
        return workflow.start_activity(
            RUN_TASK_ACTIVITY,
            TaskInput(
                self.s.name,
                task.task_id,
                self.s.kind,
                config,
                self.s.generation,
                len(self.s.tasks),
                attempt=max(1, task.attempt),
                lease_timeout_s=self._options.heartbeat_timeout_s,
            ),
            start_to_close_timeout=timedelta(days=3650),
            heartbeat_timeout=timedelta(
                seconds=task_rules.backstop_timeout_s(self._options.heartbeat_timeout_s)
            ),
            retry_policy=TASK_RETRY,
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            activity_id=f"task-{task.task_id}-g{self.s.generation}-a{task.attempts}",
            summary=f"{self.s.name} task {task.task_id}",
        )

    def _task(self, task_id: int) -> TaskStatus:
        """The task's status; a placeholder when a reconfigure removed it while it was stopping."""
        return self.s.tasks[task_id] if task_id < len(self.s.tasks) else TaskStatus(task_id)

    def _record_task_end(self, task_id: int, exc: BaseException | None) -> None:
        task = self._task(task_id)
        failure = classify(exc)
        if failure.worker_lost and not workflow.patched(PATCH_LOST_WORKER_RETRY):
            failure = dataclasses.replace(failure, worker_lost=False)  # recorded before: it waited
        if failure.kind == FailureKind.STOPPED:
            task_rules.stopped(task, TaskState.STOPPED)
        else:
            task_rules.failed(task, failure, self._options, workflow.now())

    async def _cancel(self, handles: Handles) -> None:
        for handle in handles.values():
            handle.cancel()
        if handles and workflow.patched(PATCH_NUDGE_TASKS):
            await self._nudge_tasks()
        for task_id, handle in handles.items():
            with contextlib.suppress(ActivityError, CancelledError):
                await handle
            # A task that failed while stopping keeps that failure; the rest keep their state.
            failure = classify(handle.exception()) if handle.done() else Failure(FailureKind.STOPPED)
            if failure.kind != FailureKind.STOPPED:
                task_rules.failed(self._task(task_id), failure, self._options, workflow.now())
            else:
                self._task(task_id).running_since = ""
        handles.clear()

    async def _nudge_tasks(self) -> None:
        """Make the tasks beat every second for a while, so that the cancels sent with this
        workflow task reach idle ones, which beat every 2 minutes, within a second (activities.nudges).
        Only speed: a nudge that fails or times out leaves the cancel to the next idle beat."""
        with contextlib.suppress(ActivityError):
            await workflow.execute_local_activity(
                NUDGE_TASKS_ACTIVITY,
                self.s.name,
                start_to_close_timeout=NUDGE_TIMEOUT,
                retry_policy=RetryPolicy(maximum_attempts=1),
            )

    async def _finish_delete(self, request: DeleteRequest) -> ConnectorStatus:
        if request.delete_offsets:
            await workflow.execute_activity(
                DELETE_OFFSETS_ACTIVITY, self.s.name, start_to_close_timeout=timedelta(minutes=2)
            )
        self.s.state = ConnectorState.DELETED
        for task in self.s.tasks:
            task_rules.stopped(task, TaskState.STOPPED)
        self._publish()
        return self.s.view()

    # ---- visibility --------------------------------------------------------------------------
    def _publish(self) -> None:
        """Connector state into search attributes and the UI's current details."""
        s = self.s
        values = (s.name, s.connector_class or "unknown", str(s.state), s.kind or "unknown")
        if values != self._published or not workflow.patched(PATCH_PUBLISH_ON_CHANGE):
            self._published = values
            workflow.upsert_search_attributes(
                [key.value_set(value) for key, value in zip(sa.ALL, values, strict=True)]
            )
        workflow.set_current_details(details(self.s))

    def _poke(self) -> None:
        self.s.changed = True

    # ---- queries and signals -----------------------------------------------------------------
    @workflow.query
    def status(self) -> ConnectorStatus:
        return self.s.view()

    @workflow.query
    def config(self) -> dict[str, str]:
        return self.s.config

    @workflow.query
    def tasks(self) -> list[dict[str, str]]:
        return self.s.task_configs

    @workflow.signal
    def report_task(self, report: TaskReport) -> None:
        """A task activity says what it is doing; reports from an older generation are ignored."""
        if report.generation != self.s.generation or not 0 <= report.task_id < len(self.s.tasks):
            return
        task = self.s.tasks[report.task_id]
        if task.state == TaskState.RUNNING:
            if report.metrics is not None:
                task.metrics = report.metrics
            else:
                task.detail = clip(report.detail, 1_000)
            workflow.set_current_details(details(self.s))

    # ---- updates -----------------------------------------------------------------------------
    @workflow.update
    async def pause(self) -> ConnectorStatus:
        self.s.state = ConnectorState.PAUSED
        self._poke()
        return self.s.view()

    @pause.validator
    def _validate_pause(self) -> None:
        self._require(ConnectorState.UNASSIGNED, ConnectorState.RUNNING, ConnectorState.PAUSED)

    @workflow.update
    async def resume(self) -> ConnectorStatus:
        self.s.state = ConnectorState.RUNNING
        for task in self.s.tasks:
            if task.state in (TaskState.PAUSED, TaskState.STOPPED, TaskState.UNASSIGNED):
                task.state = TaskState.RUNNING
                task_rules.reset(task)
        self._poke()
        return self.s.view()

    @resume.validator
    def _validate_resume(self) -> None:
        self._require(ConnectorState.PAUSED, ConnectorState.STOPPED, ConnectorState.RUNNING)
        self._require_offsets_idle("resume")

    @workflow.update
    async def stop(self) -> ConnectorStatus:
        self.s.state = ConnectorState.STOPPED
        self._poke()
        return self.s.view()

    @stop.validator
    def _validate_stop(self) -> None:
        self._require(
            ConnectorState.UNASSIGNED,
            ConnectorState.RUNNING,
            ConnectorState.PAUSED,
            ConnectorState.STOPPED,
            ConnectorState.FAILED,
        )

    @workflow.update
    async def restart(self, request: RestartRequest | None = None) -> ConnectorStatus:
        """All tasks; ``{"only_failed": true}`` only the FAILED ones (no input: all)."""
        request = request or RestartRequest()
        self.s.generation += 1
        if not request.only_failed:
            # Running tasks are cancelled and started again; the others start.
            self.s.restart_all = any(t.state == TaskState.RUNNING for t in self.s.tasks)
        for task in self.s.tasks:
            idle = task.state != TaskState.RUNNING
            if task.state == TaskState.FAILED or (idle and not request.only_failed):
                task.state = TaskState.RUNNING
                task_rules.reset(task)
        self.s.state, self.s.error = ConnectorState.RUNNING, ""
        self._poke()
        return self.s.view()

    @restart.validator
    def _validate_restart(self, request: RestartRequest | None = None) -> None:
        self._require(
            ConnectorState.RUNNING, ConnectorState.FAILED, ConnectorState.PAUSED, ConnectorState.STOPPED
        )
        self._require_offsets_idle("restart")

    @workflow.update
    async def reconfigure(self, request: Reconfigure) -> ConnectorStatus:
        result = await self._validate(request.config)  # type: ignore[arg-type]
        if result.errors:
            raise ApplicationError(
                clip("invalid configuration: " + "; ".join(result.errors)), type="ConfigError"
            )
        previous = self.s.state
        self.s.config = dict(request.config)
        self.s.generation += 1
        self.s.restart_all = previous == ConnectorState.RUNNING
        self._apply_validation(result)
        if previous == ConnectorState.FAILED and workflow.patched(PATCH_RECONFIGURE_STARTS_FAILED):
            # A new config is how a failed connector is usually fixed (data.loss=skip, a corrected
            # address): as in Kafka Connect, its tasks start again with it.
            for task in self.s.tasks:
                task.state = TaskState.RUNNING
                task_rules.reset(task)
            self.s.state, self.s.error = ConnectorState.RUNNING, ""
        elif previous != ConnectorState.RUNNING:
            for task in self.s.tasks:
                task.state = TaskState.STOPPED if previous == ConnectorState.STOPPED else TaskState.PAUSED
        self._poke()
        return self.s.view()

    @reconfigure.validator
    def _validate_reconfigure(self, request: Reconfigure) -> None:
        self._require(
            ConnectorState.RUNNING, ConnectorState.PAUSED, ConnectorState.STOPPED, ConnectorState.FAILED
        )
        if not (request.config.get("connector.class") or request.config.get("connector-class")):
            raise ValueError("reconfigure: connector.class is required")

    @workflow.update
    async def delete(self, request: DeleteRequest | None = None) -> None:
        """Stop every task and end the workflow; offsets are deleted unless ``delete_offsets`` is false."""
        self.s.delete_request = request or DeleteRequest()
        self._poke()

    def _require(self, *allowed: ConnectorState) -> None:
        if self.s.delete_request is not None or self.s.state == ConnectorState.DELETED:
            raise ValueError(f"connector {self.s.name} is being deleted")
        if self.s.state not in allowed:
            raise ValueError(
                f"connector {self.s.name} is {self.s.state}; this needs one of {[str(a) for a in allowed]}"
            )
