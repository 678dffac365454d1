"""A real Prometheus server for tests: Debian's ``prometheus`` package, started on 127.0.0.1.

The package is installed on first use (apt-get, as the stack's Java is), so ``make test`` needs
nothing set up beforehand. The server scrapes the given targets every second and keeps its data in
a temporary folder; ``query`` answers through its HTTP API, as Grafana would ask it.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCRAPE_INTERVAL_S = 1


def ensure_prometheus() -> tuple[str, str]:
    """Paths of ``prometheus`` and ``promtool``, installing Debian's package when missing."""
    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "prometheus"]
        if subprocess.run(install, capture_output=True).returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], check=True, capture_output=True)
            subprocess.run(install, check=True, capture_output=True)
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    assert prometheus and promtool, "Debian's prometheus package installed no prometheus/promtool"
    return prometheus, promtool


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Prometheus:
    url: str

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` evaluates to now; an invalid expression raises naming it."""
        params = urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/query?{params}", timeout=10) as answer:
                body = json.load(answer)
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"Prometheus refused {expr!r}: {exc.read().decode()}") from None
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def value(self, expr: str) -> float | None:
        """The single value of ``expr`` (None when it has no sample)."""
        found = self.query(expr)
        assert len(found) <= 1, f"{expr!r} gave {len(found)} series: {found}"
        return float(found[0]["value"][1]) if found else None

    def metric_names(self) -> set[str]:
        with urllib.request.urlopen(f"{self.url}/api/v1/label/__name__/values", timeout=10) as answer:
            return set(json.load(answer)["data"])


@contextmanager
def prometheus_server(targets: list[str], workdir: Path) -> Iterator[Prometheus]:
    """Prometheus scraping ``targets`` (``host:port``, path /metrics) until the block ends."""
    binary, _ = ensure_prometheus()
    port = _free_port()
    config = workdir / "prometheus.yml"
    config.write_text(
        json.dumps(  # JSON is YAML
            {
                "global": {"scrape_interval": f"{SCRAPE_INTERVAL_S}s", "evaluation_interval": "1s"},
                "scrape_configs": [{"job_name": "sluice", "static_configs": [{"targets": targets}]}],
            }
        )
    )
    log = (workdir / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    server = Prometheus(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{server.url}/-/ready", timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        f"Prometheus did not start:\n{(workdir / 'prometheus.log').read_text()[-2000:]}"
                    ) from None
                time.sleep(0.3)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
