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
    """The connector's state, each task's state, attempt, last error and detail, and its config."""
    begin(ctx, debug)
    _show(call(lambda c: c.status(name)), output)


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
