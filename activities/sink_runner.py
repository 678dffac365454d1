"""One sink task's micro-batches: plan queue ranges, record, read exactly them, convert, write, commit.

Positions are per (topic, queue) (``PartitionKey(queue, topic)``). The sink's own ``prepare`` state
is recorded with the plan, so a re-run after a crash can undo a partial write; a
``TransactionalSink`` (PostgreSQL) commits positions in its own data transaction instead of the
runtime.
Consumer-group offsets are mirrored to the broker (group ``sluice-<connector>``, see
``sluice.connectors.rocketmq.offsets.consumer_group``) so RocketMQ's own tools show the lag; the store stays
the truth, and deleting the connector deletes the group.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pyspark import StorageLevel
from pyspark.sql import functions as F

from sluice.activities.bad_records import checked_records
from sluice.activities.dead_letters import route_bad_records
from sluice.activities.runner import TaskSetup, next_plan, sink_plan
from sluice.activities.spark import binds_jobs
from sluice.activities.spark_binding import batch_table, chain_frame, staged_shares
from sluice.connectors.api import (
    OrdersBarriers,
    RejectedRecordsError,
    StagedRowsRefused,
    StagesOnExecutors,
    TransactionalSink,
    WritesFrames,
)
from sluice.connectors.arrow_envelopes import ARROW_DECLINED, UnmetSchemaError, declined_reason
from sluice.connectors.barriers import BARRIER_HEADER
from sluice.connectors.connect_schemas import SCHEMA_KEY, laid_out_prefixes
from sluice.connectors.converters import TOMBSTONE_PROPERTY, JsonConverter
from sluice.connectors.envelopes import UNMET_SCHEMA
from sluice.connectors.model import BatchPlan, DataLossPolicy, parse_queue_partition
from sluice.connectors.planner import OffsetView
from sluice.connectors.planning import linger_s, ramped_budget
from sluice.connectors.positions import PartitionKey, Position
from sluice.connectors.records import LeftToSpark, RecordError, flag_errors, good_arrow_records
from sluice.connectors.rocketmq.client import MessageQueue
from sluice.connectors.rocketmq.codec import PROP_KEYS, decode_properties
from sluice.connectors.rocketmq.offsets import consumer_group
from sluice.connectors.rocketmq.spark_source import (
    RocketMQReader,
    bound_partitions,
    bound_read_frame,
    plan_to_json,
    read_frame,
    read_partitions,
)
from sluice.connectors.transforms import apply_chain, runs_in_arrow, value_read

log = logging.getLogger(__name__)

#: Shapes of met-schema batches whose records' DataFrames a task keeps (``SinkRunner._met_records``):
#: one per count of input partitions a batch may read, more only while the schemas change.
MAX_MET_PLANS = 8

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

    from sluice.connectors.api import SinkTask
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient


#: The most messages a task's first batch pulls on the driver to learn their envelope schemas
#: (``SinkRunner._learn_first_schemas``); a first batch is 1,000 at most (planning.ramped_budget).
LEARN_ON_DRIVER_MAX = 5_000

#: Rounds of "write, dead-letter what the target refused, write the rest" before giving up.
MAX_REJECTION_ROUNDS = 3


def matching_topics(topics: list[str], pattern: str) -> list[str]:
    """Topics whose whole name matches ``pattern`` (Kafka's ``topics.regex`` semantics)."""
    compiled = re.compile(pattern)
    return sorted(t for t in topics if compiled.fullmatch(t))


def flag_rejected(records: DataFrame, exc: RejectedRecordsError) -> DataFrame:
    """``records`` with the refused ones flagged in the error column (the reason as the error)."""
    spark = records.sparkSession
    refused = spark.createDataFrame(
        [(r.partition, r.offset, r.reason) for r in exc.rejected],
        "_r_partition STRING, _r_offset BIGINT, _r_reason STRING",
    )
    joined = records.join(
        F.broadcast(refused),
        (records["partition"] == refused["_r_partition"]) & (records["offset"] == refused["_r_offset"]),
        "left",
    )
    flagged = flag_errors(joined, F.col("_r_reason").isNotNull(), F.col("_r_reason"))
    return flagged.drop("_r_partition", "_r_offset", "_r_reason")


def once_per_barrier() -> Column:
    """Messages but a barrier's copies after the first (connectors.barriers): a sink that does
    not order barriers sees each barrier record once, in queue ``0`` of its topic."""
    label = F.col("properties")[BARRIER_HEADER]
    return label.isNull() | label.startswith("0/")


def assigned(queues: list[MessageQueue], task_id: int, task_count: int) -> list[MessageQueue]:
    """Queues of all topics split round-robin over the tasks, in a stable order."""
    ordered = sorted(queues, key=lambda q: (q.topic, q.broker_name, q.queue_id))
    return [q for i, q in enumerate(ordered) if i % task_count == task_id]


class QueueView(OffsetView):
    """The RocketMQ queues a sink task reads, as the planner's PositionView (offset positions)."""

    def __init__(self, client: SyncRocketMQClient, topics: list[str], task_id: int, task_count: int) -> None:
        every = [q for topic in topics for q in client.queues(topic)]
        self.client = client
        self.queues = {PartitionKey(q.key, q.topic): q for q in assigned(every, task_id, task_count)}

    def partitions(self) -> list[PartitionKey]:
        return list(self.queues)

    def earliest(self) -> dict[PartitionKey, Position]:
        return {k: Position((self.client.min_offset(q),)) for k, q in self.queues.items()}

    def latest(self, committed: Mapping[PartitionKey, Position]) -> dict[PartitionKey, Position]:
        return {k: Position((self.client.max_offset(q),)) for k, q in self.queues.items()}


class SinkRunner:
    runs_on_spark = True

    def __init__(self, setup: TaskSetup, task: SinkTask, task_count: int) -> None:
        self.setup = setup
        self.ctx = setup.ctx
        self.connector = setup.connector
        self.config = setup.config
        self.task = task
        self.task_count = task_count
        self.topics: list[str] = list(setup.config.get("topics") or [])
        self.pattern = str(setup.config.get("topics.regex") or "")
        self.group = consumer_group(setup.connector)
        #: what status shows for the task; None until the first batch was looked at (setting_notice)
        self.notice: str | None = None
        #: new batches planned in this attempt: the first one is small (planning.ramped_budget)
        self.planned = 0
        #: the records of a batch decoded with the schemas met, built once per shape (``_met_records``)
        self._met_plans: dict[tuple[object, ...], DataFrame] = {}
        #: shapes whose envelopes the Arrow decode declined once: Spark decodes them from then on
        self._spark_decoded: set[tuple[object, ...]] = set()
        #: schemas met whose batches the Arrow path declined once (``_ran_in_arrow``): Spark runs them
        self._left_to_spark: set[tuple[object, ...]] = set()

    def ensure_topic(self) -> None:
        """Create the named topics; a ``topics.regex`` sink reads only topics that exist."""
        client = self.ctx.rocketmq
        for topic in self.topics:
            if not client.topic_exists(topic):
                client.create_topic(topic, queue_count=int(self.config.get("topic.queues", 4)))

    def hears(self, topic: str) -> bool:
        """Whether a source's commit to ``topic`` should wake this idle task (activities.doorbells)."""
        if self.pattern:
            return re.fullmatch(self.pattern, topic) is not None
        return topic in self.topics

    def current_topics(self) -> list[str]:
        """The topics of this plan: ``topics``, or the broker's topics matching ``topics.regex``
        now (re-resolved every plan, so a new matching topic is picked up by the next batch;
        RocketMQ's retry/DLQ/system topics never match unless the pattern says so)."""
        if not self.pattern:
            return self.topics
        return matching_topics(self.ctx.rocketmq.all_topics(), self.pattern)

    def next_plan(self) -> tuple[BatchPlan | None, bool]:
        max_units = ramped_budget(int(self.config["batch.max.records"]), "records", self.planned)
        plan, rerun = self._plan(max_units)
        if plan is not None and not rerun:
            wait_s = linger_s(plan.record_span, max_units, int(self.config.get("batch.linger.ms") or 0))
            if wait_s:  # batch.linger.ms: once, then whatever has arrived
                time.sleep(wait_s)
                plan, rerun = self._plan(max_units)
        if plan is None:
            return None, False
        self.planned += 0 if rerun else 1
        return sink_plan(self.setup, self.task, plan, rerun), rerun

    def _plan(self, max_units: int | None) -> tuple[BatchPlan | None, bool]:
        view = QueueView(self.ctx.rocketmq, self.current_topics(), self.task.task_id, self.task_count)
        return next_plan(self.setup, self.task.task_id, view, max_units)

    def close(self) -> None:
        self.task.close()

    def waiting_for(self) -> str:
        return self.notice or ""

    def setting_notice(self, messages: DataFrame) -> str:
        """What a batch's messages say about the converter settings, looked at once per task.

        A json converter with schemas off (and no declared schema) writes envelope-carrying
        messages as JSON text: a valid config with a silently different result (a table with the
        records' coordinates and their JSON, not their fields). Kafka Connect would do the same
        without a word; Sluice says so once in status and in the worker log.
        """
        converter = self.setup.converter
        if not isinstance(converter, JsonConverter) or converter.schemas_enable or converter.value_schema:
            return ""
        head = SCHEMA_KEY.encode()
        first = (
            messages.where(F.substring(F.col("body"), 1, len(head)) == F.lit(head))
            .select("topic", "queue_offset")
            .limit(1)
            .collect()
        )
        if not first:
            return ""
        notice = (
            f"connector {self.connector}: value.converter.schemas.enable=false, but messages carry the "
            f"Connect envelope {{schema, payload}} (first at topic {first[0]['topic']!r} offset "
            f"{first[0]['queue_offset']}): they are written as JSON text, not as their fields; "
            "set value.converter.schemas.enable=true"
        )
        log.warning("%s", notice)
        return notice

    def run(self, plan: BatchPlan, rerun: bool) -> int:
        self._learn_first_schemas(plan)
        if not self._ran_in_arrow(plan) and not self._ran_with_schemas_met(plan):
            self._run_searched(self._messages(plan), plan)
        if not isinstance(self.task, TransactionalSink):
            self.ctx.store.commit(plan)
        self.setup.positions.committed_batch(plan)  # by the store or in the sink's transaction
        self._mirror_consumer_offsets(plan)
        return plan.record_span

    def _learn_first_schemas(self, plan: BatchPlan) -> None:
        """A task's first batch (small: planning.ramped_budget) learns its envelope schemas on the
        driver (``_learned_on_driver``), so that it runs as later batches do (in Arrow, or decoded
        in Arrow in one Spark job) instead of a search job over a persisted pull and a plan built
        for both: a new connector's first rows come sooner."""
        if self.notice is None:
            self._learned_on_driver(plan)

    def _learned_on_driver(self, plan: BatchPlan) -> bool:
        """Learn a small batch's envelope schemas from its messages pulled on the driver; whether
        all were learned. Anything unusual (a body laid out otherwise, not UTF-8, a larger batch,
        tolerance) leaves the batch to the search, which tells what it is."""
        converter = self.setup.converter
        if self.tolerates or not converter.discovers_envelopes or plan.record_span > LEARN_ON_DRIVER_MAX:
            return False
        values: list[tuple[str, str | None]] = []
        keys: list[tuple[str, str | None]] = []
        try:
            for r in plan.ranges:
                if r.is_empty:
                    continue
                broker, queue_id = parse_queue_partition(r.partition)
                queue = MessageQueue(r.topic, broker, queue_id)
                pulled = self.ctx.rocketmq.pull_range_columns(queue, r.start.offset, r.end.offset)
                for body, text in zip(pulled.body, pulled.properties, strict=True):
                    properties = decode_properties(text)
                    tombstone = properties.get(TOMBSTONE_PROPERTY) == "true"
                    values.append((r.topic, None if tombstone else body.decode("utf-8")))
                    keys.append((r.topic, properties.get(PROP_KEYS) or None))
        except Exception:  # noqa: BLE001 - a pull the search would fail too, or a body that is not UTF-8
            log.debug("connector %s: batch's schemas left to the search", self.connector, exc_info=True)
            return False
        found = {"value": laid_out_prefixes(values)}
        if converter.key_envelopes:
            found["key"] = laid_out_prefixes(keys)
        learned = {name: pairs for name, pairs in found.items() if pairs is not None}
        if len(learned) != len(found):
            return False
        converter.seen_prefixes.remember(learned)
        self.notice = ""  # a converter that reads envelopes has no setting to point out
        return True

    def _read_options(self, plan: BatchPlan) -> dict[str, str]:
        return {
            "namesrv": self.ctx.settings.namesrv,
            "plan": plan_to_json(plan.ranges),
            "failOnDataLoss": str(self.setup.data_loss is DataLossPolicy.FAIL).lower(),
            "maxTasks": str(self.ctx.settings.batch_tasks),
        }

    def _messages(self, plan: BatchPlan) -> DataFrame:
        """The plan's messages, as the ``rocketmq`` reader pulls them (nothing runs yet)."""
        return self._barriers_once(read_frame(self.ctx.spark, self._read_options(plan)))

    @property
    def _sees_every_barrier_copy(self) -> bool:
        """A task that orders barriers sees every copy; others one of each (``once_per_barrier``)."""
        return isinstance(self.task, OrdersBarriers) and self.task.orders_barriers()

    def _barriers_once(self, messages: DataFrame) -> DataFrame:
        return messages if self._sees_every_barrier_copy else messages.where(once_per_barrier())

    def _ran_in_arrow(self, plan: BatchPlan, *, learn: bool = True) -> bool:
        """Write a small batch of envelope schemas met before with no Spark job: pulled here by the
        reader's own code, its records and the chain's transforms made in Arrow
        (connectors.arrow_records), checked and written as ``_write_table`` does. False, with
        nothing written, when the batch is larger than the worker's ``local_batch_max_records``, a transform
        is Spark SQL, or the Arrow path declines the batch (``LeftToSpark``: a record it
        does not make exactly as Spark would); the batch then runs in Spark. A schema not met is
        learnt on the driver when the batch is small (``learn``: once), as a first batch's are.
        """
        converter, topics = self.setup.converter, {r.topic for r in plan.ranges if not r.is_empty}
        if (
            plan.record_span > self.ctx.settings.local_batch_max_records
            or not runs_in_arrow(self.setup.chain)
            or self.tolerates
            or self.notice is None
            or isinstance(self.task, WritesFrames)
        ):
            return False
        if not converter.knows_schemas(topics) and not (
            learn and self._learned_on_driver(plan) and converter.knows_schemas(topics)
        ):
            return False
        shape = converter.seen_prefixes.snapshot()
        narrow = value_read(self.setup.chain)
        records_plan = None if shape in self._left_to_spark else converter.arrow_records(narrow)
        if records_plan is None:
            return False
        reader = RocketMQReader(self._read_options(plan))
        try:
            table = records_plan.records(
                (batch for part in reader.partitions() for batch in reader.read(part)),
                barriers_once=not self._sees_every_barrier_copy,
            )
            if table is None:
                return False
            table = apply_chain(self.setup.chain, table)
        except LeftToSpark as exc:
            self._left_to_spark.add(shape)
            log.info("connector %s: batches are left to Spark (%s)", self.connector, exc)
            return False
        except UnmetSchemaError:
            # A schema not met (a column added, a new table): learnt here when the batch is small,
            # else the Spark path meets it again and searches the batch.
            log.info(
                "connector %s: batch %s carries an envelope schema not met before: learning it",
                self.connector, plan.batch_id,
            )  # fmt: skip
            return learn and self._learned_on_driver(plan) and self._ran_in_arrow(plan, learn=False)
        self._write_table(table, plan)
        return True

    def _ran_with_schemas_met(self, plan: BatchPlan) -> bool:
        """Write a batch in one Spark job, decoded with the envelope schemas met before, when it can
        be (no tolerance, the task's first batch done, every topic's schemas met): no job searches
        the batch for its schemas and nothing is persisted, since nothing reads the messages twice.
        False, with nothing written, when a record carries a schema not met before: the batch is
        then run again with the search (``_run_searched``), which learns it.
        """
        converter = self.setup.converter
        topics = {r.topic for r in plan.ranges if not r.is_empty}
        if self.tolerates or self.notice is None or not converter.knows_schemas(topics):
            return False
        try:
            if isinstance(self.task, WritesFrames) or not binds_jobs(self.ctx.spark):
                narrow = value_read(self.setup.chain)
                decoded = converter.to_records(self._messages(plan), narrow, assume_met=True)
                self._write_strict(decoded, plan)
            else:
                self._write_met(plan)
        except Exception as exc:
            if ARROW_DECLINED in str(exc) and UNMET_SCHEMA not in str(exc):
                self._spark_decoded.add(self._met_shape(len(read_partitions(self._read_options(plan)))))
                log.info(
                    "connector %s: batch %s is left to Spark's decode (%s)",
                    self.connector, plan.batch_id, declined_reason(str(exc)),
                )  # fmt: skip
                return self._ran_with_schemas_met(plan)
            if UNMET_SCHEMA not in str(exc):
                raise
            log.info(
                "connector %s: batch %s carries an envelope schema not met before (the Spark error "
                "just logged is that): searching its schemas",
                self.connector,
                plan.batch_id,
            )
            return False
        return True

    def _write_met(self, plan: BatchPlan) -> None:
        """``_write_strict`` of the batch decoded with the schemas met, its plan built once per shape.

        The records' DataFrame (read, decode, transforms, checks) is the same for every such batch
        of as many input partitions: it is built once (``_met_records``) over a read whose
        partitions each job is given (``bound_read_frame``). Each batch runs it as a new Dataset
        (``select("*")``), planned afresh: a Dataset run twice would reuse its adaptive plan's
        finished shuffle stages, the last batch's data.
        """
        options = self._read_options(plan)
        partitions = read_partitions(options)
        records = self._met_records(options, len(partitions))
        with bound_partitions(self.ctx.spark, partitions):
            self._write_records(records.select("*"), plan)

    def _met_records(self, options: Mapping[str, str], count: int) -> DataFrame:
        """The checked records of any batch of ``count`` input partitions decoded with the schemas
        met so far; a new shape (partitions, or schemas met) builds its own."""
        converter = self.setup.converter
        shape = self._met_shape(count)
        key = (*shape, shape in self._spark_decoded)
        if key not in self._met_plans:
            if len(self._met_plans) >= MAX_MET_PLANS:
                self._met_plans.clear()
            narrow = value_read(self.setup.chain)
            in_arrow = None if shape in self._spark_decoded else converter.arrow_decoder(narrow)
            decoded_read = None if in_arrow is None else (in_arrow[0].decode, in_arrow[1])
            log.debug(
                "connector %s: batches of %d input partitions decoded in %s",
                self.connector, count, "Spark" if in_arrow is None else "Arrow, in the read",
            )  # fmt: skip
            messages = self._barriers_once(bound_read_frame(self.ctx.spark, options, count, decoded_read))
            decoded = converter.to_records(messages, narrow, assume_met=True)
            self._met_plans[key] = chain_frame(self.setup.chain, decoded)
        return self._met_plans[key]

    def _met_shape(self, count: int) -> tuple[object, ...]:
        """What a met-schema batch's records plan depends on: its input partitions, the schemas met."""
        return (count, self.setup.converter.seen_prefixes.snapshot())

    def _run_searched(self, messages: DataFrame, plan: BatchPlan) -> None:
        """Write a batch whose envelope schemas are searched first (the converter's own job)."""
        # A batch is read in several Spark jobs (the setting notice, the json converter's schemas,
        # dead letters): pull the range from the broker once.
        messages = messages.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            if self.notice is None:
                self.notice = self.setting_notice(messages)
            decoded = self.setup.converter.to_records(messages, value_read(self.setup.chain))
            if self.tolerates:
                records = chain_frame(self.setup.chain, decoded)
                with checked_records(records, self.setup, originals=messages) as good:
                    self._write_tolerating(good, plan, messages)
            else:
                self._write_strict(decoded, plan)
        finally:
            messages.unpersist()

    @property
    def tolerates(self) -> bool:
        return self.config.get("errors.tolerance") == "all"

    def _write_strict(self, decoded: DataFrame, plan: BatchPlan) -> None:
        """Without tolerance: the converter's records transformed (the chain in the job, above the
        parse: spark_binding.chain_frame), collected in one job and checked on the driver
        (records.good_arrow_records), so the converter's parse runs once; anything flagged, or
        refused by the target, fails the task naming the record."""
        records = chain_frame(self.setup.chain, decoded)
        if isinstance(self.task, WritesFrames):
            with checked_records(records, self.setup) as good:
                self.task.write_frame(good, plan)
            return
        self._write_records(records, plan)

    def _write_records(self, records: DataFrame, plan: BatchPlan) -> None:
        """A strict batch's records written: staged by the Spark tasks that compute them where the
        sink stages (connectors.api.StagesOnExecutors: only small results reach the driver), else
        collected and written here. A staged batch the target refuses rows of is written from here
        instead, which names each refused record."""
        task = self.task
        stager = task.stager(plan) if isinstance(task, StagesOnExecutors) else None
        if stager is None or not isinstance(task, StagesOnExecutors):
            self._write_table(batch_table(records), plan)
            return
        shares = staged_shares(records, stager, f"connector {self.connector}")
        try:
            task.write_staged(shares, plan)
        except StagedRowsRefused as exc:
            log.info(
                "connector %s: %s; writing the batch from the worker to name the records", self.connector, exc
            )
            self._write_table(batch_table(records), plan)

    def _write_table(self, table: pa.Table, plan: BatchPlan) -> None:
        """Check a strict batch's collected records on the driver and write them."""
        good = good_arrow_records(table, f"connector {self.connector}")
        try:
            self.task.write(good, plan)
        except RejectedRecordsError as exc:
            raise RecordError(str(exc)) from None

    def _write_tolerating(self, records: DataFrame, plan: BatchPlan, messages: DataFrame) -> None:
        """``errors.tolerance=all``: records the target refuses go to the dead-letter topic and the
        rest is collected and written again, for at most ``MAX_REJECTION_ROUNDS`` rounds. A task
        that writes frames (Delta, Iceberg) refuses no single record: its write is all or nothing."""
        if isinstance(self.task, WritesFrames):
            self.task.write_frame(records, plan)
            return
        for _ in range(MAX_REJECTION_ROUNDS):
            try:
                self.task.write(batch_table(records), plan)
                return
            except RejectedRecordsError as exc:
                records = route_bad_records(flag_rejected(records, exc), self.setup, messages)
        raise RecordError(
            f"connector {self.connector}: batch {plan.batch_id} still refused after "
            f"{MAX_REJECTION_ROUNDS} rounds of dead-lettering"
        )

    def _mirror_consumer_offsets(self, plan: BatchPlan) -> None:
        for r in plan.ranges:
            broker, queue_id = parse_queue_partition(r.partition)
            try:
                self.ctx.rocketmq.update_consumer_offset(
                    self.group, MessageQueue(r.topic, broker, queue_id), r.end.offset
                )
            except Exception:  # a dashboard hint only; the offset store is the truth
                log.warning("could not mirror consumer offset of %s/%s", r.topic, r.partition, exc_info=True)
