"""The `sluice` command line (Typer + Rich): the local stack, the worker, connectors and plugins.

Commands live in ``worker/cli_*.py``; this module assembles them and owns the process's exit:
:func:`main` turns every failure into one stderr line and a documented exit code (``sluice.worker.errors``;
``--debug`` adds the traceback), and :func:`entry` is the console script.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated

import typer

# Typer vendors Click (typer>=0.29); its exceptions are only reachable under ``typer._click``.
from typer._click.exceptions import ClickException, NoArgsIsHelpError

from sluice.deploy.local.process import StackError
from sluice.deploy.local.rocketmq import mqadmin as run_mqadmin
from sluice.worker import cli_connector, cli_offsets, cli_plugins, cli_verify, cli_watch
from sluice.worker.cli_common import (
    DEBUG_HELP,
    STATE,
    UNRELEASED_RUNTIMES,
    CommandFailed,
    DebugOpt,
    Output,
    OutputOpt,
    begin,
    describe,
    report,
)
from sluice.worker.errors import EXIT_USAGE
from sluice.worker.settings import settings, settings_or_exit

EXIT_CODES_HELP = cli_connector.EXIT_CODES_HELP

app = typer.Typer(
    name="sluice",
    help="Sluice data-integration runtime.",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _root(debug: Annotated[bool, typer.Option("--debug", "-v", help=DEBUG_HELP)] = False) -> None:
    STATE.debug = debug


@app.command("stack")
def stack_command(
    ctx: typer.Context,
    action: Annotated[str, typer.Argument(help="up | down | status", metavar="up|down|status")],
    output: OutputOpt = Output.TEXT,
    debug: DebugOpt = False,
) -> None:
    """The local stack of real services (PostgreSQL, MariaDB, Temporal, two RocketMQ clusters,
    OpenSearch, Mosquitto)."""
    from sluice.deploy.local import stack as local  # the services' modules (~10 ms): only this command

    begin(ctx, debug)
    if action not in ("up", "down", "status"):
        raise typer.BadParameter(f"expected up, down or status, got {action!r}", param_hint="ACTION")
    STATE.prog = f"sluice stack {action}"
    cfg = settings().stack
    try:
        if action == "up":
            statuses = local.up(cfg)
        elif action == "down":
            local.down(cfg)
            print("stack stopped; state kept in", cfg.state_dir)
            return
        else:
            statuses = local.status(cfg)
    except StackError as exc:
        raise CommandFailed(str(exc), 1) from exc
    healthy = all(s.healthy for s in statuses)
    if output == Output.JSON:
        print(json.dumps({"healthy": healthy, "services": local.status_as_dicts(statuses)}, indent=2))
    else:
        for s in statuses:
            print(f"{s.name:<24} {'up' if s.healthy else 'DOWN':<5} {s.address}")
        print(f"Temporal UI: {cfg.temporal_ui_url}")
    if action == "up" and (warning := local.stack_disk_warning(cfg)):
        print(f"{STATE.prog}: warning: {warning}", file=sys.stderr)
    if not healthy:
        raise typer.Exit(1)


@app.command("worker")
def worker_command(ctx: typer.Context, debug: DebugOpt = False) -> None:
    """Run a Temporal worker (connector workflows and task activities)."""
    from sluice.worker.main import main as worker_main  # pyspark, activities, plugins: only this command

    begin(ctx, debug)
    worker_main()


@app.command("rest")
def rest_command(
    ctx: typer.Context,
    host: Annotated[str | None, typer.Option(help="default SLUICE_REST_HOST (127.0.0.1)")] = None,
    port: Annotated[int | None, typer.Option(help="default SLUICE_REST_PORT (8082)")] = None,
    debug: DebugOpt = False,
) -> None:
    """Serve RocketMQ Connect's and Kafka Connect's REST APIs (worker/rest)."""
    from sluice.worker.rest.server import serve  # fastapi, uvicorn: only this command

    begin(ctx, debug)
    serve(host, port)


@app.command()
def keygen(ctx: typer.Context) -> None:
    """Print a key for SLUICE_PAYLOAD_KEY (encrypted Temporal payloads)."""
    from cryptography.fernet import Fernet  # cryptography (~7 ms): only this command needs it

    begin(ctx)
    print(Fernet.generate_key().decode())


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}
)
def mqadmin(ctx: typer.Context) -> None:
    """RocketMQ's admin tool against the configured name server (arguments passed through)."""
    begin(ctx)
    result = run_mqadmin(settings().stack, *ctx.args)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    raise typer.Exit(result.returncode)


cli_connector.app.add_typer(cli_offsets.app, name="offsets")
cli_connector.app.command("watch")(cli_watch.watch)
app.add_typer(cli_connector.app, name="connector")
app.command("plugins")(cli_plugins.plugins)
app.command("verify", epilog=cli_verify.VERIFY_EXIT_HELP)(cli_verify.verify_command)
# Other surfaces register here, one line each (e.g. `sluice rest`: app.command("rest")(cli_rest.rest)).


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit code and never exits the caller (tests call it in-process).

    Exit codes: see ``sluice.worker.errors`` (0 ok, 1 unexpected, 2 usage/config, 3 not found, ...).
    """
    STATE.prog, STATE.debug = "sluice", False
    args = sys.argv[1:] if argv is None else list(argv)
    if not _only_help(args):
        settings_or_exit()  # a bad SLUICE_* value: one line naming it, before any command runs
    command = typer.main.get_command(app)
    try:
        code = command.main(args=args, prog_name="sluice", standalone_mode=False)
    except typer.Exit as done:
        return done.exit_code
    except NoArgsIsHelpError as exc:  # `sluice`, `sluice connector`: the help, as Click would
        print(exc.format_message(), file=sys.stderr)
        return EXIT_USAGE
    except ClickException as exc:  # usage: one line, exit 2 (Click prints a usage block)
        where = exc.ctx.command_path if getattr(exc, "ctx", None) else "sluice"  # type: ignore[attr-defined]
        hint = f" (see `{where} --help`)"
        print(f"{where}: {' '.join(exc.format_message().split())}{hint}", file=sys.stderr, flush=True)
        return EXIT_USAGE if exc.exit_code in (1, 2) else exc.exit_code
    except BaseException as exc:  # noqa: BLE001 - every failure is one line and an exit code
        if isinstance(exc, SystemExit):
            raise
        failure = describe(exc)
        del exc  # its traceback may reference a Temporal client; drop it before returning
        report(failure)
        return failure.exit_code
    return code if isinstance(code, int) else 0


def _only_help(args: list[str]) -> bool:
    return any(a in ("--help", "-h") for a in args) and "mqadmin" not in args


def entry() -> None:
    """The ``sluice`` console script: ``main``, then exit — without interpreter finalization if a
    Temporal runtime could not be released (its threads would crash the process while it finalizes)."""
    code = main()
    if UNRELEASED_RUNTIMES:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    entry()
