"""The Python daemon Spark forks workers from drops import caches only when ``sys.path`` changed."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from sluice.activities import python_daemon

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession


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


def test_a_local_session_forks_its_python_workers_from_this_daemon(spark: SparkSession) -> None:
    """Spark's Python tasks run with the daemon's rule in place (not PySpark's own daemon)."""

    def invalidation_in_use(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import importlib

        import pyarrow as pa

        for _ in batches:
            yield pa.RecordBatch.from_pydict({"name": [importlib.invalidate_caches.__name__]})

    names = spark.range(2, numPartitions=2).mapInArrow(invalidation_in_use, "name string").collect()
    assert [row["name"] for row in names] == ["invalidate_caches_if_path_changed"] * 2
