"""`sluice verify`: prove a copy equals its source, table by table (worker.verify).

Two ways to say what to compare: a pipeline by its connectors' names (``sluice verify SOURCE SINK``,
or one direct pipeline), followed from each source table to its target (worker.verify.pipelines);
or two databases and their tables (``--source URL --target URL --table SOURCE[=TARGET] …``), URLs
written as `sluice stack status` prints them or as JDBC URLs.

Exit codes are the compare's own, as diff's: 0 equal, 1 differences, 2 the compare could not be
made (a database unreachable, a table or key missing, a transform that cannot be followed).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sluice.worker import cli_render as render
from sluice.worker.cli_common import STATE, CommandFailed, DebugOpt, Output, OutputOpt, begin, call, describe

if TYPE_CHECKING:
    from sluice.worker.client import SluiceClient
    from sluice.worker.verify.model import ProgressEvent, TablePair, VerifyReport

EXIT_EQUAL, EXIT_DIFFERENT, EXIT_ERROR = 0, 1, 2
VERIFY_EXIT_HELP = "Exit codes: 0 the tables are equal, 1 they differ, 2 the compare could not be made."


def _progress() -> Any:
    """A Rich progress display on stderr when it is a terminal, else nothing."""
    if not sys.stderr.isatty():
        return None
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                    console=Console(stderr=True), transient=True)  # fmt: skip


def _shown(event: ProgressEvent) -> str:
    if event.stage == "checksum":
        differ = f"{event.differing}/{event.segments} segments differ"
        return f"{event.table}: checksums, round {event.round}: {differ}"
    if event.stage == "fetch":
        return f"{event.table}: comparing {event.rows:,} rows of differing segments"
    if event.stage == "done":
        return f"{event.table}: {event.rows:,} rows compared"
    return f"{event.table}: {event.stage}"


@contextmanager
def _shown_progress() -> Iterator[Callable[[ProgressEvent], None] | None]:
    """The progress callback: a line on a terminal's stderr, nothing otherwise."""
    progress = _progress()
    if progress is None:
        yield None
        return
    with progress:
        task = progress.add_task("verify", total=None)
        yield lambda e: progress.update(task, description=_shown(e))


def _by_urls(source: str, target: str, pairs: list[TablePair], repair: bool) -> VerifyReport:
    from sluice.worker.verify.engine import verify
    from sluice.worker.verify.repair import repair as repaired

    with _shown_progress() as progress:
        report = verify(source, target, pairs, progress=progress)
    return repaired(source, target, pairs, report) if repair and not report.equal else report


def _by_connectors(
    source: str, sink: str | None, live: bool, catch_up_s: float, repair: bool
) -> tuple[VerifyReport, tuple[str, ...]]:
    from sluice.worker.verify.model import VerifyError

    async def run(client: SluiceClient) -> tuple[VerifyReport, tuple[str, ...]]:
        pipeline = await client.verify_pipeline(source, sink)
        if not pipeline.plan.pairs:
            raise VerifyError(f"connector {source!r}: no table of it is written by the sink")
        with _shown_progress() as progress:
            report = await client.verify_planned(
                pipeline, live=live, catch_up_s=catch_up_s, repair=repair, progress=progress
            )
        return report, pipeline.plan.unread

    return call(run)


def verify_command(
    ctx: typer.Context,
    connector: Annotated[str, typer.Argument(help="a source connector, or a direct pipeline")] = "",
    sink_connector: Annotated[str, typer.Argument(help="the sink connector reading its topics")] = "",
    source: Annotated[str, typer.Option("--source", help="source database URL (instead of connectors)")] = "",
    target: Annotated[str, typer.Option("--target", help="target database URL")] = "",
    table: Annotated[list[str] | None, typer.Option("--table", help="SOURCE[=TARGET], repeatable")] = None,
    key: Annotated[
        list[str] | None, typer.Option("--key", help="key columns (default: the primary key)")
    ] = None,
    live: Annotated[
        bool,
        typer.Option("--live/--no-live", help="a running pipeline: check differences again once caught up"),
    ] = True,
    catch_up_timeout: Annotated[
        float, typer.Option("--catch-up-timeout", help="seconds to wait for a running pipeline to catch up")
    ] = 300.0,
    repair: Annotated[
        bool, typer.Option("--repair", help="write the differing rows to the target as the source has them")
    ] = False,
    output: OutputOpt = Output.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Prove a copy equals its source: checksums of key ranges inside each database, bisected to rows."""
    begin(ctx, debug)
    from sluice.worker.verify.model import VerifyError
    from sluice.worker.verify.pipelines import table_pairs

    by_urls = bool(source or target or table)
    if by_urls == bool(connector):
        raise CommandFailed(
            "give a pipeline (CONNECTOR [SINK_CONNECTOR]) or --source, --target and --table, not both",
            EXIT_ERROR,
        )
    if by_urls and not (source and target and table):
        raise CommandFailed("--source, --target and at least one --table are all needed", EXIT_ERROR)
    unread: tuple[str, ...] = ()
    try:
        if by_urls:
            report, unread = _by_urls(source, target, table_pairs(table or [], key or []), repair), ()
        else:
            report, unread = _by_connectors(connector, sink_connector or None, live, catch_up_timeout, repair)
    except CommandFailed as exc:
        raise CommandFailed(str(exc), EXIT_ERROR) from None
    except VerifyError as exc:
        raise CommandFailed(str(exc), EXIT_ERROR) from None
    except Exception as exc:  # noqa: BLE001 - one line, exit 2 (1 means "they differ" here)
        raise CommandFailed(str(describe(exc)), EXIT_ERROR) from None
    if output == Output.JSON:
        render.print_json({**report.to_json(), "not_written_by_the_sink": list(unread)})
    else:
        render.console().print(render.verify_table(report))
        for name in unread:
            print(f"{STATE.prog}: note: table {name} goes to a topic the sink does not read (not compared)")
        for t in report.tables:
            for warning in t.warnings:
                print(f"{STATE.prog}: warning: {t.source_table}: {warning}", file=sys.stderr)
    if not report.equal:
        raise typer.Exit(EXIT_DIFFERENT)
