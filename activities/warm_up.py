"""A new worker's first Spark jobs, run as it starts, so a connector's first batch is fast.

A cold worker's first source batch took ~12 s and its first sink batch ~6 s where the tenth took
under 1 s: JIT compilation, code generation, the first Python workers and the Python data-source
planner were all paid on first use. ``warm_up`` pays them once, through the same paths a batch takes
(Arrow in, Python functions over Arrow batches reading and sending, Arrow out), with functions of
its own so no service is touched.

``start_warm_up`` runs it in a thread while the worker already polls: run before polling it made
every start ~10 s longer, which a worker taking over a killed one's tasks can least afford. Such a
worker, which knows only that connectors already run on its queue, waits before warming up: their
tasks reach it once their lease times out, all at once, and it replays their workflows and
starts them on the same two cores. With a hundred of them, a warm-up beside that storm delayed the
last start by 7 s (22 s after the SIGKILL instead of 15, ``make bench-scale``). The warm-up then
also waits for task starts to pause; a task that needs Spark before starts the session itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa
from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

ROWS = 64
SCHEMA = "id long, text string"
#: The warm-up starts once no task activity has started on this worker for this long.
QUIET_S = 2.0
#: ... or after this long in any case.
QUIET_WAIT_MAX_S = 60.0
_last_task_start = 0.0  # time.monotonic() of the latest task_started()


def task_started() -> None:
    """A task activity starts on this worker (the warm-up waits for the starts to pause)."""
    global _last_task_start
    _last_task_start = time.monotonic()


def start_warm_up(session: Callable[[], SparkSession], not_before_s: float = 0.0) -> threading.Thread:
    """``warm_up`` the process's SparkSession in a daemon thread, starting it first if ``session``
    does (``RuntimeContext.spark``), ``not_before_s`` from now and once task starts pause; a
    failure is logged, never raised (the first batch then pays the cold start itself, or reports
    the session's error)."""
    thread = threading.Thread(
        target=_warm_up_logged, args=(session, not_before_s), name="sluice-warm-up", daemon=True
    )
    thread.start()
    return thread


def _warm_up_logged(session: Callable[[], SparkSession], not_before_s: float) -> None:
    time.sleep(not_before_s)
    deadline = time.monotonic() + QUIET_WAIT_MAX_S
    while time.monotonic() - _last_task_start < QUIET_S and time.monotonic() < deadline:
        time.sleep(QUIET_S / 4)
    started = time.monotonic()
    try:
        warm_up(session())  # the session, made active for this thread (activities.spark.get_spark)
    except Exception:  # noqa: BLE001 - an optimisation only
        log.warning("Spark warm-up failed; the first batch pays the cold start", exc_info=True)
        return
    log.info("Spark warmed up in %.1f s", time.monotonic() - started)


def warm_up(session: SparkSession) -> None:
    """Run the paths every batch takes once (about 5-10 s on a cold two-core worker): messages
    read and sent by ``mapInArrow`` jobs (activities.spark_binding), here with functions of its
    own that touch no service."""
    frame = session.range(2, numPartitions=2).mapInArrow(_read, SCHEMA)
    frame = frame.mapInArrow(_same_batches, frame.schema)
    frame.mapInArrow(_written, "count long").collect()
    session.createDataFrame(frame.toArrow()).toArrow()


def _read(indexes: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``ROWS // 2`` rows per index, like a read task per input partition."""
    for batch in indexes:
        for index in batch.column(0).to_pylist():
            ids = list(range(index * ROWS // 2, (index + 1) * ROWS // 2))
            yield pa.RecordBatch.from_pydict({"id": ids, "text": [str(i) for i in ids]})


def _same_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from batches


def _written(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Consumes the batches and returns one row, like a send task returning what it stored."""
    count = sum(batch.num_rows for batch in batches)
    yield pa.RecordBatch.from_pydict({"count": [count]})
