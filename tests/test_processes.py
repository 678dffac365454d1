"""Whether a worker process on this machine has ended (activities.processes): a worker restarted
in place takes its predecessor's tasks at once, so "ended" must never be said of a live process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
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


def test_has_ended() -> None:
    me = os.getpid()
    started = start_ticks(me)
    if started is None:
        pytest.skip("no /proc here: workers are told lost by their lease's age alone")
    reaped = subprocess.Popen([sys.executable, "-c", "pass"])
    reaped.wait()
    zombie = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    zombie_started = start_ticks(zombie.pid)
    zombie.kill()
    time.sleep(0.5)  # killed, and left unreaped until the table is read
    here = Process("m", 1, 1)
    cases = [
        ("still runs", Process("m", me, started), False),
        ("no such process any more", Process("m", reaped.pid, 777), True),
        ("its pid now belongs to a newer process", Process("m", me, started - 1), True),
        ("another machine's pid says nothing here", Process("elsewhere", reaped.pid, 777), False),
        ("this very process", here, False),
        ("killed, not yet reaped by its parent", Process("m", zombie.pid, zombie_started or 0), True),
    ]
    try:
        assert [(what, has_ended(recorded, here)) for what, recorded, _ in cases] == [
            (what, ended) for what, _, ended in cases
        ]
    finally:
        zombie.wait()


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
