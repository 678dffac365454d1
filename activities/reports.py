"""Task reports: what a running task tells its connector's workflow (``report_task``), for status.

Task activities are synchronous (PySpark blocks), and Temporal hands a client only to ``async``
activities, so the worker gives the runtime its own client and event loop at start; a report is a
signal sent on that loop from the task thread. Reports are hints for people (``detail`` in status and
in the Temporal UI): a report that cannot be sent is logged and the task goes on.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sluice.workflows.types import TaskReport

log = logging.getLogger(__name__)

REPORT_SIGNAL = "report_task"


class TaskReporter:
    """Sends ``report_task`` signals through the worker's Temporal client."""

    def __init__(self, client: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._client = client
        self._loop = loop

    def send(self, workflow_id: str, report: TaskReport, timeout_s: float = 10.0) -> None:
        handle = self._client.get_workflow_handle(workflow_id)
        future = asyncio.run_coroutine_threadsafe(handle.signal(REPORT_SIGNAL, report), self._loop)
        try:
            future.result(timeout=timeout_s)
        except Exception:  # noqa: BLE001 - a status hint must never fail the task
            future.cancel()
            log.warning(
                "could not report task %d of %s to its workflow", report.task_id, workflow_id, exc_info=True
            )
