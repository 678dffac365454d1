"""The Python client other services use to manage connectors (the CLI is built on it).

Configs are validated here before any workflow starts, so a bad config is rejected with per-field
messages and nothing runs. Every operation is a Temporal update or query on the connector's
workflow; the Temporal UI and CLI see the same state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from activities.connector_activities import validate_config
from workflows.connector import ConnectorWorkflow
from workflows.types import (
    ConnectorStatus,
    DeleteRequest,
    Reconfigure,
    RestartRequest,
    workflow_id_for,
)


class ConnectorConfigError(ValueError):
    def __init__(self, name: str, errors: list[str]) -> None:
        super().__init__(f"connector {name} has an invalid configuration:\n  " + "\n  ".join(errors))
        self.errors = errors


@dataclass
class SluiceClient:
    client: Client
    task_queue: str = "sluice"

    @classmethod
    async def connect(
        cls, address: str, namespace: str = "default", task_queue: str = "sluice"
    ) -> SluiceClient:
        from worker.temporal_client import connect

        return cls(await connect(address, namespace), task_queue)

    def handle(self, name: str) -> WorkflowHandle[Any, Any]:
        return self.client.get_workflow_handle(workflow_id_for(name), result_type=ConnectorStatus)

    async def create(self, name: str, config: dict[str, str]) -> ConnectorStatus:
        result = validate_config(name, config)
        if result.errors:
            raise ConnectorConfigError(name, result.errors)
        await self.client.start_workflow(
            ConnectorWorkflow.run,
            ConnectorStatus(name=name, config=dict(config)),
            id=workflow_id_for(name),
            task_queue=self.task_queue,
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(SearchAttributeKey.for_keyword("ConnectorName"), name),
                    SearchAttributePair(
                        SearchAttributeKey.for_keyword("ConnectorClass"), result.connector_class
                    ),
                    SearchAttributePair(SearchAttributeKey.for_keyword("ConnectorState"), "UNASSIGNED"),
                ]
            ),
            static_summary=f"{result.kind} connector {name} ({result.connector_class})",
        )
        return await self.status(name)

    async def _update(self, name: str, update: str, arg: object = None) -> ConnectorStatus:
        """Run an update by name; the result type is given explicitly so callers get dataclasses."""
        args = [] if arg is None else [arg]
        result: ConnectorStatus = await self.handle(name).execute_update(
            update, args=args, result_type=ConnectorStatus
        )
        return result

    async def status(self, name: str) -> ConnectorStatus:
        status: ConnectorStatus = await self.handle(name).query("status", result_type=ConnectorStatus)
        return status

    async def config(self, name: str) -> dict[str, str]:
        return await self.handle(name).query(ConnectorWorkflow.config)

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
        return await self._update(name, "reconfigure", Reconfigure(dict(config)))

    async def delete(self, name: str, *, delete_offsets: bool = True) -> None:
        handle = self.handle(name)
        await handle.execute_update(ConnectorWorkflow.delete, DeleteRequest(delete_offsets))
        await handle.result()

    async def list(self) -> list[str]:
        names = []
        async for wf in self.client.list_workflows("WorkflowType='ConnectorWorkflow'"):
            if wf.status == WorkflowExecutionStatus.RUNNING:
                names.append(wf.id.removeprefix(workflow_id_for("")))
        return sorted(names)
