"""Whether a worker process on this machine has ended (activities.processes): a worker restarted
in place takes its predecessor's tasks at once, so "ended" must never be said of a live process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sluice.activities.processes import Process, has_ended, start_ticks, this_process

#: /proc/<pid>/stat of a process whose command name holds a space and a parenthesis.
STAT = "4242 (sluice w) rk) S 1 4242 4242 0 -1 4194560 900 0 0 0 12 3 0 0 20 0 7 0 {started} 1 2 3\n"


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    """A /proc with process 4242 started at tick 777."""
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "stat").write_text(STAT.format(started=777))
    return tmp_path


def test_start_ticks_reads_field_22_past_any_command_name(proc: Path) -> None:
    assert start_ticks(4242, proc) == 777
    assert start_ticks(4243, proc) is None


@pytest.mark.parametrize(
    ("recorded", "ended"),
    [
        (Process("m", 4242, 777), False),  # still runs
        (Process("m", 4243, 777), True),  # no such process any more
        (Process("m", 4242, 500), True),  # its pid now belongs to a newer process
        (Process("elsewhere", 4243, 777), False),  # another machine's pid says nothing here
        (Process("m", 1, 1), False),  # this very process
    ],
)
def test_has_ended(proc: Path, recorded: Process, ended: bool) -> None:
    here = Process("m", 1, 1)
    assert has_ended(recorded, here, proc) is ended


def test_a_killed_process_on_this_machine_has_ended() -> None:
    here = this_process()
    if here is None:
        pytest.skip("no /proc here: workers are told lost by their lease's age alone")
    assert here.pid == os.getpid()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = start_ticks(child.pid)
        assert started is not None
        recorded = Process(here.machine, child.pid, started)
        assert not has_ended(recorded, here)
    finally:
        child.kill()
        child.wait()
    assert has_ended(recorded, here)
