"""Values bound to the Spark jobs a thread starts, read back inside their tasks.

A plan built once runs each batch on the batch's own inputs through Spark local properties, which
Spark sends with every task of the thread's jobs, on a cluster too: a source's read
(``activities.spark_binding``) and its batch reference (``rocketmq.spark_writer.bound_properties``).
A classic session only: a Spark Connect client sets none (``activities.spark.binds_jobs``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@contextmanager
def bound_to_jobs(spark: SparkSession, name: str, value: str) -> Iterator[None]:
    """Jobs this thread starts in the block carry ``name=value``; unset after it."""
    context = spark.sparkContext
    context.setLocalProperty(name, value)
    try:
        yield
    finally:
        context.setLocalProperty(name, None)  # type: ignore[arg-type]


def job_value(name: str) -> str | None:
    """``name``'s value bound to the job running this task (None: none bound, or not in a task)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.getLocalProperty(name) if context is not None else None
