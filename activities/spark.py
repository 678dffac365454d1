"""The one SparkSession of a process.

A cold SparkSession costs ~7 s and a first job several more (docs/design.md), so a worker process (and
the test session) builds it once and every task reuses it; the master is configuration (local[*],
spark://…, k8s://… or a Spark Connect sc:// URL), never code: the caller hands it in from the
process's settings (worker.settings), so this module reads no configuration of its own.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_lock = threading.Lock()
_session: SparkSession | None = None


def get_spark(
    master: str | None = None, *, driver_memory: str | None = None, app_name: str = "sluice-worker"
) -> SparkSession:
    """Return the process's SparkSession, creating it on first use.

    The first call says where (``master``, ``driver_memory``: the caller's settings, e.g.
    ``RuntimeSettings``); later calls may omit them and get the same session.
    """
    global _session
    with _lock:
        if _session is not None:
            _activate_for_this_thread(_session)
            return _session
        if master is None or driver_memory is None:
            raise RuntimeError("no SparkSession yet: the first get_spark call names the master and memory")
        # pyspark: the CLI and REST server import this module (worker.settings -> activities.context)
        from pyspark.sql import SparkSession

        # Python workers must run this interpreter (the venv with pyarrow and Sluice), not `python3`.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        if master.startswith("sc://"):
            _session = SparkSession.builder.remote(master).appName(app_name).getOrCreate()
            return _session
        _session = (
            SparkSession.builder.master(master)
            .appName(app_name)
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            # Driver-side sources hand Spark Arrow tables. Below this threshold Spark keeps them as a
            # LocalRelation: rows Java-serialised into every task and projections run interpreted
            # by the optimizer, which made a source batch cost ~2x (bench-pipeline). At 0 the Arrow
            # batches are decoded column-wise in the tasks, like any scan.
            .config("spark.sql.execution.arrow.localRelationThreshold", "0")
            .config("spark.python.worker.reuse", "true")
            .config("spark.driver.memory", driver_memory)
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        _session.sparkContext.setLogLevel("WARN")
        _quiet_task_size_warnings(_session)
        return _session


def _quiet_task_size_warnings(session: SparkSession) -> None:
    """Driver-built batches travel inside their tasks (localRelationThreshold=0, above), so every
    source batch would log "task of very large size"; that logger keeps its errors."""
    jvm = session._jvm
    assert jvm is not None  # a classic session (Spark Connect returns earlier)
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "org.apache.spark.scheduler.TaskSetManager", jvm.org.apache.logging.log4j.Level.ERROR
    )


def label_jobs(session: SparkSession, group: str, description: str) -> None:
    """Name the Spark jobs the calling thread starts next (a task's batch), for Spark's UI and logs.

    A classic session sets the thread's job group; a Spark Connect session has no SparkContext, so
    nothing is labelled there (its jobs still run)."""
    if getattr(session, "_jvm", None) is not None:
        session.sparkContext.setJobGroup(group, description)


def _activate_for_this_thread(session: SparkSession) -> None:
    """Make the session the JVM's active one for the calling thread.

    Task activities run in worker threads, each pinned to its own JVM thread; Spark resolves a
    Python data source on write through the thread's active session, so without this a
    ``df.write.format("rocketmq")`` from a thread other than the creator's fails with
    DATA_SOURCE_NOT_FOUND.
    """
    jvm = getattr(session, "_jvm", None)
    if jvm is not None:  # classic Spark; Spark Connect sessions have no JVM here
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(session._jsparkSession)
