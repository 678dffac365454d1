"""One source task's micro-batches: plan, record, read, transform, convert, send, commit.

Delivery into RocketMQ is exactly-once per source position: every message carries its batch
reference and source position as properties, and the plan records each queue's end offset before
anything is sent. When a recorded plan is re-run (the attempt before crashed between sending and
committing), the messages already written since those offsets are found and not sent again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import replace
from functools import cached_property, lru_cache, partial
from typing import TYPE_CHECKING, Final

import pyarrow as pa
from pyspark.sql import functions as F

from sluice.activities.bad_records import checked_records, failing_on_bad_records, raising_record_errors
from sluice.activities.runner import TaskSetup, next_plan, tell_committed
from sluice.activities.spark import binds_jobs
from sluice.activities.spark_binding import (
    ReadLayout,
    ReadPart,
    SourceReadBinder,
    chain_frame,
    read_layout,
    source_frame,
    spark_schema,
    table_chunks,
    table_frame,
)
from sluice.connectors.api import (
    KnowsEmptyRanges,
    KnowsSendOrder,
    ReportsWaiting,
    RoutesTopics,
    SendOrder,
)
from sluice.connectors.arrow_messages import MESSAGE_SCHEMA, sharded
from sluice.connectors.barriers import BARRIER_HEADER, BARRIER_QUEUES_HEADER
from sluice.connectors.converters import OFFSET_PROPERTY, PARTITION_PROPERTY, flag_unsendable
from sluice.connectors.errors import marked_bad_record
from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.planner import view_of
from sluice.connectors.planning import natural_key, ramped_budget
from sluice.connectors.records import position
from sluice.connectors.rocketmq.limits import size_problem_in_arrow, stamped_size
from sluice.connectors.rocketmq.spark_writer import (
    WRITTEN_SCHEMA,
    RocketMQWriter,
    SendPlan,
    bound_properties,
    send_frame,
    send_plan,
)
from sluice.connectors.source_reads import SourceRead

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from sluice.connectors.api import SourceTask
    from sluice.connectors.arrow_messages import MessageEncoder

log = logging.getLogger(__name__)

BATCH_PROPERTY = "sluice.batch"
#: Batch shapes whose jobs a task keeps (``SourceRunner._bound_send``): a task's batches have a
#: handful (a table's split count, a file's lines with and without undecodable ones).
MAX_BOUND_PLANS = 8


#: Where jobs are not bound (``_send_messages``), the most bytes of driver-built records whose
#: messages are made in Arrow on the driver: about 10,000 change events. A larger batch's messages
#: (2.5 times the records) would cross to the JVM as a local relation; Spark's path sends its
#: records there instead.
ARROW_TABLES_MAX_BYTES: Final = 10 * 1024 * 1024


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
        self._waits = task if isinstance(task, ReportsWaiting) else None
        self.topic: str = setup.config.get("topic") or ""
        self.topics: list[str] = self.routing.topics() if self.routing else [self.topic]
        #: new batches planned in this attempt: the first one is small (planning.ramped_budget)
        self.planned = 0
        #: each batch shape's whole job, built once (``_bound_send``)
        self._bound_plans: dict[tuple[object, ...], SendPlan] = {}
        #: the units the last new batch was planned for: at most its records (a byte counts at least one)
        self._budget: int | None = None
        #: each record shape's Arrow encoder, or None where Spark makes its messages (``_arrow_messages``)
        self._encoders: dict[pa.Schema, MessageEncoder | None] = {}

    def ensure_topic(self) -> None:
        client = self.ctx.rocketmq
        for topic in self.topics:
            if client.topic_exists(topic):
                continue
            if not self.config.get("topic.auto.create", True):
                raise LookupError(
                    f"connector {self.connector}: topic {topic} does not exist and topic.auto.create is false"
                )
            client.create_topic(topic, queue_count=int(self.config.get("topic.queues", 4)))

    def _queue_key(self, topic: str, key: str) -> str:
        """How the plan's ``queue_ends`` name a queue: ``broker:queue``, prefixed by the topic when
        the task writes several topics."""
        return f"{topic}/{key}" if self.routing else key

    def next_plan(self) -> tuple[BatchPlan | None, bool]:
        """The batch to run now and whether it is a re-run of a recorded, uncommitted plan."""
        unit = self.task.position_unit
        unit_limit = self.config["batch.max.bytes"] if unit == "bytes" else None
        max_units = ramped_budget(int(unit_limit or self.config["batch.max.records"]), unit, self.planned)
        plan, rerun = next_plan(self.setup, self.task.task_id, self._view, max_units)
        self._budget = max_units
        if plan is None or rerun:
            return plan, rerun
        self.planned += 1
        client = self.ctx.rocketmq
        queue_ends = {
            self._queue_key(topic, mq.key): client.max_offset(mq)
            for topic in self.topics
            for mq in client.queues(topic)
        }
        plan = replace(plan, sink_state={"queue_ends": json.dumps(queue_ends)})
        return self.ctx.store.record_plan(plan), False

    def close(self) -> None:
        self.task.close()

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
        read = self.task.read(ranges)
        # a re-run's join with what was sent may shuffle: sorted, whatever the read's order
        order = SendOrder.SORTED if rerun else self._send_order(ranges)
        sent = None if rerun else self._sent_in_arrow(plan, read, topic, order)
        if sent is not None:
            return sent
        bound = read_layout(read) if self._binds_reads and not rerun else None
        if bound is not None:
            layout, parts = bound
            return self._run_bound(plan, parts, self._bound_send(layout, topic, order))
        records = chain_frame(self.setup.chain, source_frame(self.ctx.spark, read))
        with (
            checked_records(records, self.setup) as good,
            # The converter can flag records too (a value it cannot encode).
            checked_records(
                self.setup.converter.to_messages(good, {BATCH_PROPERTY: batch_ref(plan)}), self.setup
            ) as messages,
        ):
            messages = self._sharded(messages, topic)
            if rerun:
                messages = self._without_already_sent(messages, plan, topic)
            return send_frame(self._ordered(messages, order), self._send_options(topic)).count

    def _run_bound(self, plan: BatchPlan, parts: list[ReadPart], send: SendPlan) -> int:
        """Run a bound job (``_bound_send``) on the batch's read and reference."""
        with (
            raising_record_errors(self.setup),
            self._binder.bound(parts),
            bound_properties(self.ctx.spark, {BATCH_PROPERTY: batch_ref(plan)}),
        ):
            return send.run().count

    def _sent_in_arrow(self, plan: BatchPlan, read: SourceRead, topic: str, order: SendOrder) -> int | None:
        """Send the batch with its messages made in Arrow (connectors.arrow_messages) when no
        transform rewrites its records and the converter makes messages of their shape; None, with
        nothing sent, leaves it to Spark's ``to_messages``.

        - Driver-built tables (a CDC batch, a snapshot chunk): bound to the shape's job in chunks
          (``_send_tables``), whose tasks make, check, shard and send the messages; where jobs are
          not bound (dead letters kept, Spark Connect), made here and sent through a frame
          (``_send_messages``).
        - One table's splits (a JDBC batch): each split's task reads, makes, checks, shards and
          sends its own, when the order allows tasks to send at once (keys unique in the batch, or
          one split).

        Built with Spark expressions, a CDC batch's Debezium envelopes were a third of its source
        job, and every message crossed between Python and the JVM twice (#18)."""
        if self.setup.chain or (read.tables and read.splits):
            return None
        if self._budget is not None and self._budget <= self.ctx.settings.local_batch_max_records:
            return self._sent_here(plan, read, topic, order)
        if read.tables:
            if any(self._encoder(t.schema) is None for t in read.tables):
                return None
            if self._binds_reads:
                return self._send_tables(plan, read.tables, topic, order)
            if sum(t.nbytes for t in read.tables) > ARROW_TABLES_MAX_BYTES:
                return None
            messages = self._arrow_messages(read.tables)
            return None if messages is None else self._send_messages(plan, messages, topic, order)
        if len(read.splits) != 1 or not self._binds_reads:
            return None
        splits = read.splits[0]
        encoder = self._encoder(splits.schema)
        if encoder is None or (order is not SendOrder.ANY and len(splits.splits) > 1):
            return None
        bound = read_layout(read)
        if bound is None:
            return None
        layout, parts = bound
        return self._run_bound(plan, parts, self._bound_send(layout, topic, order, in_arrow=encoder))

    def _sent_here(self, plan: BatchPlan, read: SourceRead, topic: str, order: SendOrder) -> int | None:
        """A small batch (``local_batch_max_records``) made and sent in the worker's process, with
        no Spark job: the same stages a bound job's task runs (``_send_in_task``: encode, size
        check, shard, order, send), part by part in order (each driver-built table, each split
        group read here: ``SourceRead.to_table``), each with its shape's encoder. None, with nothing
        sent, when a part's shape has no Arrow encoder (Spark makes its messages)."""
        parts = [*read.tables, *(SourceRead(splits=(s,)).to_table() for s in read.splits)]
        encoders = [self._encoder(part.schema) for part in parts]
        if any(encoder is None for encoder in encoders):
            return None
        options = {
            **self._send_options(topic),
            "stampedProperties": json.dumps({BATCH_PROPERTY: batch_ref(plan)}),
        }
        writer = RocketMQWriter(options, spark_schema(SHARDED_SCHEMA))
        where, queues, sent = f"connector {self.connector}", self._queues(topic), 0
        with raising_record_errors(self.setup):
            for part, encoder in zip(parts, encoders, strict=True):
                for written in _send_in_task(
                    encoder, where, self._stamped_bytes, writer, queues, order, part
                ):
                    sent += sum(written.column("count").to_pylist())
        return sent

    def _send_tables(self, plan: BatchPlan, tables: Sequence[pa.Table], topic: str, order: SendOrder) -> int:
        """Driver-built records sent by the shape's bound job, one run per chunk (``table_chunks``)
        in order: each run's one task makes the chunk's messages (``_send_in_task``), so the
        driver only compresses records, and a batch of any size stays off Py4J. A sorted order is
        made here, since a chunk's task sorts only its own share."""
        if order is SendOrder.SORTED:
            tables = [t.sort_by([("partition", "ascending"), ("offset", "ascending")]) for t in tables]
        sent = 0
        for layout, parts in table_chunks(tables):
            encoder = self._encoder(layout.schemas[0])
            if encoder is None:  # never: each table's shape was checked (``_sent_in_arrow``)
                raise RuntimeError(f"connector {self.connector}: no Arrow encoder for a checked shape")
            sent += self._run_bound(plan, parts, self._bound_send(layout, topic, order, in_arrow=encoder))
        return sent

    def _encoder(self, schema: pa.Schema) -> MessageEncoder | None:
        if schema not in self._encoders:
            self._encoders[schema] = self.setup.converter.arrow_encoder(schema)
        return self._encoders[schema]

    def _arrow_messages(self, tables: Sequence[pa.Table]) -> pa.Table | None:
        """The messages of driver-built tables, when every one's shape has an encoder and every
        message fits the broker's limits."""
        encoded = []
        for table in tables:
            encoder = self._encoder(table.schema)
            if encoder is None:
                return None
            encoded.append(encoder.encode(table))
        messages = pa.concat_tables(encoded)
        return messages if size_problem_in_arrow(messages, self._stamped_bytes) is None else None

    def _send_messages(self, plan: BatchPlan, messages: pa.Table, topic: str, order: SendOrder) -> int:
        """Send messages made in Arrow (``_arrow_messages``) through a frame of their own (jobs
        not bound); the writer stamps the batch reference (``boundProperties``)."""
        spark = self.ctx.spark
        frame = flag_unsendable(table_frame(spark, messages), self._stamped_bytes)
        with (
            checked_records(frame, self.setup) as good,
            bound_properties(spark, {BATCH_PROPERTY: batch_ref(plan)}),
        ):
            options = {**self._send_options(topic), "boundProperties": "true"}
            return send_frame(self._ordered(self._sharded(good, topic), order), options).count

    @cached_property
    def _stamped_bytes(self) -> int:
        """The most the batch reference the writer stamps adds to a message (its size check)."""
        return stamped_size({BATCH_PROPERTY: f"{self.connector}/{self.task.task_id}/{'9' * 19}"})

    def _bound_send(
        self, layout: ReadLayout, topic: str, order: SendOrder, *, in_arrow: MessageEncoder | bool = False
    ) -> SendPlan:
        """The batch's whole job (read, transforms, checks, converter, send) for reads of
        ``layout``, built once per shape: its tasks take the batch's read and reference from the
        job (``SourceReadBinder``, the writer's ``boundProperties``), so a batch costs a job run,
        not a plan built from nothing (~750 Py4J calls and ~0.3 s a batch, #18).

        ``in_arrow``: the read's tasks send it themselves (``_send_in_task``), its rows never
        crossing into Spark; ``True`` when the read is messages already, an encoder when its tasks
        make them."""
        queues = self._queues(topic)
        key = (layout, topic, order, queues, in_arrow)
        if key not in self._bound_plans:
            if len(self._bound_plans) >= MAX_BOUND_PLANS:
                self._bound_plans.clear()
            options = {**self._send_options(topic), "boundProperties": "true"}
            if in_arrow:
                writer = RocketMQWriter(options, spark_schema(SHARDED_SCHEMA))
                encoder = None if in_arrow is True else in_arrow
                where = f"connector {self.connector}"
                send = partial(_send_in_task, encoder, where, self._stamped_bytes, writer, queues, order)
                written = self._binder.consumed(layout, send, WRITTEN_SCHEMA)
                self._bound_plans[key] = SendPlan(writer.topic, written)
            else:
                frame = self._binder.frame(layout)
                good = failing_on_bad_records(chain_frame(self.setup.chain, frame), self.setup)
                messages = failing_on_bad_records(
                    self.setup.converter.to_messages(good, stamped_bytes=self._stamped_bytes), self.setup
                )
                messages = self._ordered(self._sharded(messages, topic, queues), order)
                self._bound_plans[key] = send_plan(messages, options)
        return self._bound_plans[key]

    @cached_property
    def _binder(self) -> SourceReadBinder:
        """Made at the first batch: an idle task, or one started while the worker's Spark session is
        still starting, plans and heartbeats without Spark (activities.connector_activities)."""
        return SourceReadBinder(self.ctx.spark)

    @property
    def _binds_reads(self) -> bool:
        """Whether batches run a plan built once (``_bound_send``): not when records are tolerated
        (their dead letters need a job of their own), nor on Spark Connect (nothing binds a job)."""
        return binds_jobs(self.ctx.spark) and self.config.get("errors.tolerance") != "all"

    def _queues(self, topic: str) -> tuple[str, ...]:
        """The topic's queues in the writer's order: index i is the i-th."""
        return tuple(q.key for q in sorted(self.ctx.rocketmq.queues(topic), key=lambda q: natural_key(q.key)))

    def _sharded(self, messages: DataFrame, topic: str, queues: tuple[str, ...] | None = None) -> DataFrame:
        """``messages`` with the ``queue`` each goes to: ``crc32(key) % queues`` for a keyed record
        (per-key order, as Kafka's default partitioner keeps it), its source partition's for a
        keyless one (a table without a key keeps its whole order), and every queue for a barrier,
        each copy labelled ``<i>/<n>`` with the list of queues sent to (connectors.barriers)."""
        queue, properties = _shard_columns(queues or self._queues(topic))
        return messages.withColumn("queue", queue).withColumn("properties", properties)

    def _send_order(self, ranges: Sequence[PartitionRange]) -> SendOrder:
        """The task's own word on its read's order (KnowsSendOrder) when nothing transforms it."""
        if isinstance(self.task, KnowsSendOrder) and not self.setup.chain:
            return self.task.send_order(ranges)
        return SendOrder.SORTED

    def _send_options(self, topic: str) -> dict[str, str]:
        return {"namesrv": self.ctx.settings.namesrv, "topic": topic}

    def _ordered(self, messages: DataFrame, order: SendOrder) -> DataFrame:
        """``messages`` as the send takes them, keeping each key's order.

        Each message goes to its ``queue`` (``_sharded``), and a queue must get one key's messages
        in source order, whatever order the source and transforms produced: one Spark partition
        sorted by source position gives that without a shuffle (Spark would otherwise write chunks
        of one batch concurrently). A read that is already in order (``SendOrder.AS_READ``) skips
        the sort; one whose keys are unique in the batch (``SendOrder.ANY``) is sent by up to the
        worker's ``batch_tasks`` Spark tasks at once. The send's count is what its own job returns
        (``send_frame``), so the batch is computed once, by the write.
        """
        if order is SendOrder.SORTED:
            return messages.coalesce(1).sortWithinPartitions("partition", "offset")
        if order is SendOrder.AS_READ:
            return messages.coalesce(1)
        # no more sending tasks than the worker allows a batch (Settings.batch_tasks)
        return messages.coalesce(self.ctx.settings.batch_tasks)

    def _without_already_sent(self, messages: DataFrame, plan: BatchPlan, topic: str) -> DataFrame:
        """Drop records an earlier attempt of this plan already sent (found by batch property)."""
        sent = sorted(self._sent_positions(plan, topic))
        if not sent:
            return messages
        spark = self.ctx.spark
        done = spark.createDataFrame(sent, "p string, o string, b string")
        props = F.col("properties")
        keyed = messages.select(
            "*",
            props[PARTITION_PROPERTY].alias("_p"),
            props[OFFSET_PROPERTY].alias("_o"),
            F.coalesce(props[BARRIER_HEADER], F.lit("")).alias("_b"),  # a barrier: one message per copy
        )
        sent_before = (keyed["_p"] == done["p"]) & (keyed["_o"] == done["o"]) & (keyed["_b"] == done["b"])
        return keyed.join(done, sent_before, "left_anti").drop("_p", "_o", "_b")

    def _sent_positions(self, plan: BatchPlan, topic: str) -> set[tuple[str, str, str]]:
        ref = batch_ref(plan)
        client = self.ctx.rocketmq
        starts: dict[str, int] = json.loads(plan.sink_state.get("queue_ends", "{}"))
        found: set[tuple[str, str, str]] = set()
        for mq in client.queues(topic):
            start = starts.get(self._queue_key(topic, mq.key), 0)
            for m in client.pull_range(mq, start, client.max_offset(mq), max_per_request=512):
                if m.properties.get(BATCH_PROPERTY) == ref:
                    props = m.properties
                    found.add(
                        (
                            props.get(PARTITION_PROPERTY, ""),
                            props.get(OFFSET_PROPERTY, ""),
                            props.get(BARRIER_HEADER, ""),
                        )
                    )
        return found


#: Messages made in Arrow with the queue each goes to (connectors.arrow_messages.sharded).
SHARDED_SCHEMA: Final = MESSAGE_SCHEMA.append(pa.field("queue", pa.int32()))


def _send_in_task(
    encoder: MessageEncoder | None,
    where: str,
    stamped_bytes: int,
    writer: RocketMQWriter,
    queues: tuple[str, ...],
    order: SendOrder,
    read: pa.Table,
) -> Iterator[pa.RecordBatch]:
    """A bound job's task body for a read sent in Arrow (``SourceReadBinder.consumed``): its
    messages made by ``encoder`` (None: the read is messages already, checked on the driver) and
    checked for size, sharded and ordered as ``_sharded`` and ``_ordered`` do in Spark, and sent;
    yields the ranges written (``WRITTEN_SCHEMA``). A message over the broker's limits fails the
    job as a flagged record does (records.fail_on_bad_records), naming its position."""
    messages = read
    if encoder is not None:
        messages = encoder.encode(read)
        problem = size_problem_in_arrow(messages, stamped_bytes)
        if problem is not None:
            row, why = problem
            at = position(messages["topic"][row].as_py(), messages["partition"][row].as_py(),
                          messages["offset"][row].as_py())  # fmt: skip
            raise RuntimeError(marked_bad_record(f"{where}: bad record at {at}: {why}"))
    messages = sharded(messages, queues)
    if order is SendOrder.SORTED:
        messages = messages.sort_by([("partition", "ascending"), ("offset", "ascending")])
    yield from writer.write_batches(messages.to_batches())


@lru_cache(maxsize=256)
def _shard_columns(queues: tuple[str, ...]) -> tuple[Column, Column]:
    """``_sharded``'s ``queue`` and ``properties`` columns for a topic's ``queues``: built once per
    topic shape, since each function call of an expression is a JVM round trip."""
    count = len(queues)
    props = F.col("properties")
    barrier = props[BARRIER_HEADER].isNotNull()
    key = F.coalesce(F.col("keys"), F.col("partition")).cast("binary")
    slot = F.pmod(F.crc32(key), F.lit(count)).cast("int")
    queue = F.explode(F.when(barrier, F.sequence(F.lit(0), F.lit(count - 1))).otherwise(F.array(slot)))
    label = F.concat(F.col("queue").cast("string"), F.lit(f"/{count}"))
    labelled = F.map_concat(
        F.map_filter(props, lambda k, _: k != F.lit(BARRIER_HEADER)),
        F.create_map(F.lit(BARRIER_HEADER), label, F.lit(BARRIER_QUEUES_HEADER), F.lit(",".join(queues))),
    )
    return queue, F.when(barrier, labelled).otherwise(props)
