"""What every `sluice` command shares: options, the client call, and failures as one line + exit code.

Why commands call :func:`call` instead of ``asyncio.run`` directly: each command runs on a Temporal
runtime of its own, released before the process exits (see ``sluice.worker.temporal_client``: the SDK's
default runtime is torn down during interpreter finalization and then crashes the process with
exit 134/139 after a success). A failure is turned into a :class:`CommandFailed` *after* that
release — the original exception's traceback references the client, which would keep the runtime
alive — and ``--debug`` prints the traceback before it is dropped.
"""

from __future__ import annotations

import asyncio
import os
import sys
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from sluice.worker.errors import EXIT_INTERRUPTED, EXIT_UNEXPECTED, SluiceError, one_line
from sluice.worker.settings import settings
from sluice.worker.temporal_client import OwnedRuntime

if TYPE_CHECKING:
    from sluice.worker.client import SluiceClient

T = TypeVar("T")

DEBUG_HELP = "on an error, print its traceback too (normally one line)"


class Output(StrEnum):
    """``table`` (also ``text``) for people, ``json`` for scripts."""

    TABLE = "table"
    TEXT = "text"
    JSON = "json"


OutputOpt = Annotated[
    Output, typer.Option("--output", "-o", help="table for people, json for scripts", case_sensitive=False)
]
DebugOpt = Annotated[bool, typer.Option("--debug", "-v", help=DEBUG_HELP)]


@dataclass
class _State:
    """The running command: its name for error lines (``sluice connector status``) and --debug."""

    prog: str = "sluice"
    debug: bool = False


STATE = _State()

# Runtimes a command could not release; only the process's entry point may act on it (a caller of
# ``main`` in-process, such as a test, must never be exited from under it).
UNRELEASED_RUNTIMES: list[object] = []


class CommandFailed(Exception):
    """A command's failure, already reduced to its one line and exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def begin(ctx: typer.Context, debug: bool = False) -> None:
    """Every command's first line: remember its name and whether --debug was given after it."""
    STATE.prog = ctx.command_path
    STATE.debug = STATE.debug or debug


def describe(exc: BaseException) -> CommandFailed:
    """Any failure as one line and an exit code (worker.errors); with --debug, its traceback first."""
    if isinstance(exc, CommandFailed):
        return exc
    if STATE.debug:
        traceback.print_exception(exc, file=sys.stderr)
    if isinstance(exc, SluiceError):
        return CommandFailed(str(exc), exc.exit_code)
    if isinstance(exc, KeyboardInterrupt):
        return CommandFailed("interrupted", EXIT_INTERRUPTED)
    return CommandFailed(
        f"unexpected error: {one_line(exc)} (run `sluice --debug ...` for the traceback)", EXIT_UNEXPECTED
    )


def report(failure: CommandFailed) -> None:
    """The one stderr line: ``sluice connector status: connector x not found``."""
    print(f"{STATE.prog}: {' '.join(str(failure).split())}", file=sys.stderr, flush=True)


def call(action: Callable[[SluiceClient], Awaitable[T]]) -> T:
    """Connect (settings from ``SLUICE_*``), run ``action``, release the runtime; raise CommandFailed."""
    owned = OwnedRuntime()
    failure: CommandFailed | None = None
    try:
        result = asyncio.run(_with_client(action, owned))
    except BaseException as exc:  # noqa: BLE001 - every failure becomes one line (KeyboardInterrupt too)
        failure = describe(exc)
        # already one line: its traceback (frames that hold the client) must not keep the runtime
        failure.__traceback__ = failure.__context__ = failure.__cause__ = None
    if not owned.release():
        # Never seen in tests: something still holds the client, so the runtime's threads would
        # outlive the interpreter. ``entry`` (the console script) then skips finalization.
        UNRELEASED_RUNTIMES.append(owned)
    if failure is not None:
        raise failure
    return result


async def _with_client(action: Callable[[SluiceClient], Awaitable[T]], owned: OwnedRuntime) -> T:
    # the client's modules (~10 ms): for commands that connect, not at the CLI's start
    from sluice.worker.client import SluiceClient

    env = settings()
    client = await SluiceClient.connect(
        env.temporal_address,
        env.temporal_namespace,
        env.task_queue,
        runtime=owned.runtime,
    )
    return await action(client)


def wide_enough() -> int | None:
    """Rich's width: the terminal's, else $COLUMNS, else 200 so piped tables are not wrapped at 80."""
    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return None
    return 200
