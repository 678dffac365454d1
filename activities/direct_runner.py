"""One direct task's micro-batches: plan the source's ranges, record, read, transform, write, commit.

A direct pipeline (connectors.direct) joins a source task's stages to a sink task's with no topic:
read → transforms → sink write, in the worker's process, over Arrow. The plan is the source's
(its partitions and positions), and the sink's ``prepare`` state is recorded with it, so a re-run
after a crash reads exactly the same records and the sink undoes or skips a partial write as it
does for any plan. A :class:`TransactionalSink` commits the source's positions in its data
transaction (exactly once: a JDBC source into PostgreSQL); otherwise the runtime commits them
after the write (the sink's own guarantee: idempotent or at least once).

1. ``next_plan``: the recorded, uncommitted plan to re-run, or a new one (``sink.prepare`` state).
2. ``run``: ``source.read(ranges)``, each range's records with the topic its source routes them to;
   the chain's Arrow stages; bad records fail the task naming them, or under
   ``errors.tolerance=all`` go to the dead-letter topic; ``sink.write`` (or ``write_frame`` for a
   sink Spark writes); the commit; then the source's ``committed`` hook.
3. ``close``: both tasks, the sink's even when the source's close fails.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from sluice.activities.dead_letters import send_dead_letters, write_rounds
from sluice.activities.runner import TaskSetup, next_plan, sink_plan, tell_committed
from sluice.connectors.api import (
    KnowsEmptyRanges,
    ReportsWaiting,
    RoutesTopics,
    TakesBackfills,
    TransactionalSink,
    WritesFrames,
)
from sluice.connectors.dead_letter_messages import position_keys, record_dead_letters
from sluice.connectors.planner import view_of
from sluice.connectors.planning import ramped_budget
from sluice.connectors.record_tables import column, headers_with, replaced, split_flagged
from sluice.connectors.records import ERROR_COLUMN, VALUE_SCHEMA_HEADER, good_arrow_records
from sluice.connectors.source_reads import SourceRead
from sluice.connectors.transforms import apply_chain

if TYPE_CHECKING:
    import pyarrow as pa

    from sluice.connectors.api import SinkTask, SourceTask
    from sluice.connectors.model import BatchPlan, PartitionRange

log = logging.getLogger(__name__)


class DirectRunner:
    """See the module docstring."""

    def __init__(self, setup: TaskSetup, source: SourceTask, sink: SinkTask) -> None:
        self.setup = setup
        self.ctx = setup.ctx
        self.connector = setup.connector
        self.source = source
        self.sink = sink
        self._view = view_of(source)
        self._backfills = source if isinstance(source, TakesBackfills) else None
        self._routing = source if isinstance(source, RoutesTopics) else None
        self._topic = str(setup.config.get("topic") or "")
        #: new batches planned in this attempt: the first one is small (planning.ramped_budget)
        self.planned = 0
        #: the batch runs in this process; only a sink that Spark writes (Delta, Iceberg) starts a job
        self.runs_on_spark = isinstance(sink, WritesFrames)

    def ensure_topic(self) -> None:
        """No topic: the source's records go straight to the sink."""

    def waiting_for(self) -> str:
        return self.source.waiting_for() if isinstance(self.source, ReportsWaiting) else ""

    def next_plan(self) -> tuple[BatchPlan | None, bool]:
        unit = self.source.position_unit
        unit_limit = self.setup.config.get("batch.max.bytes") if unit == "bytes" else None
        limit = int(unit_limit or self.setup.config["batch.max.records"])
        budget = ramped_budget(limit, unit, self.planned)
        plan, rerun = next_plan(self.setup, self.source.task_id, self._view, budget, self._backfills)
        if plan is None:
            return None, False
        self.planned += 0 if rerun else 1
        return sink_plan(self.setup, self.sink, plan, rerun), rerun

    def run(self, plan: BatchPlan, rerun: bool) -> int:
        records = apply_chain(self.setup.chain, self._read(plan.ranges))
        if self.setup.config.get("errors.tolerance") == "all":
            records = self._without_flagged(records)
        good = good_arrow_records(records, f"connector {self.connector}")
        if isinstance(self.sink, WritesFrames):
            from sluice.activities.spark_binding import table_frame

            self.sink.write_frame(table_frame(self.ctx.spark, good), plan)
        else:
            write_rounds(self.sink, good, plan, self.setup, partial(self._refused_letters, good))
        if not isinstance(self.sink, TransactionalSink):
            self.ctx.store.commit(plan)
        self.setup.positions.committed_batch(plan)
        tell_committed(self.setup, self.source, plan)
        return plan.record_span

    def _without_flagged(self, records: pa.Table) -> pa.Table:
        """Under ``errors.tolerance=all``, ``records`` without the flagged ones, which go to the
        dead-letter topic (connectors.dead_letter_messages.record_dead_letters)."""
        good, bad = split_flagged(records)
        if bad.num_rows:
            send_dead_letters(record_dead_letters(bad, self.connector), self.setup)
        return good

    def _refused_letters(self, records: pa.Table, refused: pa.Table) -> pa.Table:
        """Dead letters of the checked ``records`` the sink refused (``refused``: partition,
        offset, error)."""
        import pyarrow.compute as pc

        at = pc.index_in(position_keys(refused, "offset"), value_set=position_keys(records, "offset"))
        rows = records.take(at).append_column(ERROR_COLUMN, refused.column(ERROR_COLUMN))
        return record_dead_letters(rows, self.connector)

    def _read(self, ranges: Sequence[PartitionRange]) -> pa.Table:
        """The ranges' records, each with the topic its source routes it to, in one table: read one
        range at a time where the source routes topics (its tables differ in shape), each record
        then naming its own value type, as the json converter does for a batch of several topics'
        schemas (the sink writes each table its own columns)."""
        import pyarrow as pa

        kept = [r for r in ranges if not r.is_empty and self._may_hold_records(r)]
        if self._routing is None:
            parts = [self._topical(self.source.read(kept).to_table(), self._topic)] if kept else []
        else:
            parts = [self._topical(self.source.read([r]).to_table(), self._routing.topic_of(r.partition))
                     for r in kept]  # fmt: skip
        parts = [p for p in parts if p.num_rows]
        if not parts:
            return SourceRead().to_table()
        if len({p.schema.field("value").type for p in parts}) > 1:
            parts = [_own_value_type(p) for p in parts]
        return pa.concat_tables(parts, promote_options="permissive")

    def _may_hold_records(self, r: PartitionRange) -> bool:
        return self.source.holds_records(r) if isinstance(self.source, KnowsEmptyRanges) else True

    @staticmethod
    def _topical(records: pa.Table, topic: str) -> pa.Table:
        """``records`` with ``topic`` where the source left the topic to the runtime (null)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if not topic or not records.num_rows:
            return records
        return replaced(records, "topic", pc.coalesce(column(records, "topic"), pa.scalar(topic)))

    def close(self) -> None:
        try:
            self.source.close()
        finally:
            self.sink.close()


def _own_value_type(records: pa.Table) -> pa.Table:
    """``records`` with their value type named in each record's headers (connectors.records'
    ``VALUE_SCHEMA_HEADER``, Spark's JSON of the type, as the json converter names it)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_type

    own = from_arrow_type(records.schema.field("value").type).json()
    named = headers_with(
        column(records, "headers"),
        dropped=[VALUE_SCHEMA_HEADER],
        appended=[(VALUE_SCHEMA_HEADER, pa.repeat(pa.scalar(own), records.num_rows))],
    )
    return replaced(records, "headers", named)
