"""Which process a worker is, and whether a worker process on this machine still runs.

A worker's lease tells its liveness by time: another worker takes its tasks once it has been
silent for ``task.heartbeat.timeout.s``. A worker restarted where the old one ran (systemd,
supervisord, a process manager, a bench) need not wait that long: the old process's pid is in the
same process table, so whether it still runs is a fact, not a guess (activities.leases).

That holds only between processes that see one process table: the same kernel boot and the same
pid namespace (containers each have their own). ``Process.machine`` names exactly that, and a pid
is compared with its start time, so a pid the kernel gave to a new process after the old one
died never looks like the old worker. Off Linux (no ``/proc``) a worker records no process and
its lease is told by time alone.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class Process:
    """A process, as another process on the same machine can check it."""

    #: host name, kernel boot id and pid namespace: pids compare only within one of these
    machine: str
    pid: int
    #: start time in clock ticks after boot (``/proc/<pid>/stat``, field 22): tells a reused pid apart
    started: int


def this_process(proc: Path = PROC) -> Process | None:
    """This process, or None where it cannot be checked by others (no ``/proc``)."""
    try:
        boot_id = (proc / "sys/kernel/random/boot_id").read_text().strip()
        pid_namespace = os.readlink(proc / "self/ns/pid")
        started = start_ticks(os.getpid(), proc)
    except OSError:
        return None
    if started is None:
        return None
    return Process(f"{socket.gethostname()}/{boot_id}/{pid_namespace}", os.getpid(), started)


def start_ticks(pid: int, proc: Path = PROC) -> int | None:
    """When ``pid`` started (clock ticks after boot), or None when no such process runs."""
    fields = _stat_fields(pid, proc)
    return None if fields is None else int(fields[19])  # field 22


def _stat_fields(pid: int, proc: Path = PROC) -> list[str] | None:
    """``/proc/<pid>/stat`` from field 3 (the state) on, or None when there is no such file."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except FileNotFoundError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces and parentheses itself.
    return stat[stat.rindex(")") + 2 :].split()


def has_ended(process: Process, here: Process) -> bool:
    """Whether ``process``, recorded on ``here``'s machine, has certainly ended.

    False whenever it cannot be told (another machine, an unreadable process): a live worker's
    tasks must never be taken on a guess."""
    if process.machine != here.machine or process == here:
        return False
    try:
        os.kill(process.pid, 0)  # signal 0: only asks whether the pid exists
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process holds the pid: it may be the worker
        return False
    try:
        fields = _stat_fields(process.pid)
    except OSError:
        return False
    if fields is None:  # the pid runs but /proc hides it from this user (hidepid): cannot tell
        return False
    # A zombie (killed, not yet reaped by its parent) runs no code any more; a newer process that
    # got the pid has another start time.
    return fields[0] == "Z" or int(fields[19]) != process.started
