"""The daemon Spark forks its Python workers from: PySpark's own, minus a fixed cost per worker.

Spark 4.1's workers call ``importlib.invalidate_caches()`` every time one starts a task
(``pyspark.worker_util.setup_spark_files``), whether or not ``sys.path`` changed. On Python 3.11
that re-reads the directory of every zip on the path, and Spark puts three there: ``pyspark.zip``,
py4j's, and the spark-core jar (~1,300 and ~5,400 entries), where Spark 4.3 invalidates only
when the path changed. This module gives 4.1's workers the 4.3 rule, before PySpark's daemon
starts, so every worker it forks inherits it. Measured on one-row jobs: a Python task's start
~200 -> ~45 ms, a ``mapInArrow`` job ~230 -> ~170 ms.

Set as ``spark.python.daemon.module`` by ``activities.spark`` for the local sessions it starts
(a cluster's executors may know Sluice only from the zip shipped to them, which is on the path
of a task, not of the daemon that starts first); it runs ``pyspark.daemon`` unchanged, with the
worker module Spark names in ``sys.argv``. The Python processes Spark starts to plan a Python data
source use ``pyspark.daemon`` whatever the setting, which is one reason the runtime reads and sends
messages as ``mapInArrow`` jobs (``connectors.rocketmq.spark_reader.read_frame``,
``spark_writer.send_frame``).
"""

from __future__ import annotations

import importlib
import runpy
import sys

_invalidate_caches = importlib.invalidate_caches
_path_at_last_invalidation = list(sys.path)


def invalidate_caches_if_path_changed() -> None:
    """Spark 4.3's rule: finders' caches are dropped when ``sys.path`` gained or lost an entry."""
    global _path_at_last_invalidation
    if sys.path != _path_at_last_invalidation:
        _path_at_last_invalidation = list(sys.path)
        _invalidate_caches()


if __name__ == "__main__":
    importlib.invalidate_caches = invalidate_caches_if_path_changed
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
