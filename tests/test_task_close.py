"""The runtime closes a task on every exit path, and a task that raises in ``close()`` is logged
(naming connector and task) without hiding how the task ended."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sluice.activities.connector_activities import ConnectorActivities
from sluice.connectors.api import open_sink_task
from sluice.connectors.dummy import DummySinkConnector
from sluice.connectors.dummy.faults import InjectedFault
from sluice.workflows.types import TaskInput


class Runner:
    """The piece of a BatchRunner that ``_close`` uses, around a real dummy sink task."""

    def __init__(self, tmp_path: Path) -> None:
        raw = {"connector.class": "dummy-sink", "name": "closing", "topics": "t", "file": str(tmp_path / "o")}
        self.task = open_sink_task(DummySinkConnector, {**raw, "fail.on.close": "true"}, 3)

    def close(self) -> None:
        self.task.close()


def test_a_task_raising_in_close_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    runner = Runner(tmp_path)
    with pytest.raises(InjectedFault, match="injected failure in close"):
        runner.close()  # the fault is real
    inp = TaskInput("closing", 3, "sink", {}, generation=0)
    with caplog.at_level(logging.WARNING):
        ConnectorActivities._close(inp, runner)  # type: ignore[arg-type]
    (record,) = [r for r in caplog.records if "close() failed" in r.getMessage()]
    assert record.getMessage().startswith("connector closing task 3: close() failed")
    assert record.exc_info is not None and isinstance(record.exc_info[1], InjectedFault)
