"""`sluice connector watch NAME`: a live view of a connector's tasks, refreshed in place.

Where the numbers come from (nothing here holds state of its own):

1. the ``status`` query — each task's state, attempt, retry, detail and errors;
2. the workflow's pending task activities (``describe``) — each running task's heartbeat details
   (``sluice.activities.heartbeat.Progress``: records and batches of the current run, the last committed
   batch, the phase), and when the server received them; records/s is the change in ``records``
   between two heartbeats of the same run. A working task's heartbeats reach the server about every
   second (the worker's throttle), an idle one's every 2 minutes, so the rate moves in steps;
3. a ``lag`` mapping (partition -> records behind) in the heartbeat details, shown per partition
   when the task reports one.

The view ends when the connector ends (STOPPED, FAILED, deleted) or on Ctrl-C (exit 0 both:
leaving a watch is not an error). On a terminal it redraws in place (Rich Live); piped, it prints
one frame per refresh so a log shows the history.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from sluice.worker import cli_render as render
from sluice.worker.cli_common import CommandFailed, DebugOpt, Output, OutputOpt, begin, call
from sluice.worker.errors import EXIT_INTERRUPTED, ConnectorNotFoundError, UsageError
from sluice.workflows.types import ConnectorState, ConnectorStatus, TaskStatus

if TYPE_CHECKING:
    from sluice.worker.client import SluiceClient

ENDED = (ConnectorState.STOPPED, ConnectorState.FAILED, ConnectorState.DELETED)
_ACTIVITY_ID = re.compile(r"^task-(\d+)-g\d+-a\d+$")


@dataclass(frozen=True)
class Beat:
    """One task run's latest heartbeat as the server holds it."""

    activity_id: str
    details: dict[str, Any]
    at: float  # server time of the heartbeat (epoch seconds); 0 when none yet


@dataclass
class Rates:
    """What one refresh needs from the previous ones: per task, the last beat and the rate it gave."""

    beats: dict[int, Beat] = field(default_factory=dict)
    rate: dict[int, float] = field(default_factory=dict)

    def update(self, task_id: int, beat: Beat) -> float | None:
        """records/s from the previous beat of the same run; the last rate while no new beat came."""
        prev = self.beats.get(task_id)
        self.beats[task_id] = beat
        if prev is not None and prev.activity_id != beat.activity_id:
            self.rate.pop(task_id, None)  # a new run of the task counts from zero
            return None
        records = beat.details.get("records")
        if prev is None or not isinstance(records, int):
            return self.rate.get(task_id)
        elapsed = beat.at - prev.at
        if elapsed > 0:
            self.rate[task_id] = max(0, records - int(prev.details.get("records", 0))) / elapsed
        return self.rate.get(task_id)


async def heartbeats(client: SluiceClient, name: str) -> dict[int, Beat]:
    """Each running task's latest heartbeat details (a hint: {} if Temporal cannot say)."""
    try:
        desc = await client.handle(name).describe()
        converter = client.client.data_converter
        beats: dict[int, Beat] = {}
        for info in desc.raw_description.pending_activities:
            found = _ACTIVITY_ID.match(info.activity_id)
            if not found:
                continue
            details: dict[str, Any] = {}
            if info.heartbeat_details.payloads:
                decoded = await converter.decode(info.heartbeat_details.payloads)
                details = decoded[0] if decoded and isinstance(decoded[0], dict) else {}
            at = (
                info.last_heartbeat_time.ToDatetime().timestamp()
                if info.HasField("last_heartbeat_time")
                else 0
            )
            beats[int(found.group(1))] = Beat(info.activity_id, details, at)
        return beats
    except Exception:  # noqa: BLE001 - progress is a hint; status is what the view must show
        return {}


def frame(status: ConnectorStatus, beats: dict[int, Beat], rates: Rates, interval: float) -> RenderableType:
    """One refresh: the connector line, a row per task, and each reported partition's lag."""
    now = datetime.now().strftime("%H:%M:%S")
    head = Text.assemble(
        (status.name, "bold"),
        f"  {status.kind or '?'} {status.connector_class or '?'}  ",
        render.state_text(status.state),
        f"  generation {status.generation}  ·  {now}, every {interval:g}s (Ctrl-C to leave)",
        style="",
    )
    table = Table("task", "state", "attempt", "records", "records/s", "last batch", "doing", "last error")
    lag = Table("task", "partition", "lag", title="lag per partition", title_justify="left")
    for task in status.tasks:
        beat = beats.get(task.task_id)
        rate = rates.update(task.task_id, beat) if beat is not None else None
        table.add_row(*_task_cells(task, beat, rate))
        for partition, behind in sorted(_lag(beat).items()):
            lag.add_row(str(task.task_id), partition, str(behind))
    parts: list[RenderableType] = [head]
    if status.error:
        parts.append(Text(f"error: {status.error}", style="red"))
    parts.append(table)
    if lag.row_count:
        parts.append(lag)
    return Group(*parts)


def _task_cells(task: TaskStatus, beat: Beat | None, rate: float | None) -> list[Any]:
    details = beat.details if beat else {}
    records = details.get("records")
    last = details.get("last_committed_batch")
    doing = task.detail or str(details.get("phase", "")) or "-"
    attempt = f"{task.attempt or '-'}" + (" (retrying)" if task.retrying else "")
    error = task.error or task.last_error
    return [
        str(task.task_id),
        render.state_text(task.state),
        attempt,
        "-" if records is None else f"{records:,}",
        "-" if rate is None else f"{rate:,.1f}",
        "-" if last is None or last < 0 else str(last),
        doing,
        Text(error[:120] or "-", style="red" if task.error else ("yellow" if error else "")),
    ]


def _lag(beat: Beat | None) -> dict[str, Any]:
    lag = beat.details.get("lag") if beat else None
    return {str(k): v for k, v in lag.items()} if isinstance(lag, dict) else {}


async def watch_loop(
    client: SluiceClient, name: str, interval: float, once: bool, json_out: bool, until: float | None
) -> ConnectorStatus | None:
    """Refresh until the connector ends, ``--once``, ``--for`` seconds pass, or Ctrl-C."""
    console = render.console()
    rates = Rates()
    deadline = None if until is None else time.monotonic() + until
    live = Live(console=console, auto_refresh=False) if console.is_terminal and not json_out else None
    last: ConnectorStatus | None = None
    try:
        if live is not None:
            live.start()
        while True:
            try:
                status = await client.status(name)
            except ConnectorNotFoundError:
                if last is None:
                    raise
                console.print(Text(f"connector {name} was deleted"))
                return last
            beats = await heartbeats(client, name)
            if json_out:
                render.print_json(
                    {
                        "status": render.status_json(status),
                        "progress": {str(k): b.details for k, b in beats.items()},
                    }
                )
            elif live is not None:
                live.update(frame(status, beats, rates, interval), refresh=True)
            else:
                console.print(frame(status, beats, rates, interval))
            last = status
            if once or status.state in ENDED or (deadline is not None and time.monotonic() >= deadline):
                return status
            await asyncio.sleep(interval)
    except (KeyboardInterrupt, asyncio.CancelledError):
        return last
    finally:
        if live is not None:
            live.stop()


def watch(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="the connector's name", metavar="NAME", show_default=False)],
    interval: Annotated[float, typer.Option("--interval", "-n", help="seconds between refreshes")] = 2.0,
    once: Annotated[bool, typer.Option("--once", help="show one refresh and exit")] = False,
    until: Annotated[
        float | None, typer.Option("--for", help="exit after this many seconds", show_default=False)
    ] = None,
    output: OutputOpt = Output.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Live view of each task: state, records, records/s, last batch, lag; until the connector ends or Ctrl-C.

    With --output json, one JSON document per refresh (status and each task's progress).
    """
    begin(ctx, debug)
    if interval <= 0:
        raise UsageError(f"--interval must be > 0, got {interval:g}")
    try:
        call(lambda c: watch_loop(c, name, interval, once, output == Output.JSON, until))
    except CommandFailed as failed:
        if failed.exit_code != EXIT_INTERRUPTED:  # Ctrl-C is how a watch is left, not an error
            raise
