"""``sluice.SyncClient``: the async :class:`~sluice.worker.client.Client` for code without an event loop.

One private event loop (``asyncio.Runner``) runs every call, so the Temporal client stays on the
loop it was made on. The client gets a Temporal runtime of its own, released by :meth:`close`
(or the ``with`` block) while the interpreter is alive: a short script then never crashes at
exit in the SDK's Tokio threads (worker/temporal_client.py explains why).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from sluice.worker.client import Client
from sluice.worker.client_config import ConfigLike
from sluice.worker.temporal_client import OwnedRuntime
from sluice.workflows.types import ConnectorState, ConnectorStatus, ValidationResult

if TYPE_CHECKING:
    from sluice.connectors.backfills import Backfill
    from sluice.worker.backfills import BackfillStatus

T = TypeVar("T")


class SyncClient:
    """Blocking twin of :class:`Client`: same methods, same typed results and errors.

    Use::

        with SyncClient("localhost:7233", task_queue="sluice") as sluice:
            sluice.create("orders-src", {"connector.class": "file-source", ...})
            print(sluice.status("orders-src").state)
    """

    def __init__(
        self,
        address: str = "localhost:7233",
        namespace: str = "default",
        task_queue: str = "sluice",
        *,
        sealing_key: str | bytes | None = None,
        payload_key: str | bytes | None = None,
        answer_timeout: float = 30.0,
    ) -> None:
        self._runner = asyncio.Runner()
        self._owned = OwnedRuntime()
        try:
            self._client: Client | None = self._runner.run(
                Client.connect(
                    address,
                    namespace,
                    task_queue,
                    sealing_key=sealing_key,
                    payload_key=payload_key,
                    runtime=self._owned.runtime,
                    answer_timeout=answer_timeout,
                )
            )
        except BaseException:
            self._client = None
            self.close()
            raise

    @property
    def client(self) -> Client:
        """The async client underneath (for what this wrapper does not offer)."""
        if self._client is None:
            raise RuntimeError("this SyncClient is closed")
        return self._client

    def _run(self, call: Coroutine[Any, Any, T]) -> T:
        return self._runner.run(call)

    def close(self) -> None:
        """Close the loop and release the Temporal runtime; the client cannot be used after."""
        self._client = None
        self._runner.close()
        self._owned.release()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def create(self, name: str, config: ConfigLike) -> ConnectorStatus:
        return self._run(self.client.create(name, config))

    def validate(self, name: str, config: ConfigLike) -> ValidationResult:
        return self._run(self.client.validate(name, config))

    def status(self, name: str) -> ConnectorStatus:
        return self._run(self.client.status(name))

    def wait_for(self, name: str, *states: ConnectorState, timeout: float = 60.0) -> ConnectorStatus:
        return self._run(self.client.wait_for(name, *states, timeout=timeout))

    def config(self, name: str) -> dict[str, str]:
        return self._run(self.client.config(name))

    def tasks(self, name: str) -> list[dict[str, str]]:
        return self._run(self.client.tasks(name))

    def pause(self, name: str) -> ConnectorStatus:
        return self._run(self.client.pause(name))

    def resume(self, name: str) -> ConnectorStatus:
        return self._run(self.client.resume(name))

    def stop(self, name: str) -> ConnectorStatus:
        return self._run(self.client.stop(name))

    def restart(self, name: str, *, only_failed: bool = False) -> ConnectorStatus:
        return self._run(self.client.restart(name, only_failed=only_failed))

    def reconfigure(self, name: str, config: ConfigLike) -> ConnectorStatus:
        return self._run(self.client.reconfigure(name, config))

    def delete(self, name: str, *, delete_offsets: bool = True) -> None:
        self._run(self.client.delete(name, delete_offsets=delete_offsets))

    def offsets(self, name: str) -> list[dict[str, Any]]:
        return self._run(self.client.offsets(name))

    def alter_offsets(self, name: str, offsets: list[dict[str, Any]]) -> None:
        self._run(self.client.alter_offsets(name, offsets))

    def reset_offsets(self, name: str) -> None:
        self._run(self.client.reset_offsets(name))

    def backfill(
        self,
        name: str,
        tables: Sequence[str] = (),
        *,
        where: str | None = None,
        column: str = "",
        low: str | None = None,
        high: str | None = None,
    ) -> list[Backfill]:
        return self._run(self.client.backfill(name, tables, where=where, column=column, low=low, high=high))

    def backfills(self, name: str) -> list[BackfillStatus]:
        return self._run(self.client.backfills(name))

    def cancel_backfill(self, name: str, request: int | None = None) -> list[int]:
        return self._run(self.client.cancel_backfill(name, request))

    def list(self) -> list[str]:
        return self._run(self.client.list())
