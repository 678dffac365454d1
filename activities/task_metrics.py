"""What a running task reports about its throughput and backlog (``TaskMetrics``) for status and
the Temporal UI's current details: last batch, records/s and lag.

Each report is a signal, i.e. events in the connector's workflow history, so reports are
throttled (the first batch at once, then at most one per ``REPORT_EVERY_S``); the offset store
stays the truth, these are figures for people.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from sluice.connectors.model import BatchPlan
from sluice.workflows.types import TaskMetrics

REPORT_EVERY_S = 5.0


def partition_lag(backlog: Mapping[str, int | None], plan: BatchPlan | None) -> dict[str, int] | None:
    """Units each partition is still behind once ``plan`` commits, from the backlog seen when it
    was planned; None when unknown (a re-run has no fresh backlog; composite positions cannot be
    counted). Also the heartbeat's ``lag`` mapping that ``sluice connector watch`` shows."""
    if not backlog or any(units is None for units in backlog.values()):
        return None
    taken: dict[str, int] = {}
    for r in plan.ranges if plan is not None else ():
        if not (r.start.is_offset and r.end.is_offset):
            return None
        taken[str(r.key)] = r.end.offset - r.start.offset
    return {key: max(0, (units or 0) - taken.get(key, 0)) for key, units in backlog.items()}


def lag_after(backlog: Mapping[str, int | None], plan: BatchPlan | None) -> int:
    """The total of :func:`partition_lag`; -1 when unknown."""
    lag = partition_lag(backlog, plan)
    return -1 if lag is None else sum(lag.values())


class BatchMeter:
    """Turns committed batches into throttled ``TaskMetrics`` reports (None: nothing due)."""

    def __init__(self, lag_unit: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._unit = lag_unit
        self._clock = clock
        self._last = TaskMetrics(lag_unit=lag_unit)
        self._reported: TaskMetrics | None = None
        self._reported_at = clock()
        self._records_at_report = 0

    def committed(
        self, plan: BatchPlan, records: int, backlog: Mapping[str, int | None]
    ) -> TaskMetrics | None:
        self._last = TaskMetrics(
            last_batch=plan.batch_id,
            last_batch_records=records,
            last_batch_time=datetime.now(UTC).isoformat(timespec="seconds"),
            records=self._last.records + records,
            lag=lag_after(backlog, plan),
            lag_unit=self._unit,
        )
        return self._due(first=self._reported is None)

    def idle(self, backlog: Mapping[str, int | None]) -> TaskMetrics | None:
        """Nothing to read: the rate falls to 0 and the lag is what the planner saw."""
        lag = lag_after(backlog, None)
        reported = self._reported
        unreported = self._last.records != self._records_at_report
        if reported is None or (reported.records_per_s == 0 and reported.lag == lag and not unreported):
            return None
        self._last = TaskMetrics(**{**vars(self._last), "lag": lag})
        return self._due(first=False)

    def _due(self, first: bool) -> TaskMetrics | None:
        now = self._clock()
        elapsed = now - self._reported_at
        if not first and elapsed < REPORT_EVERY_S:
            return None
        rate = (self._last.records - self._records_at_report) / elapsed if elapsed > 0 else 0.0
        self._reported = TaskMetrics(**{**vars(self._last), "records_per_s": round(rate, 1)})
        self._reported_at, self._records_at_report = now, self._last.records
        return self._reported
