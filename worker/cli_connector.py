"""`sluice connector ...`: create and manage connectors, as Kafka Connect's and RocketMQ Connect's
users expect (their config files, their restart flags), with tables for people and JSON for scripts.

Every command is a thin layer over :class:`sluice.worker.client.SluiceClient`: the connector's workflow is
the only state, so what these commands show is what the REST API, the ``temporal`` CLI and the
Temporal UI show. Failures are one stderr line and an exit code (``sluice.worker.errors``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated

import typer

from sluice.worker import cli_render as render
from sluice.worker.cli_common import DebugOpt, Output, OutputOpt, begin, call
from sluice.worker.config_files import load_config
from sluice.worker.errors import ConnectorConfigError, ConnectorError, ConnectorNotAnsweringError, UsageError

if TYPE_CHECKING:
    from sluice.worker.backfills import BackfillStatus
    from sluice.worker.client import SluiceClient
    from sluice.workflows.types import ConnectorStatus

EXIT_CODES_HELP = """\b
Exit codes:
  0  ok                     4  connector already exists
  1  unexpected error       5  not allowed in the connector's current state
  2  usage / invalid config 6  Temporal unreachable
  3  connector not found    7  the connector did not answer (no worker?)
                            130 interrupted"""

app = typer.Typer(
    help="Create and manage connectors.",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

NameArg = Annotated[str, typer.Argument(help="the connector's name", metavar="NAME", show_default=False)]
FileOpt = Annotated[
    str | None,
    typer.Option(
        "--config-file",
        "-f",
        "--file",
        help="the config: JSON (flat or {name, config}), YAML, or Java .properties (Kafka standalone)",
        show_default=False,
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", metavar="KEY=VALUE", help="one config entry, over the file's; repeatable"),
]


def _show(status: ConnectorStatus, output: Output) -> None:
    render.show_status(status, output == Output.JSON)


def _named(name: str, file: str | None, sets: list[str] | None) -> tuple[str, dict[str, str], str]:
    """The connector's name (argument or file), its config and initial state, before any connection."""
    loaded = load_config(file, sets or [])
    if name and loaded.name and name != loaded.name:
        raise UsageError(f"the command line names connector {name!r} but {file} names {loaded.name!r}")
    name = name or loaded.name
    if not name:
        raise UsageError("give the connector's NAME, or a config file with a 'name'")
    return name, loaded.config, loaded.initial_state


@app.command()
def create(
    ctx: typer.Context,
    name: Annotated[
        str, typer.Argument(help="the connector's name (else the file's 'name')", metavar="[NAME]")
    ] = "",
    file: FileOpt = None,
    sets: SetOpt = None,
    output: OutputOpt = Output.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Create a connector; its config is validated first (nothing starts if a field is wrong)."""
    begin(ctx, debug)
    name, config, initial = _named(name, file, sets)

    async def run(client: SluiceClient) -> ConnectorStatus:
        status = await client.create(name, config)
        if initial == "PAUSED":
            status = await client.pause(name)
        elif initial == "STOPPED":
            status = await client.stop(name)
        return status

    _show(call(run), output)


@app.command()
def validate(
    ctx: typer.Context,
    file: Annotated[
        str | None, typer.Argument(help="a config file (JSON, YAML or .properties)", metavar="[FILE]")
    ] = None,
    sets: SetOpt = None,
    name: Annotated[str, typer.Option("--name", help="the connector's name (else the file's)")] = "",
    output: OutputOpt = Output.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Check a config without creating anything: every field error is listed (exit 2 if any)."""
    # connector plugins (~40 ms): loaded by the commands that use them, not at the CLI's start
    from sluice.activities.validation import validate_config

    begin(ctx, debug)
    if not file and not sets:
        raise UsageError("give a config FILE or --set KEY=VALUE entries to validate")
    loaded = load_config(file, sets or [])
    name = name or loaded.name or "unnamed"  # only error messages use it
    result = validate_config(name, loaded.config)
    if output == Output.JSON:
        render.print_json(render.validation_json(name, result))
    else:
        render.console().print(render.validation_view(name, result))
    if result.errors:
        raise ConnectorConfigError(name, [f"{len(result.errors)} field error(s), listed above"])


@app.command("list")
def list_(
    ctx: typer.Context,
    names_only: Annotated[
        bool, typer.Option("--names-only", "-q", help="names only, no status queries")
    ] = False,
    output: OutputOpt = Output.TABLE,
    debug: DebugOpt = False,
) -> None:
    """The running connectors, with their state and tasks."""
    begin(ctx, debug)

    async def run(client: SluiceClient) -> list[tuple[str, ConnectorStatus | None, str]]:
        names = await client.list()
        if names_only:
            return [(n, None, "") for n in names]
        return list(await asyncio.gather(*(_status_or_why(client, n) for n in names)))

    rows = call(run)
    if names_only:
        if output == Output.JSON:
            render.print_json([n for n, _, _ in rows])
        else:
            print("\n".join(n for n, _, _ in rows))
    elif output == Output.JSON:
        render.print_json(
            [
                {
                    "name": n,
                    "state": s.state,
                    "connector_class": s.connector_class,
                    "kind": s.kind,
                    "tasks": [{"id": t.task_id, "state": t.state} for t in s.tasks],
                }
                if s is not None
                else {"name": n, "state": None, "error": why}
                for n, s, why in rows
            ]
        )
    elif not rows:
        print("no connectors")
    else:
        render.console().print(render.connectors_table(rows))


async def _status_or_why(client: SluiceClient, name: str) -> tuple[str, ConnectorStatus | None, str]:
    try:
        return name, await client.status(name), ""
    except ConnectorNotAnsweringError:
        return name, None, "no worker answered"
    except ConnectorError as exc:
        return name, None, str(exc)


@app.command()
def status(
    ctx: typer.Context, name: NameArg, output: OutputOpt = Output.TABLE, debug: DebugOpt = False
) -> None:
    """The connector's state, each task's state, attempt, last error and detail, its newest
    backfills (if any), and its config."""
    begin(ctx, debug)

    async def run(client: SluiceClient) -> tuple[ConnectorStatus, list[BackfillStatus]]:
        status = await client.status(name)
        return status, await _backfills_if_any(client, status)

    shown, backfills = call(run)
    render.show_status(shown, output == Output.JSON, backfills)


async def _backfills_if_any(client: SluiceClient, status: ConnectorStatus) -> list[BackfillStatus]:
    """A source's backfill requests, from the offset store; none when it cannot be read from here
    (the status is Temporal's and must not fail on a store this process cannot reach)."""
    if status.kind != "source":
        return []
    try:
        return await client.backfills(status.name)
    except Exception:  # noqa: BLE001 - the status is shown without them
        return []


@app.command()
def backfill(
    ctx: typer.Context,
    name: NameArg,
    request: Annotated[
        int | None,
        typer.Argument(help="with --cancel: the request to cancel (default: all)", metavar="ID"),
    ] = None,
    tables: Annotated[
        list[str] | None,
        typer.Option("--table", "-t", help="a table to re-read, repeatable (default: every table it reads)"),
    ] = None,
    where: Annotated[
        str | None, typer.Option("--where", help="re-read the rows matching this SQL condition")
    ] = None,
    low: Annotated[str | None, typer.Option("--from", help="re-read from this value of the column")] = None,
    high: Annotated[str | None, typer.Option("--to", help="up to this value (excluded)")] = None,
    column: Annotated[
        str,
        typer.Option(
            "--column",
            help="the column of --from/--to (default: each table's timestamp, incrementing or key)",
        ),
    ] = "",
    show: Annotated[
        bool, typer.Option("--status", help="the requests and each table's progress (the default)")
    ] = False,
    cancel: Annotated[bool, typer.Option("--cancel", help="cancel request ID, or all of them")] = False,
    output: OutputOpt = Output.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Re-read a past range of a running source's tables while it streams (jdbc-source, mysql-cdc,
    postgres-cdc): --where EXPR, or --from A --to B on a column. Without a range: the requests and
    their progress; --cancel [ID] stops them (docs/backfill.md)."""
    begin(ctx, debug)
    ranged = where is not None or low is not None or high is not None or bool(column)
    if ranged + show + cancel > 1:
        raise UsageError("give a range (--where, or --from/--to), --status or --cancel: one of them")
    if request is not None and not cancel:
        raise UsageError(
            f"a request ID goes with --cancel: sluice connector backfill {name} --cancel {request}"
        )
    if tables and not ranged:
        raise UsageError("--table goes with the range to re-read: --where EXPR, or --from/--to")
    if cancel:
        ids = call(lambda c: c.cancel_backfill(name, request))
        if output == Output.JSON:
            render.print_json({"cancelled": ids})
        elif ids:
            print(f"connector {name}: backfill request(s) {', '.join(map(str, ids))} cancelled")
        else:
            print(f"connector {name}: no backfill request left to cancel")
    elif ranged:
        created = call(
            lambda c: c.backfill(name, tables or [], where=where, column=column, low=low, high=high)
        )
        if output == Output.JSON:
            from sluice.worker.backfills import request_json

            render.print_json({"backfills": [request_json(r) for r in created]})
        else:
            render.console().print(render.backfills_created(name, created))
    else:
        statuses = call(lambda c: c.backfills(name))
        if output == Output.JSON:
            render.print_json({"backfills": [s.to_json() for s in statuses]})
        else:
            render.console().print(render.backfills_table(name, statuses))


@app.command()
def config(
    ctx: typer.Context, name: NameArg, output: OutputOpt = Output.TABLE, debug: DebugOpt = False
) -> None:
    """The connector's config (secrets masked)."""
    begin(ctx, debug)

    async def run(client: SluiceClient) -> tuple[dict[str, str], str]:
        return await client.config(name), (await client.status(name)).connector_class

    cfg, cls = call(run)
    shown = render.masked(cfg, cls)
    if output == Output.JSON:
        render.print_json(shown)
    else:
        render.console().print(render.config_table(shown, title=f"config of {name}"))


@app.command()
def tasks(
    ctx: typer.Context, name: NameArg, output: OutputOpt = Output.TABLE, debug: DebugOpt = False
) -> None:
    """The task configs the connector was split into (secrets masked)."""
    begin(ctx, debug)

    async def run(client: SluiceClient) -> tuple[list[dict[str, str]], str]:
        return await client.tasks(name), (await client.status(name)).connector_class

    configs, cls = call(run)
    if output == Output.JSON:
        render.print_json([render.masked(c, cls) for c in configs])
    else:
        render.console().print(render.tasks_config_view(name, configs, cls))


@app.command()
def pause(
    ctx: typer.Context, name: NameArg, output: OutputOpt = Output.TABLE, debug: DebugOpt = False
) -> None:
    """Pause: tasks finish their batch and wait (offsets kept)."""
    begin(ctx, debug)
    _show(call(lambda c: c.pause(name)), output)


@app.command()
def resume(
    ctx: typer.Context, name: NameArg, output: OutputOpt = Output.TABLE, debug: DebugOpt = False
) -> None:
    """Resume a PAUSED or STOPPED connector."""
    begin(ctx, debug)
    _show(call(lambda c: c.resume(name)), output)


@app.command()
def stop(
    ctx: typer.Context, name: NameArg, output: OutputOpt = Output.TABLE, debug: DebugOpt = False
) -> None:
    """Stop (Kafka's STOPPED): tasks end, config and offsets are kept; `offsets alter|reset` need this."""
    begin(ctx, debug)
    _show(call(lambda c: c.stop(name)), output)


@app.command()
def restart(
    ctx: typer.Context,
    name: NameArg,
    include_tasks: Annotated[
        bool, typer.Option("--include-tasks", help="restart the tasks too (Sluice always does; Kafka's flag)")
    ] = False,
    only_failed: Annotated[
        bool, typer.Option("--only-failed", "--failed", help="restart only the FAILED tasks")
    ] = False,
    output: OutputOpt = Output.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Restart the connector's tasks: all of them, or with --only-failed the FAILED ones.

    A Sluice connector has no process apart from its tasks, so Kafka's connector-only restart (no
    flags) restarts the tasks as --include-tasks does.
    """
    begin(ctx, debug)
    _show(call(lambda c: c.restart(name, only_failed=only_failed)), output)


@app.command()
def reconfigure(
    ctx: typer.Context,
    name: NameArg,
    file: FileOpt = None,
    sets: SetOpt = None,
    merge: Annotated[
        bool, typer.Option("--merge", help="start from the current config (Kafka's PATCH), not an empty one")
    ] = False,
    output: OutputOpt = Output.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Replace the connector's config (validated first); running tasks restart with it."""
    begin(ctx, debug)
    name, new, _ = _named(name, file, sets)
    if not new and not merge:
        raise UsageError("give the new config with --config-file or --set")

    async def run(client: SluiceClient) -> ConnectorStatus:
        base = await client.config(name) if merge else {}
        return await client.reconfigure(name, {**base, **new})

    _show(call(run), output)


@app.command()
def delete(
    ctx: typer.Context,
    name: NameArg,
    keep_offsets: Annotated[bool, typer.Option("--keep-offsets", help="keep its committed offsets")] = False,
    output: OutputOpt = Output.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Delete the connector (its running batch finishes first) and, unless --keep-offsets, its offsets."""
    begin(ctx, debug)
    call(lambda c: c.delete(name, delete_offsets=not keep_offsets))
    if output == Output.JSON:
        render.print_json({"name": name, "deleted": True, "offsets_kept": keep_offsets})
    else:
        print(f"connector {name} deleted")


@app.command()
def preview(
    ctx: typer.Context,
    file: FileOpt = None,
    sets: SetOpt = None,
    records: Annotated[int, typer.Option("--records", "-n", min=1, help="at most this many records")] = 10,
    output: OutputOpt = Output.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Take a new config through one batch and show what it would do: a source's read, transforms
    and converter (the messages it would send); a sink's decode and transforms of its topics' first
    messages (its records, and the DDL and writes it would make). Nothing is sent, written or
    committed (activities.preview)."""
    # connector plugins and the record stages: only this command
    from sluice.activities.preview import PreviewError, SourcePreview
    from sluice.activities.preview import preview as first_batch
    from sluice.worker.settings import settings

    begin(ctx, debug)
    if not file and not sets:
        raise UsageError("give a config file (-f) or --set KEY=VALUE entries to preview")
    loaded = load_config(file, sets or [])
    name = loaded.name or "preview"
    try:
        shown = first_batch(name, loaded.config, records, {}, settings().namesrv)
    except PreviewError as exc:
        raise ConnectorConfigError(name, exc.problems) from None
    if output == Output.JSON:
        render.print_json(render.preview_json(shown))
    else:
        render.console().print(render.preview_view(shown))
    stopped = shown.bad if isinstance(shown, SourcePreview) else (shown.bad or shown.refused)
    if stopped is not None:
        raise ConnectorConfigError(name, [stopped])
