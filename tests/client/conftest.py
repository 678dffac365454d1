"""The light client as a new user gets it: the wheel built from this repository, installed alone
into a fresh virtual environment (PyPI gives temporalio and cryptography), once per session."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from sluice.deploy.local.config import REPO_ROOT


@dataclass(frozen=True)
class LightVenv:
    python: Path
    wheel: Path
    home: Path  # an empty folder: the cwd of scripts, so the repository is not on their path

    def env(self, **extra: str) -> dict[str, str]:
        """No PYTHONPATH and no SLUICE_* from the test process: only what a user would set."""
        keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
        return {**keep, **extra}

    def run(self, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.python), *args],
            cwd=self.home,
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def _build(root: Path) -> LightVenv:
    dist, venv, home = root / "dist", root / "venv", root / "home"
    home.mkdir()
    pip_quiet = ["--disable-pip-version-check", "-q"]
    # The sdist first, then the wheel from it (what pip does with a source release), so both the
    # sdist and the wheel are proven to carry the package as pyproject.toml maps it.
    subprocess.run(
        [sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_sdist({str(dist)!r})"],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (sdist,) = dist.glob("sluice-*.tar.gz")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", *pip_quiet, "--no-deps", "-w", str(dist), str(sdist)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = dist.glob("sluice-*.whl")
    python = shutil.which("python3.11") or sys.executable
    light = LightVenv(venv / "bin" / "python", wheel, home)
    # The user's environment, not this process's: with the repository on PYTHONPATH pip would take
    # its sluice.egg-info (the editable install's) for an installed sluice and skip the wheel.
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=120, env=light.env())
    installed = light.run("-m", "pip", "install", *pip_quiet, str(wheel), timeout=600)
    assert installed.returncode == 0, installed.stderr
    return light


@pytest.fixture(scope="session")
def light_venv_build(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Future[LightVenv]]:
    """The venv, built in a thread: a test can start its worker (Spark's start-up) meanwhile."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        yield pool.submit(_build, tmp_path_factory.mktemp("light-client"))


@pytest.fixture
def light_venv(light_venv_build: Future[LightVenv]) -> LightVenv:
    return light_venv_build.result()
