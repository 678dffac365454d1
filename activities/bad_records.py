"""The one place a batch's flagged records are dealt with: fail the task, or tolerate them.

Kept apart from activities.runner (the runners' shared types) and activities.dead_letters (where
tolerated records go) so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sluice.activities.dead_letters import route_bad_records
from sluice.connectors.records import ERROR_COLUMN, bad_record_error, fail_on_bad_records

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from sluice.activities.runner import TaskSetup


@contextmanager
def checked_records(records: DataFrame, setup: TaskSetup) -> Iterator[DataFrame]:
    """The good records of a batch; bad ones (flagged by a source, converter or transform) fail the
    batch naming their position, or with ``errors.tolerance=all`` go to the dead-letter topic (or,
    without one, are logged and skipped).

    Failing costs nothing extra: the check runs inside the job the ``with`` body starts (the
    write), which then raises RecordError naming the first bad record it met. Routing to the
    dead-letter topic needs a job of its own, so the records are cached for it and the write that
    follows reuses them. A source's undecodable records carry their bytes (``_sluice_raw``), so a
    dead letter keeps exactly what the source held. (A sink's stages deal with theirs in Arrow:
    connectors.sink_stages.)
    """
    if ERROR_COLUMN not in records.columns:
        yield records
    elif setup.config.get("errors.tolerance") == "all":
        records = records.cache()
        try:
            yield route_bad_records(records, setup)
        finally:
            records.unpersist()
    else:
        with raising_record_errors(setup):
            yield failing_on_bad_records(records, setup)


def failing_on_bad_records(records: DataFrame, setup: TaskSetup) -> DataFrame:
    """``records`` without tolerance: the job that runs them fails at a bad one, which
    ``raising_record_errors`` names (``checked_records``' strict case, for a plan built once)."""
    if ERROR_COLUMN not in records.columns:
        return records
    return fail_on_bad_records(records, f"connector {setup.connector}")


@contextmanager
def raising_record_errors(setup: TaskSetup) -> Iterator[None]:
    """A job of ``failing_on_bad_records`` that fails at a bad record raises RecordError naming it."""
    try:
        yield
    except Exception as exc:
        error = bad_record_error(exc)
        if error is None:
            raise
        setup.meters.record_errors(1)  # the batch stops at the first bad record it meets
        raise error from None
