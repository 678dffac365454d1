"""What the client needs plugin code for — secret field names and validation — and where it runs.

:class:`WorkerChecks` (the light client's, ``sluice.Client``) asks a worker of the task queue, through
the short workflows of ``workflows/checks.py``; ``worker/local_checks.py`` answers in-process for the
CLI, the REST server and the demos, which run with the plugins installed (and must answer, e.g.
``sluice connector create`` with a bad config, even when no worker is up).

Only names cross to the worker before sealing (``SluiceSecretFields`` takes a class name), and the
config is sealed before ``SluiceValidateConfig`` sees it, so no literal secret enters Temporal.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Protocol

from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import TimeoutError as TemporalTimeoutError
from temporalio.service import RPCError, RPCStatusCode

from sluice.worker.errors import ConnectorError, ConnectorNotAnsweringError, TemporalUnavailableError
from sluice.workflows.types import ConnectorSpec, ValidationResult

# workflows/checks.py's names, as strings: the client never imports workflow code it does not run.
SECRET_FIELDS_WORKFLOW = "SluiceSecretFields"
VALIDATE_WORKFLOW = "SluiceValidateConfig"


def class_of(config: Mapping[str, Any]) -> str:
    return str(config.get("connector.class") or config.get("connector-class") or "")


class Checks(Protocol):
    """Answers the client's questions that need plugin code."""

    async def secret_fields(self, config: Mapping[str, str]) -> frozenset[str]:
        """The fields ``config``'s connector declares secret (to seal them)."""
        ...

    async def validate(
        self, name: str, plain: Mapping[str, str], sealed: Mapping[str, str]
    ) -> ValidationResult:
        """Validate a config; in-process checks may read ``plain``, remote ones see only ``sealed``."""
        ...

    def check_offsets(self, name: str, offsets: list[dict[str, Any]]) -> None:
        """Refuse a malformed alter request before it is sent (ConnectorOffsetsError), if able."""
        ...


class WorkerChecks:
    """Checks run by a worker of ``task_queue`` (workflows/checks.py), each within ``timeout`` s."""

    def __init__(self, client: Client, task_queue: str, timeout: float) -> None:
        self.client = client
        self.task_queue = task_queue
        self.timeout = timeout
        self._secret: dict[str, frozenset[str]] = {}  # per connector class: plugins change on restart only

    async def _run(self, name: str, workflow: str, arg: object, result_type: type) -> Any:
        """Run one check workflow; it lives at most ``timeout`` s, so none is left behind."""
        try:
            async with asyncio.timeout(self.timeout):
                return await self.client.execute_workflow(
                    workflow,
                    arg,
                    id=f"sluice-check-{name}-{uuid.uuid4().hex[:12]}",
                    task_queue=self.task_queue,
                    result_type=result_type,
                    execution_timeout=timedelta(seconds=self.timeout),
                )
        except TimeoutError as exc:
            detail = f"no worker checked the config in {self.timeout:g}s"
            raise ConnectorNotAnsweringError(name, self.task_queue, detail) from exc
        except WorkflowFailureError as exc:
            if isinstance(exc.cause, TemporalTimeoutError):  # its execution_timeout: no worker took it
                detail = f"no worker checked the config in {self.timeout:g}s"
                raise ConnectorNotAnsweringError(name, self.task_queue, detail) from exc
            raise ConnectorError(name, f"checking connector {name}'s config failed: {exc.cause}") from exc
        except RPCError as exc:
            if exc.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
                address = self.client.service_client.config.target_host
                raise TemporalUnavailableError(address, f"check connector {name}: {exc.message}") from exc
            raise ConnectorError(name, f"checking connector {name}'s config failed: {exc.message}") from exc

    async def secret_fields(self, config: Mapping[str, str]) -> frozenset[str]:
        connector_class = class_of(config)
        if not connector_class.strip():
            return frozenset()  # validation names the missing class
        if connector_class not in self._secret:
            name = str(config.get("name") or "secrets")
            fields = await self._run(name, SECRET_FIELDS_WORKFLOW, connector_class, list[str])
            self._secret[connector_class] = frozenset(fields)
        return self._secret[connector_class]

    async def validate(
        self, name: str, plain: Mapping[str, str], sealed: Mapping[str, str]
    ) -> ValidationResult:
        result: ValidationResult = await self._run(
            name, VALIDATE_WORKFLOW, ConnectorSpec(name, dict(sealed)), ValidationResult
        )
        return result

    def check_offsets(self, name: str, offsets: list[dict[str, Any]]) -> None:
        """Nothing here: the worker's alter activity refuses a malformed request (ConnectorOffsetsError)."""
