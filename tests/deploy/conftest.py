"""A real ``helm`` for the chart tests, built once per machine from the Go module proxy.

No well-kept PyPI package ships the helm binary, and only package registries are reachable, so the
session builds Helm's own command with ``go install`` (about five minutes with empty Go caches, a
few seconds once Go's module and build caches hold it) into the state folder (``.sluice/tools``,
git-ignored) and reuses it from then on. Nothing here needs the local stack or a JVM.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.worker.settings import settings

HELM_VERSION = "v3.22.0"
HELM_MODULE = "helm.sh/helm/v3"
#: Over twice the slowest build seen (5 min on 2 shared cores with empty Go caches); the first test's
#: setup counts against its pytest timeout, which tests/deploy/test_helm_chart.py raises above this.
BUILD_TIMEOUT_S = 780


def _go() -> str:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not Path(go).is_file():
        pytest.fail(f"building helm {HELM_VERSION} needs the Go toolchain (`go` on PATH or {go})")
    return go


def _build_helm(target: Path) -> None:
    """``go install`` into a private folder, then move into place: a half-built binary is never seen."""
    ldflags = f"-s -w -X {HELM_MODULE}/internal/version.version={HELM_VERSION}"
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as gobin:
        env = {**os.environ, "GOBIN": gobin, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": ""}
        result = subprocess.run(
            [_go(), "install", "-trimpath", f"-ldflags={ldflags}", f"{HELM_MODULE}/cmd/helm@{HELM_VERSION}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
        )
        if result.returncode != 0:
            pytest.fail(f"go install helm {HELM_VERSION} failed:\n{result.stderr[-4000:]}")
        os.replace(Path(gobin) / "helm", target)


@pytest.fixture(scope="session")
def helm_binary() -> Path:
    tools = settings().state_dir / "tools" / f"helm-{HELM_VERSION}"
    tools.mkdir(parents=True, exist_ok=True)
    target = tools / "helm"
    # Two test sessions starting at once (two work trees' `make test`) build it once.
    with (tools / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.is_file():
            _build_helm(target)
    return target


@pytest.fixture(scope="session")
def helm_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Helm's own cache, config and data folders in a temporary place, and no cluster in reach:
    rendering and linting are offline and leave the user's Helm set-up alone."""
    home = tmp_path_factory.mktemp("helm-home")
    yield {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
        "KUBECONFIG": str(home / "no-kubeconfig"),
    }
