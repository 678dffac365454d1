"""The Python client for connectors: ``sluice.Client`` for other services, and the CLI's and REST's.

Light on purpose: this module and everything it imports need only ``temporalio`` (and
``cryptography`` to seal secrets), so ``pip install sluice`` gives it without PySpark or plugins.
What needs plugin code — which fields are secret, whether a config is valid — is answered by a
:class:`~sluice.worker.client_checks.Checks`: a worker of the task queue for the light client (short
workflows, workflows/checks.py), in-process for :class:`SluiceClient` (CLI, REST, demos).

Configs are validated before any connector workflow starts, so a bad config is rejected with
per-field messages (:class:`ConnectorConfigError`, ``.fields`` names them) and nothing runs.
Literal secrets are sealed (``${sealed:…}``, connectors.sealing) before the config enters
Temporal. Every operation is a Temporal update or query on the connector's workflow; the
Temporal UI and CLI see the same state.

Failures are typed (:mod:`sluice.worker.errors`) and name the connector: an unknown, deleted or ended
connector is :class:`ConnectorNotFoundError` from every method, a second create of a running
name is :class:`ConnectorExistsError`, an operation the workflow's update validator refuses is
:class:`ConnectorStateError`, and an unreachable frontend is :class:`TemporalUnavailableError` —
never a raw gRPC ``RPCError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self, TypeVar

from temporalio.client import (
    Client as TemporalClient,
)
from temporalio.client import (
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

from sluice.connectors.sealing import Sealer, needs_sealing, seal_config
from sluice.worker.client_checks import Checks, WorkerChecks
from sluice.worker.client_config import ConfigLike, ConnectorConfig, env_key, flat
from sluice.worker.errors import (
    BackfillNotFoundError,
    BackfillRequestError,
    ConnectorConfigError,
    ConnectorError,
    ConnectorExistsError,
    ConnectorNotAnsweringError,
    ConnectorNotFoundError,
    ConnectorOffsetsError,
    ConnectorStateError,
    TemporalUnavailableError,
)
from sluice.worker.temporal_client import connect_with_key
from sluice.workflows import search_attributes, status_text
from sluice.workflows.types import (
    OFFSETS_ERROR,
    AlterOffsets,
    ConnectorState,
    ConnectorStatus,
    DeleteRequest,
    Reconfigure,
    RestartRequest,
    ValidationResult,
    workflow_id_for,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from temporalio.runtime import Runtime

    from sluice.connectors.backfills import Backfill
    from sluice.worker.backfills import BackfillStatus, BackfillStore
    from sluice.worker.verify.from_connectors import Pipeline
    from sluice.worker.verify.model import ProgressEvent, VerifyReport

__all__ = [
    "BackfillNotFoundError",
    "BackfillRequestError",
    "Client",
    "ConnectorConfig",
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
T = TypeVar("T")
# The server's word for a query lost with its workflow task (asked again, every QUERY_RETRY_S).
_RETRY_QUERY = "please retry"
QUERY_RETRY_S = 0.2
_WORKFLOW = "ConnectorWorkflow"  # workflows/connector.py, by name: the client imports no workflow code


@dataclass
class Client:
    """Sluice's async client (``from sluice import Client``); ``SyncClient`` wraps it for sync code.

    Made by :meth:`connect`. Constructed directly, ``sealer`` None leaves secrets as given (tests);
    ``require_sealing`` refuses a literal secret instead, naming its field.
    """

    client: TemporalClient
    task_queue: str = "sluice"
    # Seconds a worker has to answer a query or check, or accept an update (ConnectorNotAnsweringError after).
    answer_timeout: float = 30.0
    #: seals literal secrets before a config enters Temporal (connectors.sealing); None: see above
    sealer: Sealer | None = None
    #: what needs plugin code; None: the default of the class (a worker for Client)
    checks: Checks | None = None
    require_sealing: bool = False
    #: where backfill requests are kept (activities.store.OffsetStore); None: the workers' store,
    #: opened at first use from the settings (SLUICE_DATABASE_URL, SLUICE_STORE_SCHEMA)
    store: BackfillStore | None = None

    @classmethod
    async def connect(
        cls,
        address: str = "localhost:7233",
        namespace: str = "default",
        task_queue: str = "sluice",
        *,
        sealing_key: str | bytes | None = None,
        payload_key: str | bytes | None = None,
        runtime: Runtime | None = None,
        answer_timeout: float = 30.0,
    ) -> Self:
        """Connect to Temporal at ``address``; the task queue is the workers' (``SLUICE_TASK_QUEUE``).

        ``sealing_key`` is the workers' ``SLUICE_SECRETS_KEY`` (default: that variable, else
        ``$SLUICE_STATE_DIR/secrets.key``); without one, a config holding a literal secret is refused.
        ``payload_key`` is their ``SLUICE_PAYLOAD_KEY`` when payloads are encrypted. Short-lived
        processes pass a runtime they release (``sluice.worker.temporal_client.OwnedRuntime``).
        """
        sealing, payload = cls._keys(sealing_key, payload_key)
        temporal = await connect_with_key(address, namespace, runtime, payload)
        sealer = Sealer(sealing.encode() if isinstance(sealing, str) else sealing) if sealing else None
        return cls(temporal, task_queue, answer_timeout, sealer, require_sealing=True)

    @classmethod
    def _keys(
        cls, sealing: str | bytes | None, payload: str | bytes | None
    ) -> tuple[str | bytes | None, str | bytes | None]:
        """The sealing and payload keys: as given, else from the environment."""
        return sealing or env_key("SLUICE_SECRETS_KEY", "secrets.key"), payload or env_key(
            "SLUICE_PAYLOAD_KEY"
        )

    def _checks(self) -> Checks:
        if self.checks is None:
            self.checks = self._default_checks()
        return self.checks

    def _default_checks(self) -> Checks:
        return WorkerChecks(self.client, self.task_queue, self.answer_timeout)

    async def _sealed(self, name: str, config: dict[str, str]) -> dict[str, str]:
        """``config`` with literal secrets sealed: they never reach workflow history in plaintext."""
        if self.sealer is None and not self.require_sealing:
            return dict(config)
        secret = await self._checks().secret_fields(config)
        if self.sealer is None:
            literal = [k for k, v in config.items() if needs_sealing(k, v, secret)]
            if literal:
                raise ConnectorConfigError(
                    name,
                    [
                        f"connector {name!r}: field {k!r} holds a literal secret and no sealing key "
                        "is set: pass the workers' SLUICE_SECRETS_KEY (Client.connect(sealing_key=…)) "
                        "or write "
                        "${env:NAME} / ${file:/path:key}"
                        for k in literal
                    ],
                )
            return dict(config)
        return seal_config(config, self.sealer, secret)

    async def validate(self, name: str, config: ConfigLike) -> ValidationResult:
        """Check ``config`` as ``create`` would, without starting anything; ``.errors`` name the fields."""
        plain = flat(config)
        return await self._checks().validate(name, plain, await self._sealed(name, plain))

    async def _checked(self, name: str, config: ConfigLike) -> tuple[ValidationResult, dict[str, str]]:
        plain = flat(config)
        sealed = await self._sealed(name, plain)
        result = await self._checks().validate(name, plain, sealed)
        if result.errors:
            raise ConnectorConfigError(name, result.errors)
        return result, sealed

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

    async def create(self, name: str, config: ConfigLike) -> ConnectorStatus:
        """Validate, seal and start connector ``name``; its status (UNASSIGNED until a worker runs it)."""
        result, sealed = await self._checked(name, config)
        with self._errors(name, "create"):
            await self.client.start_workflow(
                _WORKFLOW,
                ConnectorStatus(name=name, config=sealed),
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
                name=name, config=sealed, connector_class=result.connector_class, kind=result.kind
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

    async def _query(self, name: str, query: str, result_type: type[T]) -> T:
        """Ask the connector's workflow ``query``, within ``answer_timeout``.

        A query buffered while its workflow task fails or times out (a saturated worker) ends
        UNAVAILABLE "buffered query cleared, please retry": a worker's hiccup, not an unreachable
        Temporal, so it is asked again."""
        with self._errors(name, "query"):
            async with asyncio.timeout(self.answer_timeout):
                while True:
                    try:
                        answer: T = await self.handle(name).query(query, result_type=result_type)
                        return answer
                    except RPCError as exc:
                        if exc.status != RPCStatusCode.UNAVAILABLE or _RETRY_QUERY not in exc.message:
                            raise
                    await asyncio.sleep(QUERY_RETRY_S)

    async def status(self, name: str) -> ConnectorStatus:
        """The connector's state; a deleted connector (its workflow ended) is not found."""
        status = await self._query(name, "status", ConnectorStatus)
        if status.state == ConnectorState.DELETED:
            raise ConnectorNotFoundError(name)
        return status

    async def config(self, name: str) -> dict[str, str]:
        await self.status(name)  # a deleted connector's workflow still answers queries
        return await self._query(name, "config", dict)

    async def verify_pipeline(self, connector: str, sink: str | None = None) -> Pipeline:
        """What ``verify`` compares for a pipeline: a source connector and the sink connector that
        reads its topics, or one direct pipeline (``sink`` None). The configs' secrets are resolved
        in this process, with its sealing key and environment (worker.verify.from_connectors)."""
        from sluice.worker.verify.from_connectors import pipeline_from_configs

        configs = [{**await self.config(n), "name": n} for n in (connector, sink) if n]
        return await asyncio.to_thread(
            pipeline_from_configs, configs[0], configs[1] if sink else None, self._providers()
        )

    def _providers(self) -> dict[str, Callable[[str, str], str]]:
        """What resolves a stored config's ``${sealed:…}`` secrets in this process."""
        return {"sealed": self.sealer.unseal} if self.sealer is not None else {}

    async def verify(
        self,
        connector: str,
        sink: str | None = None,
        *,
        live: bool = True,
        catch_up_s: float = 300.0,
        namesrv: str | None = None,
        repair: bool = False,
        progress: Callable[[ProgressEvent], None] | None = None,
    ) -> VerifyReport:
        """`sluice verify CONNECTOR [SINK]`: the pipeline's tables compared with their copies
        (worker.verify.engine, in a thread: it waits on both databases); ``live``: differences are
        checked again once the pipeline caught up with where its source was when the compare began
        (worker.verify.live; ``namesrv``: the sink's RocketMQ, by default the worker settings').
        Raises VerifyError."""
        return await self.verify_planned(
            await self.verify_pipeline(connector, sink), live=live, catch_up_s=catch_up_s, namesrv=namesrv,
            repair=repair, progress=progress,
        )  # fmt: skip

    async def verify_planned(
        self,
        pipeline: Pipeline,
        *,
        live: bool = True,
        catch_up_s: float = 300.0,
        namesrv: str | None = None,
        repair: bool = False,
        progress: Callable[[ProgressEvent], None] | None = None,
    ) -> VerifyReport:
        """``verify`` of a pipeline ``verify_pipeline`` made (its plan shown first, say); ``repair``:
        the differing rows then written to the target as the source holds them, and checked again
        (worker.verify.repair)."""
        from sluice.worker.verify.engine import verify
        from sluice.worker.verify.live import verify_live
        from sluice.worker.verify.repair import repair as repaired

        plan = pipeline.plan
        if not live:
            report = await asyncio.to_thread(
                verify, plan.source_url, plan.target_url, plan.pairs, progress=progress
            )
        else:
            if namesrv is None:
                from sluice.worker.settings import settings

                namesrv = settings().namesrv
            report = await verify_live(
                self, pipeline.names, pipeline.source_config, plan, namesrv, catch_up_s, progress
            )
        if repair and not report.equal:
            report = await asyncio.to_thread(repaired, plan.source_url, plan.target_url, plan.pairs, report)
        return report

    async def backfill(
        self,
        name: str,
        tables: Sequence[str] = (),
        *,
        where: str | None = None,
        column: str = "",
        low: str | None = None,
        high: str | None = None,
    ) -> list[Backfill]:
        """`sluice connector backfill NAME`: re-read a past range of the source connector's
        ``tables`` (none: all it reads) while it streams: the rows matching ``where`` (SQL), or
        ``low <= column < high`` (``column`` "": each table's default column). Checked against the
        source by the connector's own tasks, in this process (its sealing key and environment), then
        stored: the requests made, one per distinct condition (worker.backfills). Needs the worker
        extras and the workers' offset store (:attr:`store`). Raises BackfillRequestError."""
        from sluice.worker.backfills import BackfillAsk, request_backfill

        ask = BackfillAsk(tuple(tables), where, column, low, high)
        config = {**await self.config(name), "name": name}
        store = self._backfill_store()
        return await asyncio.to_thread(request_backfill, store, name, config, ask, self._providers())

    async def backfills(self, name: str) -> list[BackfillStatus]:
        """The connector's backfill requests, oldest first, with each table's progress."""
        from sluice.worker.backfills import backfill_statuses

        await self.status(name)
        return await asyncio.to_thread(backfill_statuses, self._backfill_store(), name)

    async def cancel_backfill(self, name: str, request: int | None = None) -> list[int]:
        """Cancel backfill request ``request`` (None: all of the connector's); the ids cancelled now.
        A running one stops at its next batch. Raises BackfillNotFoundError for an unknown id."""
        from sluice.worker.backfills import cancel_backfill

        await self.status(name)
        return await asyncio.to_thread(cancel_backfill, self._backfill_store(), name, request)

    def _backfill_store(self) -> BackfillStore:
        if self.store is None:
            from sluice.worker.backfills import open_store

            self.store = open_store()  # no I/O: the engine connects at first use
        return self.store

    async def tasks(self, name: str) -> list[dict[str, str]]:
        """The task configs the connector was split into (one per task, by task id)."""
        await self.status(name)
        return await self._query(name, "tasks", list)

    async def pause(self, name: str) -> ConnectorStatus:
        return await self._update(name, "pause")

    async def resume(self, name: str) -> ConnectorStatus:
        return await self._update(name, "resume")

    async def stop(self, name: str) -> ConnectorStatus:
        return await self._update(name, "stop")

    async def restart(self, name: str, *, only_failed: bool = False) -> ConnectorStatus:
        return await self._update(name, "restart", RestartRequest(only_failed))

    async def reconfigure(self, name: str, config: ConfigLike) -> ConnectorStatus:
        _, sealed = await self._checked(name, config)
        return await self._update(name, "reconfigure", Reconfigure(sealed))

    async def delete(self, name: str, *, delete_offsets: bool = True) -> None:
        with self._errors(name, "delete"):
            async with asyncio.timeout(self.answer_timeout):
                update = await self.handle(name).start_update(
                    "delete",
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
        self._checks().check_offsets(name, offsets)
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

    async def wait_for(
        self, name: str, *states: ConnectorState, timeout: float = 60.0, interval: float = 0.5
    ) -> ConnectorStatus:
        """Poll ``status`` until the connector is in one of ``states``; a FAILED connector that was
        not asked for, or ``timeout`` s passing, raises ConnectorError naming what it last saw."""
        deadline = time.monotonic() + timeout
        while True:
            status = await self.status(name)
            if status.state in states:
                return status
            if status.state == ConnectorState.FAILED:
                raise ConnectorError(name, f"connector {name} FAILED: {status.error or 'a task failed'}")
            if time.monotonic() >= deadline:
                wanted = ", ".join(str(s) for s in states)
                raise ConnectorError(
                    name, f"connector {name} is {status.state}, not {wanted}, after {timeout:g}s"
                )
            await asyncio.sleep(interval)


@dataclass
class SluiceClient(Client):
    """The client of the CLI, the REST server and the demos: they run with the plugins installed, so
    configs are checked in-process (worker/local_checks.py) and keys come from Sluice's settings."""

    @classmethod
    def _keys(
        cls, sealing: str | bytes | None, payload: str | bytes | None
    ) -> tuple[str | bytes | None, str | bytes | None]:
        from sluice.worker.settings import settings  # pydantic: not in the light client's imports

        env = settings()
        key = env.payload_key.get_secret_value() if env.payload_key is not None else None
        return sealing or env.sealing_key(), payload or key

    def _default_checks(self) -> Checks:
        from sluice.worker.local_checks import LocalChecks  # activities, plugins: not in the light client's

        return LocalChecks()
