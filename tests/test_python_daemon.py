"""The Python daemon Spark forks workers from drops import caches only when ``sys.path`` changed."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterator
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


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def _cycle_alive() -> Callable[[], bool]:
    """A reference cycle dropped at once: it lives until a collection looks at it."""
    import weakref

    ref = weakref.ref(_Cycle())
    return lambda: ref() is not None


@pytest.fixture
def frozen_clean() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_a_collection_frees_what_the_task_left_and_freezes_the_survivors(
    monkeypatch: pytest.MonkeyPatch, frozen_clean: None
) -> None:
    monkeypatch.setattr(python_daemon, "_collections", 0)
    alive = _cycle_alive()
    assert alive()
    python_daemon.collect_and_freeze()
    assert not alive() and gc.get_freeze_count() > 0
    alive = _cycle_alive()  # made after the freeze: the next collection sees it
    python_daemon.collect_and_freeze()
    assert not alive()


def test_every_hundredth_collection_frees_cycles_that_died_frozen(
    monkeypatch: pytest.MonkeyPatch, frozen_clean: None
) -> None:
    import weakref

    monkeypatch.setattr(python_daemon, "_collections", 0)
    holder = [_Cycle()]
    frozen = weakref.ref(holder[0])
    python_daemon.collect_and_freeze()  # the cycle in holder survives: frozen
    holder.clear()  # it dies frozen
    calls = 1
    while frozen() is not None:
        python_daemon.collect_and_freeze()
        calls += 1
        assert calls <= python_daemon.FULL_COLLECTION_EVERY
    assert calls == python_daemon.FULL_COLLECTION_EVERY


def test_a_local_session_forks_its_python_workers_from_this_daemon(spark: SparkSession) -> None:
    """Spark's Python tasks run with the daemon's rule in place (not PySpark's own daemon)."""

    def invalidation_in_use(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import importlib

        import pyarrow as pa

        for _ in batches:
            names = [importlib.invalidate_caches.__name__, gc.collect.__name__]
            yield pa.RecordBatch.from_pydict({"name": names})

    names = spark.range(2, numPartitions=2).mapInArrow(invalidation_in_use, "name string").collect()
    expected = ["invalidate_caches_if_path_changed", "collect_and_freeze"] * 2
    assert [row["name"] for row in names] == expected
