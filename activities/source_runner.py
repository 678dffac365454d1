"""One source task's micro-batches: plan, record, read, transform, convert, send, commit.

Delivery into RocketMQ is exactly-once per source position: every message carries its batch
reference and source position as properties, and the plan records each queue's end offset before
anything is sent. When a recorded plan is re-run (the attempt before crashed between sending and
committing), the messages already written since those offsets are found and not sent again.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cached_property, partial
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from sluice.activities.dead_letters import send_dead_letters
from sluice.activities.runner import TaskSetup, next_plan, tell_committed
from sluice.activities.spark import binds_jobs
from sluice.activities.spark_binding import (
    ReadLayout,
    ReadPart,
    SourceReadBinder,
    chain_frame,
    frame_job,
    inline_job,
    job_outcomes,
    read_layout,
    source_frame,
    spark_schema,
    table_chunks,
)
from sluice.connectors.api import (
    KnowsEmptyRanges,
    KnowsSendOrder,
    PinsQueues,
    ReportsWaiting,
    RoutesTopics,
    SendOrder,
    SendsToCluster,
    ShapesTopics,
    TakesBackfills,
    TopicShape,
)
from sluice.connectors.barriers import BARRIER_HEADER
from sluice.connectors.converters import OFFSET_PROPERTY, PARTITION_PROPERTY
from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.planner import view_of
from sluice.connectors.planning import natural_key, ramped_budget
from sluice.connectors.records import RecordError
from sluice.connectors.rocketmq.limits import stamped_size
from sluice.connectors.rocketmq.spark_writer import RocketMQWriter, bound_properties
from sluice.connectors.source_reads import SourceRead
from sluice.connectors.source_stages import SHARDED_SCHEMA, SourceStages, sent_key
from sluice.connectors.stage_outcomes import Bad
from sluice.connectors.transforms import runs_in_arrow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from sluice.connectors.api import SourceTask
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient

log = logging.getLogger(__name__)

BATCH_PROPERTY = "sluice.batch"
#: Read layouts whose jobs a task keeps (``SourceRunner._bound_job``): a task's batches have a
#: handful (a table's split count, a file's lines with and without undecodable ones).
MAX_BOUND_PLANS = 8
#: How often the topics of a ShapesTopics task are checked against their shape.
SHAPE_CHECK_S = 30.0


def batch_ref(plan: BatchPlan) -> str:
    return f"{plan.connector}/{plan.task_id}/{plan.batch_id}"


class SourceRunner:
    runs_on_spark = True

    def __init__(self, setup: TaskSetup, task: SourceTask) -> None:
        self.setup = setup
        self.ctx = setup.ctx
        self.connector = setup.connector
        self.config = setup.config
        self.task = task
        # A RoutesTopics task (the JDBC source: one topic per table) names its topics itself.
        self.routing = task if isinstance(task, RoutesTopics) else None
        # The task's planning view and optional abilities, looked up once: a runtime-checkable
        # Protocol's isinstance was a third of an idle task's planning, once a second.
        self._view = view_of(task)
        self._backfills = task if isinstance(task, TakesBackfills) else None
        self._waits = task if isinstance(task, ReportsWaiting) else None
        self.topic: str = setup.config.get("topic") or ""
        self.topics: list[str] = self.routing.topics() if self.routing else [self.topic]
        #: new batches planned in this attempt: the first one is small (planning.ramped_budget)
        self.planned = 0
        #: the units the last new batch was planned for: at most its records (a byte counts at least one)
        self._budget: int | None = None
        #: each topic's stages for an order (``_stages``)
        self._topic_stages: dict[tuple[object, ...], SourceStages] = {}
        #: each read layout's job, built once (``_bound_job``)
        self._bound_jobs: dict[tuple[object, ...], DataFrame] = {}
        self._target = task.target_cluster() if isinstance(task, SendsToCluster) else None
        self._cluster = (self._target.cluster or None) if self._target is not None else None
        self._shapes = task if isinstance(task, ShapesTopics) else None
        self._pins = task if isinstance(task, PinsQueues) else None
        self._shaped_at = 0.0

    @cached_property
    def client(self) -> SyncRocketMQClient:
        """The client of the cluster the messages go to: the worker's, or the task's own target
        (SendsToCluster: a replicator's), closed with the runner."""
        if self._target is None:
            return self.ctx.rocketmq
        from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient

        return SyncRocketMQClient(self._target.namesrv, **self._target.client_options())

    def ensure_topic(self) -> None:
        client = self.client
        for topic in self.topics:
            if client.topic_exists(topic):
                continue
            if not self.config.get("topic.auto.create", True):
                raise LookupError(
                    f"connector {self.connector}: topic {topic} does not exist and topic.auto.create is false"
                )
            shape = self._shape(topic)
            client.create_topic(topic, queue_count=shape.queues, perm=shape.perm, cluster=self._cluster)
        self._shaped_at = time.monotonic()

    def _shape(self, topic: str) -> TopicShape:
        if self._shapes is not None:
            return self._shapes.topic_shape(topic)
        return TopicShape(int(self.config.get("topic.queues", 4)))

    def _follow_shapes(self) -> None:
        """Topics a ShapesTopics task writes grow with their shape (a source topic's new queues),
        looked at every SHAPE_CHECK_S; new topics (a RoutesTopics task's) are created."""
        if self._shapes is None or time.monotonic() - self._shaped_at < SHAPE_CHECK_S:
            return
        if self.routing is not None:
            self.topics = self.routing.topics()
        self.ensure_topic()
        for topic in self.topics:
            shape, now = self._shapes.topic_shape(topic), len(self.client.queues(topic))
            if shape.queues > now:
                log.info(
                    "connector %s: topic %s grows from %d to %d queues",
                    self.connector,
                    topic,
                    now,
                    shape.queues,
                )
                self.client.create_topic(
                    topic, queue_count=shape.queues, perm=shape.perm, cluster=self._cluster
                )

    def _queue_key(self, topic: str, key: str) -> str:
        """How the plan's ``queue_ends`` name a queue: ``broker:queue``, prefixed by the topic when
        the task writes several topics."""
        return f"{topic}/{key}" if self.routing else key

    def next_plan(self) -> tuple[BatchPlan | None, bool]:
        """The batch to run now and whether it is a re-run of a recorded, uncommitted plan."""
        unit = self.task.position_unit
        unit_limit = self.config["batch.max.bytes"] if unit == "bytes" else None
        max_units = ramped_budget(int(unit_limit or self.config["batch.max.records"]), unit, self.planned)
        plan, rerun = next_plan(self.setup, self.task.task_id, self._view, max_units, self._backfills)
        self._budget = max_units
        if plan is None or rerun:
            return plan, rerun
        self.planned += 1
        self._follow_shapes()
        client = self.client
        queue_ends = {
            self._queue_key(topic, mq.key): client.max_offset(mq)
            for topic in self.topics
            for mq in client.queues(topic)
        }
        plan = replace(plan, sink_state={"queue_ends": json.dumps(queue_ends)})
        return self.ctx.store.record_plan(plan), False

    def close(self) -> None:
        try:
            self.task.close()
        finally:
            if self._target is not None and "client" in self.__dict__:
                self.client.close()

    def waiting_for(self) -> str:
        return self._waits.waiting_for() if self._waits is not None else ""

    def run(self, plan: BatchPlan, rerun: bool) -> int:
        """Send the plan's records; return how many were sent. Commits the plan."""
        # Ranges the task knows to be empty cost no Spark job (KnowsEmptyRanges).
        ranges = [r for r in plan.ranges if self._may_hold_records(r)]
        if self.routing is None:
            sent = self._run_ranges(plan, rerun, ranges, self.topic) if ranges else 0
            written = {self.topic} if ranges else set()
        else:  # one partition at a time: its own topic, and its own record shape
            sent = sum(self._run_ranges(plan, rerun, [r], self.routing.topic_of(r.partition)) for r in ranges)
            written = {self.routing.topic_of(r.partition) for r in ranges}
        # The commit wakes the idle sinks of the topics written, on every worker (activities.doorbells).
        self.ctx.store.commit(plan, rings=written)
        self.setup.positions.committed_batch(plan)
        tell_committed(self.setup, self.task, plan)
        return sent

    def _may_hold_records(self, r: PartitionRange) -> bool:
        if r.is_empty:
            return False
        return self.task.holds_records(r) if isinstance(self.task, KnowsEmptyRanges) else True

    def _run_ranges(self, plan: BatchPlan, rerun: bool, ranges: Sequence[PartitionRange], topic: str) -> int:
        """One path: the read's shares through the source's stages (connectors.source_stages) and
        sent, wherever they run (``_outcomes``); a re-run's stages leave out what an earlier
        attempt of the plan sent, when the source re-reads the same records (``replays_exactly``)."""
        read = self.task.read(ranges)
        order = self._send_order(ranges)
        exact = rerun and self.task.replays_exactly
        sent = frozenset(self._sent_keys(plan, topic)) if exact else frozenset()
        stages = replace(self._stages(topic, order), already_sent=sent)
        sent_count, dead = 0, []
        for outcome in self._outcomes(plan, read, stages, topic, cached=not sent):
            if isinstance(outcome, Bad):
                self.setup.meters.record_errors(1)  # the batch stops at the first bad record
                raise RecordError(outcome.message)
            sent_count += outcome.count
            if outcome.dead is not None:
                dead.append(outcome.dead)
        if dead:
            send_dead_letters(pa.concat_tables(dead), self.setup)
        return sent_count

    def _stages(self, topic: str, order: SendOrder) -> SourceStages:
        """The source's stages for ``topic`` (every batch of one topic and order shares them, and
        with them the encoders planned for its record shapes)."""
        queues = self._queues(topic)
        pinned = tuple(sorted(self._pins.pinned_queues(topic, len(queues)).items())) if self._pins else ()
        key = (topic, order, queues, pinned)
        if key not in self._topic_stages:
            chain = () if self._spark_chain else tuple(self.setup.chain)
            self._topic_stages[key] = SourceStages(
                chain, self.setup.converter, queues, order, self.connector, self._stamped_bytes,
                tolerates=self.config.get("errors.tolerance") == "all", pinned=dict(pinned),
            )  # fmt: skip
        return self._topic_stages[key]

    def _outcomes(
        self, plan: BatchPlan, read: SourceRead, stages: SourceStages, topic: str, *, cached: bool
    ) -> list[Sent | Bad]:
        """Each share's outcome, its messages sent where it ran:

        - a chain with a Spark SQL transform: the chain over the read's frame, then the stages in
          the tasks of its output (``frame_job``);
        - a batch under the worker's local bound (``local_batch_max_records``): in this process,
          the splits read here (no Spark job);
        - otherwise the read's shares in Spark tasks (``share_tasks``), each reading its own, by a
          job planned once per read layout and bound to each batch's read (``SourceReadBinder``;
          ``inline_job`` where nothing binds a job, Spark Connect), in chunks when the driver-built
          tables are too large to bind whole (``table_chunks``).
        """
        ref = {BATCH_PROPERTY: batch_ref(plan)}
        together = stages.order is not SendOrder.ANY
        if self._spark_chain:
            records = chain_frame(self.setup.chain, source_frame(self.ctx.spark, read))
            stages = stages.planned([to_arrow_schema(records.schema)])
            send = partial(_send_share, stages, self._writer(topic, stamped=ref))
            records = records.coalesce(1) if together else records.coalesce(self.ctx.settings.batch_tasks)
            return job_outcomes(frame_job(records, send))
        pieces = [*read.tables, *(SourceRead(splits=(s,)).to_table() for s in read.splits)] if (
            self._budget is not None and self._budget <= self.ctx.settings.local_batch_max_records
        ) else None  # fmt: skip
        if pieces is not None:
            stages = stages.planned([p.schema for p in pieces])
            return [_send_share(stages, self._writer(topic, stamped=ref), pieces)]
        outcomes: list[Sent | Bad] = []
        for layout, parts in _bindable(read):
            stages = stages.planned(layout.schemas)
            if not binds_jobs(self.ctx.spark):
                send = partial(_send_share, stages, self._writer(topic, stamped=ref))
                outcomes += job_outcomes(inline_job(self.ctx.spark, layout, parts, together, send))
                continue
            job = self._bound_job(layout, together, stages, topic, cached=cached)
            with self._binder.bound(parts), bound_properties(self.ctx.spark, ref):
                outcomes += job_outcomes(job)
        return outcomes

    def _bound_job(
        self, layout: ReadLayout, together: bool, stages: SourceStages, topic: str, *, cached: bool
    ) -> DataFrame:
        """The job of reads of ``layout``, built once per shape (a re-run's, with what it leaves out,
        for itself): its tasks take the batch's read and reference from the job, so a batch costs a
        job run, not a plan built from nothing (~750 Py4J calls and ~0.3 s a batch, #18)."""
        key = (layout, together, topic, stages.order, stages.queues)
        if cached and key in self._bound_jobs:
            return self._bound_jobs[key]
        send = partial(_send_share, stages, self._writer(topic))
        job = self._binder.job(layout, together, send)
        if cached:
            if len(self._bound_jobs) >= MAX_BOUND_PLANS:
                self._bound_jobs.clear()
            self._bound_jobs[key] = job
        return job

    def _writer(self, topic: str, *, stamped: dict[str, str] | None = None) -> RocketMQWriter:
        """The writer of a share's messages: the batch reference ``stamped``, or bound to the job
        that sends them (``bound_properties``)."""
        options = {**self._send_options(topic), "boundProperties": "false" if stamped else "true"}
        if stamped:
            options["stampedProperties"] = json.dumps(stamped)
        return RocketMQWriter(options, spark_schema(SHARDED_SCHEMA))

    @cached_property
    def _spark_chain(self) -> bool:
        """Whether the chain has a Spark SQL transform: the chain then runs over the read's frame."""
        return not runs_in_arrow(self.setup.chain)

    @cached_property
    def _stamped_bytes(self) -> int:
        """The most the batch reference the writer stamps adds to a message (its size check)."""
        return stamped_size({BATCH_PROPERTY: f"{self.connector}/{self.task.task_id}/{'9' * 19}"})

    @cached_property
    def _binder(self) -> SourceReadBinder:
        """Made at the first batch: an idle task, or one started while the worker's Spark session is
        still starting, plans and heartbeats without Spark (activities.connector_activities)."""
        return SourceReadBinder(self.ctx.spark)

    def _queues(self, topic: str) -> tuple[str, ...]:
        """The topic's queues in the writer's order: index i is the i-th."""
        return tuple(q.key for q in sorted(self.client.queues(topic), key=lambda q: natural_key(q.key)))

    def _send_order(self, ranges: Sequence[PartitionRange]) -> SendOrder:
        """The task's own word on its read's order (KnowsSendOrder) when nothing transforms it."""
        if isinstance(self.task, KnowsSendOrder) and not self.setup.chain:
            return self.task.send_order(ranges)
        return SendOrder.SORTED

    def _send_options(self, topic: str) -> dict[str, str]:
        if self._target is None:
            return {"namesrv": self.ctx.settings.namesrv, "topic": topic}
        keys = {"accessKey": self._target.access_key, "secretKey": self._target.secret_key}
        return {"namesrv": self._target.namesrv, "topic": topic, **(keys if self._target.access_key else {})}

    def _sent_keys(self, plan: BatchPlan, topic: str) -> set[str]:
        """What an earlier attempt of the re-run ``plan`` sent to ``topic`` (``sent_key``s), found by
        its batch reference in the queues past the ends the plan recorded."""
        ref = batch_ref(plan)
        client = self.client
        starts: dict[str, int] = json.loads(plan.sink_state.get("queue_ends", "{}"))
        found: set[str] = set()
        for mq in client.queues(topic):
            start = starts.get(self._queue_key(topic, mq.key), 0)
            for m in client.pull_range(mq, start, client.max_offset(mq), max_per_request=512):
                props = m.properties
                if props.get(BATCH_PROPERTY) == ref:
                    found.add(
                        sent_key(
                            props.get(PARTITION_PROPERTY, ""),
                            props.get(OFFSET_PROPERTY, ""),
                            props.get(BARRIER_HEADER),
                        )
                    )
        return found


@dataclass(frozen=True)
class Sent:
    """A share's messages sent: how many, and its dead letters (connectors.source_stages.Made)."""

    count: int
    dead: pa.Table | None = None


def _send_share(stages: SourceStages, writer: RocketMQWriter, pieces: list[pa.Table]) -> Sent | Bad:
    """A share's stages, then the send of what they made (where the share was read)."""
    made = stages.run(pieces)
    if isinstance(made, Bad):
        return made
    messages = made.records
    count = 0
    if messages is not None and messages.num_rows:
        for written in writer.write_batches(messages.to_batches()):
            count += sum(written.column("count").to_pylist())
    return Sent(count, made.dead)


def _bindable(read: SourceRead) -> Iterator[tuple[ReadLayout, list[ReadPart]]]:
    """The read as the layouts and parts of the jobs that run it, in order: one, or its
    driver-built tables in chunks (``table_chunks``) and then its splits."""
    whole = read_layout(read)
    if whole is not None:
        yield whole
        return
    yield from table_chunks(read.tables)
    if read.splits:
        splits = read_layout(SourceRead(splits=read.splits))
        if splits is not None:
            yield splits
