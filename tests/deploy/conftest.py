"""Fixtures for the chart tests: a real ``helm`` (deploy/local/helm.py builds it once per machine
from the Go module proxy) with its own empty home. Nothing here needs the local stack or a JVM."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.deploy.local.helm import HelmBuildError, ensure_helm
from sluice.worker.settings import settings


@pytest.fixture(scope="session")
def helm_binary() -> Path:
    try:
        return ensure_helm(settings().state_dir)
    except HelmBuildError as exc:
        pytest.fail(str(exc))


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
