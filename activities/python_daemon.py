"""The daemon Spark forks its Python workers from: PySpark's own, minus a fixed cost per worker.

Spark 4.1's workers call ``importlib.invalidate_caches()`` every time one starts a task
(``pyspark.worker_util.setup_spark_files``), whether or not ``sys.path`` changed. On Python 3.11
that re-reads the directory of every zip on the path, and Spark puts three there: ``pyspark.zip``,
py4j's, and the spark-core jar (~1,300 and ~5,400 entries), where Spark 4.3 invalidates only
when the path changed. This module gives 4.1's workers the 4.3 rule, before PySpark's daemon
starts, so every worker it forks inherits it. Measured on one-row jobs: a Python task's start
~200 -> ~45 ms, a ``mapInArrow`` job ~230 -> ~170 ms.

A reused worker also runs a full ``gc.collect()`` after every task (``pyspark.daemon``), which
traverses every object the worker holds: PySpark's, pyarrow's, pandas' and Sluice's modules,
~100,000 objects and 75 ms here. A bound source batch runs several tasks a second, so this was a
fifth of the workers' samples in the side-by-side job (py-spy, #18). The workers here freeze what
survives a collection (``gc.freeze``, as a pre-forking server does with its start-up state), so the
next task's collection looks only at what the task made; every ``FULL_COLLECTION_EVERY``-th
collection unfreezes first, so cycles among objects that died after being frozen are freed too.

Set as ``spark.python.daemon.module`` by ``activities.spark`` for the local sessions it starts
(a cluster's executors may know Sluice only from the zip shipped to them, which is on the path
of a task, not of the daemon that starts first); it runs ``pyspark.daemon`` unchanged, with the
worker module Spark names in ``sys.argv``. The Python processes Spark starts to plan a Python data
source use ``pyspark.daemon`` whatever the setting, which is one reason the runtime reads and sends
messages in ``mapInArrow`` jobs of its own (activities.spark_binding).
"""

from __future__ import annotations

import gc
import importlib
import runpy
import sys
from typing import Final

_invalidate_caches = importlib.invalidate_caches
_path_at_last_invalidation = list(sys.path)
_collect = gc.collect
#: One collection in this many traverses everything again (``collect_and_freeze``).
FULL_COLLECTION_EVERY: Final = 100
_collections = 0


def invalidate_caches_if_path_changed() -> None:
    """Spark 4.3's rule: finders' caches are dropped when ``sys.path`` gained or lost an entry."""
    global _path_at_last_invalidation
    if sys.path != _path_at_last_invalidation:
        _path_at_last_invalidation = list(sys.path)
        _invalidate_caches()


def collect_and_freeze(generation: int = 2) -> int:
    """``gc.collect`` for a reused worker: collect what is not frozen, then freeze the survivors;
    every ``FULL_COLLECTION_EVERY``-th call unfreezes everything first."""
    global _collections
    _collections += 1
    if _collections % FULL_COLLECTION_EVERY == 0:
        gc.unfreeze()
    found = _collect(generation)
    gc.freeze()
    return found


if __name__ == "__main__":
    importlib.invalidate_caches = invalidate_caches_if_path_changed
    gc.collect = collect_and_freeze  # the daemon's workers' collection after each task
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
