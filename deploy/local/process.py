"""Start, watch and stop the background processes of the local stack.

Each service is a detached process whose pid lives in ``<state>/run/<name>.pid`` and whose output
goes to ``<state>/logs/<name>.log``, so ``sluice stack`` commands in separate invocations (and the
test suite) find and manage the same processes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


class StackError(RuntimeError):
    """A service could not be started or checked; the message names it, its log and the fix."""


@dataclass(frozen=True)
class ManagedProcess:
    """Where one service keeps its pid and log."""

    name: str
    state_dir: Path

    @property
    def pid_file(self) -> Path:
        return self.state_dir / "run" / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.state_dir / "logs" / f"{self.name}.log"

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        return pid if pid_alive(pid) else None

    def is_running(self) -> bool:
        return self.pid() is not None

    def start(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None
    ) -> int:
        """Start detached (own session, so Ctrl-C of the caller does not kill it); return the pid."""
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as log:
            log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(argv)}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                list(argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
                cwd=cwd,
                start_new_session=True,
            )
        self.pid_file.write_text(str(proc.pid))
        return proc.pid

    def stop(self, timeout_s: float = 30.0, stop_signal: signal.Signals = signal.SIGTERM) -> None:
        """Signal the process group, wait, then SIGKILL what is left."""
        pid = self.pid()
        if pid is not None:
            _signal_group(pid, stop_signal)
            deadline = time.monotonic() + timeout_s
            while pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if pid_alive(pid):
                _signal_group(pid, signal.SIGKILL)
                while pid_alive(pid) and time.monotonic() < deadline + 10:
                    time.sleep(0.1)
        self.pid_file.unlink(missing_ok=True)

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as dead.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def port_open(host: str, port: int, timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def ensure_port_free(service: str, host: str, port: int, env_var: str) -> None:
    if port_open(host, port):
        raise StackError(
            f"{service}: port {host}:{port} is already taken by another process; "
            f"free it or choose another port with {env_var}=<port>"
        )


def wait_until(
    check: Callable[[], bool],
    *,
    service: str,
    proc: ManagedProcess,
    timeout_s: float,
    interval_s: float = 0.5,
) -> None:
    """Poll ``check`` until it passes; fail early (with the log tail) if the process died."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        if not proc.is_running():
            raise StackError(f"{service} exited during start-up; see {proc.log_file}:\n{proc.log_tail()}")
        time.sleep(interval_s)
    raise StackError(
        f"{service} did not become healthy within {timeout_s:.0f}s; see {proc.log_file}:\n{proc.log_tail()}"
    )


#: apt-get holds dpkg's lock: services of one wave (deploy.local.stack) install one at a time.
_APT = threading.Lock()


def apt_install(service: str, package: str, system_service: str) -> None:
    """Install Debian's ``package`` (root only), then stop the system server its install starts:
    the stack runs its own, on its own ports. Errors name the service and the failing command."""
    if os.geteuid() != 0:
        raise StackError(f"{service}: {package} is not installed; run `sudo apt-get install -y {package}`")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    with _APT:
        for argv in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", package]):
            result = subprocess.run(argv, env=env, capture_output=True, text=True)
            if result.returncode != 0:
                raise StackError(f"{service}: `{' '.join(argv)}` failed: {result.stderr.strip()[-500:]}")
        subprocess.run(["service", system_service, "stop"], capture_output=True)
