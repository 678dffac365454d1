"""The client's queries: a query the server lost with its workflow task ("buffered query cleared,
please retry", a saturated worker) is asked again; an unreachable server is still reported as one.
No service: the workflow handle is a stand-in that answers from a script."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode

from sluice.worker import client as client_module
from sluice.worker.client import Client
from sluice.worker.errors import TemporalUnavailableError
from sluice.workflows.types import ConnectorState, ConnectorStatus

CLEARED = RPCError("buffered query cleared, please retry", RPCStatusCode.UNAVAILABLE, b"")
REFUSED = RPCError("tcp connect error: Connection refused", RPCStatusCode.UNAVAILABLE, b"")


class ScriptedHandle:
    """Answers each query with the next scripted outcome (an error is raised)."""

    def __init__(self, script: list[Any]) -> None:
        self.script = script
        self.asked = 0

    async def query(self, name: str, result_type: type) -> Any:
        self.asked += 1
        outcome = self.script.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


class ScriptedClient(Client):
    def __init__(self, handle: ScriptedHandle) -> None:
        temporal = SimpleNamespace(service_client=SimpleNamespace(config=SimpleNamespace(target_host="t:1")))
        super().__init__(temporal, "q", answer_timeout=5)  # type: ignore[arg-type]
        self.scripted = handle

    def handle(self, name: str) -> Any:
        return self.scripted


@pytest.fixture(autouse=True)
def _no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "QUERY_RETRY_S", 0)


async def test_a_query_lost_with_its_workflow_task_is_asked_again() -> None:
    running = ConnectorStatus("c", {}, state=ConnectorState.RUNNING)
    handle = ScriptedHandle([CLEARED, CLEARED, running])
    assert await ScriptedClient(handle).status("c") == running
    assert handle.asked == 3


async def test_an_unreachable_server_is_not_asked_again() -> None:
    handle = ScriptedHandle([REFUSED, ConnectorStatus("c", {})])
    with pytest.raises(TemporalUnavailableError, match="t:1"):
        await ScriptedClient(handle).status("c")
    assert handle.asked == 1
