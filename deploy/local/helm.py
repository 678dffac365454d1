"""A real ``helm`` for checking the chart offline, built once per machine from the Go module proxy.

No well-kept PyPI package ships the helm binary, and only package registries are reachable, so
Helm's own command is built with ``go install`` (about five minutes with empty Go caches, a few
seconds once Go's module and build caches hold it) into the state folder (``.sluice/tools``,
git-ignored) and reused from then on. ``make test`` starts ``python -m sluice.deploy.local.helm``
beside the stack's start-up, so a fresh machine's build overlaps the wait for the services; the
chart tests (tests/deploy) then find the binary built.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HELM_VERSION = "v3.22.0"
HELM_MODULE = "helm.sh/helm/v3"
#: Over twice the slowest build seen (5 min on 2 shared cores with empty Go caches).
BUILD_TIMEOUT_S = 780


class HelmBuildError(RuntimeError):
    """Helm could not be built (no Go toolchain, the module proxy unreachable, a failed build)."""


def _go() -> str:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not Path(go).is_file():
        raise HelmBuildError(f"building helm {HELM_VERSION} needs the Go toolchain (`go` on PATH or {go})")
    return go


def _build(target: Path) -> None:
    """``go install`` into a private folder, then move into place: a half-built binary is never seen."""
    ldflags = f"-s -w -X {HELM_MODULE}/internal/version.version={HELM_VERSION}"
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as gobin:
        env = {**os.environ, "GOBIN": gobin, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": ""}
        package = f"{HELM_MODULE}/cmd/helm@{HELM_VERSION}"
        try:
            result = subprocess.run(
                [_go(), "install", "-trimpath", f"-ldflags={ldflags}", package],
                env=env,
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            raise HelmBuildError(f"go install helm {HELM_VERSION} took over {BUILD_TIMEOUT_S} s") from None
        if result.returncode != 0:
            raise HelmBuildError(f"go install helm {HELM_VERSION} failed:\n{result.stderr[-4000:]}")
        os.replace(Path(gobin) / "helm", target)


def ensure_helm(state_dir: Path) -> Path:
    """The path of helm under ``state_dir``, built first if missing (once, under a file lock: two
    processes asking at once, ``make test``'s early build and a test session, build it once)."""
    tools = state_dir / "tools" / f"helm-{HELM_VERSION}"
    tools.mkdir(parents=True, exist_ok=True)
    target = tools / "helm"
    with (tools / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.is_file():
            _build(target)
    return target


def main() -> None:
    from sluice.worker.settings import settings  # pydantic-settings: only the command needs it

    try:
        print(ensure_helm(settings().state_dir))
    except HelmBuildError as exc:
        print(f"helm: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
