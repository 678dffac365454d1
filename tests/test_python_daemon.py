"""The Python daemon Spark forks workers from drops import caches only when ``sys.path`` changed."""

from __future__ import annotations

import sys

import pytest

from sluice.activities import python_daemon


@pytest.mark.parametrize(
    ("paths", "invalidations"),
    [
        ([], 0),  # a task on the daemon's own path: nothing to drop
        ([None, None], 0),  # a reused worker's later tasks: still nothing
        (["/tmp/spark-files"], 1),  # a task that added its files' folder
        (["/tmp/spark-files", None], 1),  # the next task of that worker, path unchanged
        (["/tmp/a", "/tmp/b"], 2),  # each new entry once
    ],
)
def test_caches_are_invalidated_only_when_the_path_changed(
    monkeypatch: pytest.MonkeyPatch, paths: list[str | None], invalidations: int
) -> None:
    calls: list[None] = []
    monkeypatch.setattr(python_daemon, "_invalidate_caches", lambda: calls.append(None))
    monkeypatch.setattr(python_daemon, "_path_at_last_invalidation", list(sys.path))
    monkeypatch.setattr(sys, "path", list(sys.path))
    python_daemon.invalidate_caches_if_path_changed()
    for added in paths:
        if added is not None:
            sys.path.append(added)
        python_daemon.invalidate_caches_if_path_changed()
    assert len(calls) == invalidations
