"""The connector's status as Markdown for the Temporal UI's "current details" (what ``sluice
connector status`` shows, per task: state, attempt, last error and its time, retry, detail)."""

from __future__ import annotations

from workflows.types import ConnectorStatus, TaskState, TaskStatus

# The UI shows details inline; the full error text is in the status query.
_ERROR_CHARS = 600


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _ERROR_CHARS else text[: _ERROR_CHARS - 1] + "…"


def _task_line(t: TaskStatus) -> str:
    line = f"- task {t.task_id}: {t.state}"
    if t.state == TaskState.RUNNING and t.attempt > 1:
        line += f", attempt {t.attempt}"
    if t.retrying:
        line += f", retrying (next at {t.next_retry_time})" if t.next_retry_time else ", retrying"
    if t.detail:
        line += f" — {_short(t.detail)}"
    if t.error:
        line += f"\n  - error: {_short(t.error)}"
    elif t.last_error:
        line += f"\n  - last error at {t.last_error_time}: {_short(t.last_error)}"
    return line


def details(s: ConnectorStatus) -> str:
    lines = [f"**{s.name}** ({s.kind or '?'}: {s.connector_class}) — {s.state}"]
    if s.error:
        lines.append(f"error: {_short(s.error)}")
    lines += [_task_line(t) for t in s.tasks]
    return "\n".join(lines)
