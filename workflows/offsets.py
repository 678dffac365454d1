"""The connector workflow's offset updates: read, alter and reset committed offsets.

Kept out of workflows/connector.py (a mixin of ConnectorWorkflow) because they are a separate
concern: each runs one short activity (activities/offsets.py) against the offset store, so clients
need only Temporal. Alter and reset are allowed only while the connector is STOPPED (Kafka
Connect's rule: a running task would overwrite the change with its next commit), and they run
only once every task has actually stopped; resume and restart are refused until they are done.

New update handlers only: recorded histories, which never call them, replay unchanged.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from sluice.workflows.types import (
        ALTER_OFFSETS_ACTIVITY,
        READ_OFFSETS_ACTIVITY,
        RESET_OFFSETS_ACTIVITY,
        AlterOffsets,
        ConnectorState,
        OffsetsChange,
        TaskState,
        WorkflowState,
    )

OFFSETS_RETRY = RetryPolicy(maximum_attempts=3, non_retryable_error_types=["OffsetsError"])
OFFSETS_TIMEOUT = timedelta(minutes=1)


class OffsetUpdates:
    """Offset updates of ConnectorWorkflow; it provides ``s``, ``_offsets_busy`` and ``_require``."""

    s: WorkflowState
    _offsets_busy: int

    if TYPE_CHECKING:

        def _require(self, *allowed: ConnectorState) -> None: ...

    @workflow.update
    async def offsets(self) -> list[dict[str, object]]:
        """Committed offsets in Kafka Connect's shape; an update, not a query, because reading
        them runs an activity against the offset store."""
        result: list[dict[str, object]] = await workflow.execute_activity(
            READ_OFFSETS_ACTIVITY,
            self.s.name,
            start_to_close_timeout=OFFSETS_TIMEOUT,
            retry_policy=OFFSETS_RETRY,
        )
        return result

    @offsets.validator
    def _validate_offsets(self) -> None:
        self._require(*[s for s in ConnectorState if s != ConnectorState.DELETED])

    @workflow.update
    async def alter_offsets(self, request: AlterOffsets) -> None:
        await self._change_offsets(ALTER_OFFSETS_ACTIVITY, OffsetsChange(self.s.name, request.offsets))

    @alter_offsets.validator
    def _validate_alter_offsets(self, request: AlterOffsets) -> None:
        self._require(ConnectorState.STOPPED)

    @workflow.update
    async def reset_offsets(self) -> None:
        await self._change_offsets(RESET_OFFSETS_ACTIVITY, self.s.name)

    @reset_offsets.validator
    def _validate_reset_offsets(self) -> None:
        self._require(ConnectorState.STOPPED)

    async def _change_offsets(self, activity: str, arg: object) -> None:
        """Run an offset change once every task has really stopped (a stop just accepted may still
        be cancelling them)."""
        self._offsets_busy += 1
        try:
            await workflow.wait_condition(
                lambda: (
                    self.s.state != ConnectorState.STOPPED
                    or all(t.state != TaskState.RUNNING for t in self.s.tasks)
                )
            )
            if self.s.state != ConnectorState.STOPPED:
                raise ApplicationError(
                    f"connector {self.s.name} is {self.s.state}; offsets change only while STOPPED",
                    type="ConnectorStateError",
                )
            try:
                await workflow.execute_activity(
                    activity, arg, start_to_close_timeout=OFFSETS_TIMEOUT, retry_policy=OFFSETS_RETRY
                )
            except ActivityError as exc:
                cause = exc.cause
                kind = cause.type if isinstance(cause, ApplicationError) else None
                message = cause.message if isinstance(cause, ApplicationError) else str(cause or exc)
                raise ApplicationError(message, type=kind or "OffsetsStoreError") from None
        finally:
            self._offsets_busy -= 1

    def _require_offsets_idle(self, operation: str) -> None:
        if self._offsets_busy:
            raise ValueError(
                f"connector {self.s.name}: its offsets are being changed; {operation} after that"
            )
