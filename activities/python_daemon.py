"""The daemon Spark forks its Python workers from: PySpark's own, minus a fixed cost per worker.

Spark 4.1's workers call ``importlib.invalidate_caches()`` every time one starts a task
(``pyspark.worker_util.setup_spark_files``), whether or not ``sys.path`` changed. On Python 3.11
that re-reads the directory of every zip on the path, and Spark puts three there: ``pyspark.zip``,
py4j's, and the spark-core jar (~1,300 and ~5,400 entries). That cost ~200 ms per Python task,
three times per batch that wrote to RocketMQ through the data source (plan the write, write,
commit): a one-row batch took 1.0-1.5 s on 4.1 against 0.5-0.6 s on 4.3 (``bench.batch_cost``).
Spark 4.3 invalidates only when the path changed; this module gives 4.1 the same rule, before
PySpark's daemon starts, so every worker it forks inherits it.

Set as ``spark.python.daemon.module`` by ``activities.spark`` for the sessions it starts; it runs
``pyspark.daemon`` unchanged, with the worker module Spark names in ``sys.argv``. Spark starts
the Python processes that plan a Python data source with ``pyspark.daemon`` whatever the setting,
which is one reason the runtime reads and sends messages as ``mapInArrow`` jobs instead
(``connectors.rocketmq.spark_reader.read_frame``, ``spark_writer.send_frame``).
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
