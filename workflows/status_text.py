"""The connector's status as Markdown for the Temporal UI: the workflow's *current details* (what
``sluice connector status`` shows — per task: state, attempt, last error and its time, retry,
detail, and the running figures: last batch, records/s, lag) and the one-line *static summary*
a client gives at start.

Pure functions of the status (no clock, no I/O): the workflow calls them on every change.
"""

from __future__ import annotations

from sluice.workflows.types import ConnectorStatus, TaskMetrics, TaskState, TaskStatus

# The UI shows details inline; the full error text is in the status query.
_ERROR_CHARS = 600


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _ERROR_CHARS else text[: _ERROR_CHARS - 1] + "…"


def summary(name: str, kind: str, connector_class: str) -> str:
    """The static summary a client sets at start (shown in the UI's workflow list and header)."""
    return f"{kind or 'connector'} connector {name} ({connector_class})"


def _figures(m: TaskMetrics, running: bool) -> str:
    parts = []
    if m.last_batch >= 0:
        parts.append(f"last batch {m.last_batch}: {m.last_batch_records:,} records at {m.last_batch_time}")
    if running:
        parts.append(f"{m.records_per_s:,.1f} records/s")
    parts.append(f"lag {m.lag:,} {m.lag_unit}" if m.lag >= 0 else "lag unknown")
    if m.lag_seconds:  # a replicator's queues, a heartbeat's end-to-end lag
        each = (
            f"{p} {m.partition_lag.get(p, 0):,} {m.lag_unit}/{s:,.1f} s"
            for p, s in sorted(m.lag_seconds.items())
        )
        parts.append("behind: " + ", ".join(each))
    return "; ".join(parts)


def _task_line(t: TaskStatus) -> str:
    line = f"- task {t.task_id}: **{t.state}**"
    if t.state == TaskState.RUNNING and t.attempt > 1:
        line += f", attempt {t.attempt}"
    if t.retrying:
        line += f", retrying (next at {t.next_retry_time})" if t.next_retry_time else ", retrying"
    if t.detail:
        line += f" — {_short(t.detail)}"
    if t.metrics is not None:
        line += f"\n  - {_figures(t.metrics, t.state == TaskState.RUNNING)}"
    if t.error:
        line += f"\n  - error: {_short(t.error)}"
    elif t.last_error:
        line += f"\n  - last error at {t.last_error_time}: {_short(t.last_error)}"
    return line


def details(s: ConnectorStatus) -> str:
    """Paragraphs (blank-line separated, so Markdown keeps them apart), then one item per task."""
    paragraphs = [f"**{s.name}** ({s.kind or '?'}: {s.connector_class}) — **{s.state}**"]
    metrics = [t.metrics for t in s.tasks if t.metrics is not None and t.state == TaskState.RUNNING]
    if metrics:
        rate = sum(m.records_per_s for m in metrics)
        moved = sum(m.records for m in metrics)
        paragraphs.append(f"{rate:,.1f} records/s, {moved:,} records moved by the running tasks")
    if s.error:
        paragraphs.append(f"error: {_short(s.error)}")
    if s.tasks:
        paragraphs.append("\n".join(_task_line(t) for t in s.tasks))
    return "\n\n".join(paragraphs)
