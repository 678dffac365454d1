"""The Python client other services use to manage connectors (the CLI is built on it).

Configs are validated here before any workflow starts, so a bad config is rejected with per-field
messages and nothing runs. Every operation is a Temporal update or query on the connector's
workflow; the Temporal UI and CLI see the same state.

Failures are typed (:mod:`worker.errors`) and name the connector: an unknown, deleted or ended
connector is :class:`ConnectorNotFoundError` from every method, a second create of a running
name is :class:`ConnectorExistsError`, an operation the workflow's update validator refuses is
:class:`ConnectorStateError`, and an unreachable frontend is :class:`TemporalUnavailableError` —
never a raw gRPC ``RPCError``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from activities.connector_activities import validate_config
from activities.offsets import OFFSETS_ERROR, OffsetsFormatError, parse_offsets
from activities.validation import secret_fields
from connectors.sealing import Sealer, seal_config
from worker.errors import (
    ConnectorConfigError,
    ConnectorError,
    ConnectorExistsError,
    ConnectorNotAnsweringError,
    ConnectorNotFoundError,
    ConnectorOffsetsError,
    ConnectorStateError,
    TemporalUnavailableError,
)
from workflows import search_attributes, status_text
from workflows.connector import ConnectorWorkflow
from workflows.types import (
    AlterOffsets,
    ConnectorState,
    ConnectorStatus,
    DeleteRequest,
    Reconfigure,
    RestartRequest,
    workflow_id_for,
)

if TYPE_CHECKING:
    from temporalio.runtime import Runtime

__all__ = [
    "ConnectorConfigError",
    "ConnectorError",
    "ConnectorExistsError",
    "ConnectorNotAnsweringError",
    "ConnectorNotFoundError",
    "ConnectorOffsetsError",
    "ConnectorStateError",
    "SluiceClient",
    "TemporalUnavailableError",
]

_UNREACHABLE = (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED)
# A query no worker picked up ends CANCELLED "Timeout expired" after the server's query timeout.
_NO_ANSWER = (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED)


@dataclass
class SluiceClient:
    client: Client
    task_queue: str = "sluice"
    # Seconds a worker has to answer a query or accept an update (ConnectorNotAnsweringError after).
    answer_timeout: float = 30.0
    #: seals literal secrets before a config enters Temporal (connectors.sealing); None: left as given
    sealer: Sealer | None = None

    @classmethod
    async def connect(
        cls,
        address: str,
        namespace: str = "default",
        task_queue: str = "sluice",
        runtime: Runtime | None = None,
    ) -> SluiceClient:
        """Connect; short-lived processes pass a ``worker.temporal_client.OwnedRuntime``'s runtime."""
        from worker.settings import settings
        from worker.temporal_client import connect

        sealer = Sealer(settings().sealing_key())
        return cls(await connect(address, namespace, runtime), task_queue, sealer=sealer)

    def _sealed(self, config: dict[str, str]) -> dict[str, str]:
        """``config`` with literal secrets sealed: they never reach workflow history in plaintext."""
        if self.sealer is None:
            return dict(config)
        return seal_config(config, self.sealer, secret_fields(config))

    def handle(self, name: str) -> WorkflowHandle[Any, Any]:
        return self.client.get_workflow_handle(workflow_id_for(name), result_type=ConnectorStatus)

    @contextlib.contextmanager
    def _errors(self, name: str, operation: str) -> Iterator[None]:
        """Temporal's errors for one connector call, as Sluice's typed, one-line errors."""
        try:
            yield
        except WorkflowAlreadyStartedError as exc:
            raise ConnectorExistsError(name) from exc
        except WorkflowUpdateFailedError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.type == "ConfigError":
                raise ConnectorConfigError(
                    name, [cause.message.removeprefix("invalid configuration: ")]
                ) from exc
            if isinstance(cause, ApplicationError) and cause.type == OFFSETS_ERROR:
                raise ConnectorOffsetsError(name, cause.message) from exc
            raise ConnectorStateError(name, operation, cause) from cause
        except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError) as exc:
            if operation == "query":
                detail = f"no worker answered the query in {self.answer_timeout:g}s"
            else:  # the server keeps an update request: it may still apply once a worker polls
                detail = (
                    f"no worker accepted the {operation} in {self.answer_timeout:g}s; "
                    "the request may still apply when one starts"
                )
            raise ConnectorNotAnsweringError(name, self.task_queue, detail) from exc
        except WorkflowQueryFailedError as exc:
            raise ConnectorError(name, f"{operation} of connector {name} failed: {exc.message}") from exc
        except WorkflowFailureError as exc:
            raise ConnectorError(name, f"connector {name} ended with an error: {exc.cause}") from exc
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND and "namespace" not in exc.message.lower():
                # "workflow not found for ID" (never created) or "already completed" (deleted).
                raise ConnectorNotFoundError(name) from exc
            if exc.status in _NO_ANSWER and operation == "query":
                raise ConnectorNotAnsweringError(name, self.task_queue, exc.message) from exc
            self._raise_if_unreachable(exc, f"{operation} connector {name}")
            raise ConnectorError(name, f"{operation} connector {name} failed: {exc.message}") from exc

    def _raise_if_unreachable(self, exc: RPCError, what: str) -> None:
        if exc.status in _UNREACHABLE:
            address = self.client.service_client.config.target_host
            raise TemporalUnavailableError(address, f"{what}: {exc.message}") from exc

    async def create(self, name: str, config: dict[str, str]) -> ConnectorStatus:
        result = validate_config(name, config)
        if result.errors:
            raise ConnectorConfigError(name, result.errors)
        with self._errors(name, "create"):
            await self.client.start_workflow(
                ConnectorWorkflow.run,
                ConnectorStatus(name=name, config=self._sealed(config)),
                id=workflow_id_for(name),
                task_queue=self.task_queue,
                search_attributes=TypedSearchAttributes(
                    [
                        SearchAttributePair(search_attributes.CONNECTOR_NAME, name),
                        SearchAttributePair(search_attributes.CONNECTOR_CLASS, result.connector_class),
                        SearchAttributePair(search_attributes.CONNECTOR_STATE, "UNASSIGNED"),
                        SearchAttributePair(search_attributes.CONNECTOR_KIND, result.kind),
                    ]
                ),
                static_summary=status_text.summary(name, result.kind, result.connector_class),
            )
        try:
            return await self.status(name)
        except ConnectorNotAnsweringError:
            # Created, but no worker is up yet to answer: report what the workflow starts from.
            return ConnectorStatus(
                name=name, config=dict(config), connector_class=result.connector_class, kind=result.kind
            )

    async def _update(self, name: str, update: str, arg: object = None) -> ConnectorStatus:
        """Run an update by name; the result type is given explicitly so callers get dataclasses.

        Two steps: the update must be *accepted* (its validator run by a worker) within
        ``answer_timeout``, else no worker is there and waiting forever helps no one; its result
        may then take as long as the workflow needs (a delete waits for the current batch).
        """
        args = [] if arg is None else [arg]
        with self._errors(name, update):
            async with asyncio.timeout(self.answer_timeout):
                handle = await self.handle(name).start_update(
                    update,
                    args=args,
                    wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                    result_type=ConnectorStatus,
                )
            result: ConnectorStatus = await handle.result()
        return result

    async def status(self, name: str) -> ConnectorStatus:
        """The connector's state; a deleted connector (its workflow ended) is not found."""
        with self._errors(name, "query"):
            async with asyncio.timeout(self.answer_timeout):
                status: ConnectorStatus = await self.handle(name).query("status", result_type=ConnectorStatus)
        if status.state == ConnectorState.DELETED:
            raise ConnectorNotFoundError(name)
        return status

    async def config(self, name: str) -> dict[str, str]:
        await self.status(name)  # a deleted connector's workflow still answers queries
        with self._errors(name, "query"):
            async with asyncio.timeout(self.answer_timeout):
                return await self.handle(name).query(ConnectorWorkflow.config)

    async def tasks(self, name: str) -> list[dict[str, str]]:
        """The task configs the connector was split into (one per task, by task id)."""
        await self.status(name)
        with self._errors(name, "query"):
            async with asyncio.timeout(self.answer_timeout):
                return await self.handle(name).query(ConnectorWorkflow.tasks)

    async def pause(self, name: str) -> ConnectorStatus:
        return await self._update(name, "pause")

    async def resume(self, name: str) -> ConnectorStatus:
        return await self._update(name, "resume")

    async def stop(self, name: str) -> ConnectorStatus:
        return await self._update(name, "stop")

    async def restart(self, name: str, *, only_failed: bool = False) -> ConnectorStatus:
        return await self._update(name, "restart", RestartRequest(only_failed))

    async def reconfigure(self, name: str, config: dict[str, str]) -> ConnectorStatus:
        result = validate_config(name, config)
        if result.errors:
            raise ConnectorConfigError(name, result.errors)
        return await self._update(name, "reconfigure", Reconfigure(self._sealed(config)))

    async def delete(self, name: str, *, delete_offsets: bool = True) -> None:
        with self._errors(name, "delete"):
            async with asyncio.timeout(self.answer_timeout):
                update = await self.handle(name).start_update(
                    ConnectorWorkflow.delete,
                    DeleteRequest(delete_offsets),
                    wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                )
            await update.result()
            await self.handle(name).result()

    async def offsets(self, name: str) -> list[dict[str, Any]]:
        """Committed offsets, Kafka Connect's shape (activities/offsets.py): one
        ``{"partition": {"partition", "topic"?}, "offset": {"position"}}`` per partition read."""
        result = await self._update_raw(name, "offsets", None, list)
        return list(result)

    async def alter_offsets(self, name: str, offsets: list[dict[str, Any]]) -> None:
        """Set (or, with ``"offset": null``, forget) positions; only while STOPPED, else
        ConnectorStateError. Entries are checked here first: ConnectorOffsetsError names the bad one."""
        try:
            parse_offsets(name, offsets)
        except OffsetsFormatError as exc:
            raise ConnectorOffsetsError(name, str(exc)) from None
        await self._update_raw(name, "alter_offsets", AlterOffsets(list(offsets)), None)

    async def reset_offsets(self, name: str) -> None:
        """Forget every position (read from the start on resume); only while STOPPED."""
        await self._update_raw(name, "reset_offsets", None, None)

    async def _update_raw(self, name: str, update: str, arg: object, result_type: type | None) -> Any:
        """Like ``_update`` for updates that do not answer with a ConnectorStatus."""
        args = [] if arg is None else [arg]
        with self._errors(name, update):
            async with asyncio.timeout(self.answer_timeout):
                handle = await self.handle(name).start_update(
                    update, args=args, wait_for_stage=WorkflowUpdateStage.ACCEPTED, result_type=result_type
                )
            return await handle.result()

    async def list(self) -> list[str]:
        names = []
        try:
            # Only this client's task queue: other deployments (and tests) share the namespace.
            query = f"WorkflowType='ConnectorWorkflow' AND TaskQueue='{self.task_queue}'"
            async for wf in self.client.list_workflows(query):
                if wf.status == WorkflowExecutionStatus.RUNNING:
                    names.append(wf.id.removeprefix(workflow_id_for("")))
        except RPCError as exc:
            self._raise_if_unreachable(exc, "list connectors")
            raise
        return sorted(names)
