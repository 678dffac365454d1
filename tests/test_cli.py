"""The CLI's own contract: config parsing, the exit-code table, the Temporal runtime it releases.

End-to-end exit codes of real `sluice connector` processes are in tests/runtime/test_cli_exit_codes.py.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest

from sluice.deploy.local.config import StackConfig
from sluice.worker.cli import main
from sluice.worker.errors import (
    ConnectorConfigError,
    ConnectorExistsError,
    ConnectorNotFoundError,
    ConnectorStateError,
    SluiceError,
    TemporalUnavailableError,
    UsageError,
    one_line,
)
from sluice.worker.temporal_client import OwnedRuntime, connect


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["connector", "status"], "sluice connector status: Missing argument 'NAME'"),
        (["connector", "nope"], "sluice connector: No such command 'nope'"),
        (["connector", "list", "--output", "xml"], "sluice connector list: Invalid value for '--output'"),
        (["stack", "sideways"], "sluice stack: Invalid value for ACTION"),
        (["connector", "create", "c1", "--set", "oops"], "sluice connector create: --set takes KEY=VALUE"),
        (["connector", "create"], "sluice connector create: give the connector's NAME"),
        (["connector", "offsets", "alter", "c1"], "sluice connector offsets alter: give the offsets"),
        (["connector", "watch", "c1", "--interval", "0"], "--interval must be > 0"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before any connection: Click's usage errors and Sluice's own are one stderr line, exit 2."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], captured.err


def test_help_lists_every_command_and_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["connector", "--help"]) == 0
    out = capsys.readouterr().out
    for command in (
        "create", "validate", "list", "status", "config", "tasks", "pause", "resume", "stop",
        "restart", "reconfigure", "delete", "watch", "offsets",
    ):  # fmt: skip
        assert f"  {command} " in out, command
    assert "3  connector not found" in out and "7  the connector did not answer" in out
    assert main(["connector", "restart", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--include-tasks" in out and "--only-failed" in out
    assert main([]) == 2 and "Usage: sluice" in capsys.readouterr().err


def test_exit_codes_are_distinct_and_messages_name_the_connector() -> None:
    cause = ValueError("ValueError: connector c1 is STOPPED; this needs one of ['RUNNING']\nmore")
    refused = ConnectorStateError("c1", "pause", cause)
    errors: list[SluiceError] = [
        ConnectorConfigError("c1", ["topic: is required", "tasks.max: must be >= 1"]),
        ConnectorNotFoundError("c1"),
        ConnectorExistsError("c1"),
        refused,
        TemporalUnavailableError("localhost:1", "connection refused"),
    ]
    assert [e.exit_code for e in errors] == [2, 3, 4, 5, 6]
    for error in errors[:4]:
        assert "c1" in str(error) and "\n" not in str(error), str(error)
    assert str(refused) == "cannot pause connector c1: connector c1 is STOPPED; this needs one of ['RUNNING']"
    assert refused.cause is cause and refused.connector == "c1"
    assert one_line(RuntimeError("first\nsecond")) == "RuntimeError: first"
    assert UsageError.exit_code == 2 and SluiceError.exit_code == 1


def _thread_count() -> int:
    """The Temporal runtime's (Tokio) threads in this process; other tests' threads come and go."""
    names = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as comm:
                names.append(comm.read().strip())
        except FileNotFoundError:  # the thread ended while we listed
            continue
    return sum(name.startswith("tokio") for name in names)


def _thread_count_settles_at(expected: int, timeout_s: float = 10.0) -> int:
    """The Tokio thread count once it reaches ``expected`` (threads of a dropped runtime take a
    moment to exit on a loaded machine), or the last count seen."""
    deadline = time.monotonic() + timeout_s
    while (count := _thread_count()) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return count


def test_owned_runtime_joins_its_threads_once_clients_are_gone(stack_config: StackConfig) -> None:
    """The fix for exits 134/139: the runtime's Tokio threads end before the interpreter does."""
    before = _thread_count()
    owned = OwnedRuntime()

    async def use() -> object:
        client = await connect(stack_config.temporal_address, stack_config.temporal_namespace, owned.runtime)
        await client.count_workflows("WorkflowType='ConnectorWorkflow'")
        return client

    held = asyncio.run(use())
    assert _thread_count() > before, "the runtime should run threads of its own"
    assert owned.release() is False, "a live client keeps the runtime (and its threads) alive"
    del held
    assert owned.release() is True
    assert _thread_count_settles_at(before) == before, "the released runtime's threads must end"
    with pytest.raises(RuntimeError, match="released"):
        owned.runtime  # noqa: B018


def test_main_releases_the_runtime_after_an_error(
    stack_config: StackConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    """The error's traceback (which references the client) must not keep the command's runtime."""
    from sluice.worker.cli_common import UNRELEASED_RUNTIMES

    code = main(["connector", "status", "surely-not-a-connector-name"])
    assert code == 3
    assert capsys.readouterr().err.strip() == (
        "sluice connector status: connector surely-not-a-connector-name not found"
    )
    assert UNRELEASED_RUNTIMES == [], "the command's Temporal runtime is still referenced"


def test_connector_commands_do_not_import_spark(stack_config: StackConfig) -> None:
    """Startup stays light: validating and talking to Temporal needs neither Spark nor SQL."""
    probe = (
        "import sys; from sluice.worker.cli import main; "
        "code = main(['connector', 'create', 'light', '--set', 'connector.class=file-source']); "
        "print(code, sorted(m for m in ('pyspark', 'py4j', 'sqlalchemy', 'pyarrow') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "2 []", result
    assert "connector light has an invalid configuration" in result.stderr


def test_watch_frame_shows_records_rate_last_batch_and_lag() -> None:
    """The watch view's arithmetic: records/s between two heartbeats of one run, reset on a new run."""
    from rich.console import Console

    from sluice.worker.cli_watch import Beat, Rates, frame
    from sluice.workflows.types import ConnectorState, ConnectorStatus, TaskState, TaskStatus

    status = ConnectorStatus(
        name="w1",
        config={},
        state=ConnectorState.RUNNING,
        connector_class="dummy-source",
        kind="source",
        tasks=[TaskStatus(0, TaskState.RUNNING, attempt=1), TaskStatus(1, TaskState.FAILED, error="boom")],
    )
    rates = Rates()
    details = {"records": 100, "batches": 2, "last_committed_batch": 1, "phase": "idle"}
    frame(status, {0: Beat("task-0-g0-a1", details, at=10.0)}, rates, 1.0)
    later = {**details, "records": 400, "last_committed_batch": 7, "lag": {"q0": 12}}
    view = frame(status, {0: Beat("task-0-g0-a1", later, at=12.0)}, rates, 1.0)
    console = Console(width=200, record=True, force_terminal=True)
    console.print(view)
    text = console.export_text()
    row = next(line for line in text.splitlines() if line.startswith("│ 0"))
    cells = [c.strip() for c in row.split("│")[1:-1]]
    assert cells[:6] == ["0", "RUNNING", "1", "400", "150.0", "7"], cells
    assert "boom" in text and "lag per partition" in text and "q0" in text and "12" in text
    # A new run of the task (another activity id) counts from zero: no rate until its second beat.
    assert rates.update(0, Beat("task-0-g1-a2", {"records": 5}, at=13.0)) is None
    assert rates.update(0, Beat("task-0-g1-a2", {"records": 25}, at=14.0)) == 20.0
