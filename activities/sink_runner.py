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
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from sluice.activities.dead_letters import send_dead_letters, write_rounds
from sluice.activities.runner import TaskSetup, next_plan, sink_plan
from sluice.activities.spark_binding import batch_table, chain_frame, sink_job, table_frame
from sluice.connectors.api import (
    OrdersBarriers,
    StagedRowsRefused,
    StagesOnExecutors,
    TransactionalSink,
    WritesFrames,
)
from sluice.connectors.arrow_records import empty_records
from sluice.connectors.connect_schemas import SCHEMA_KEY
from sluice.connectors.converters import TOMBSTONE_PROPERTY, JsonConverter
from sluice.connectors.dead_letter_messages import dead_letters
from sluice.connectors.model import BatchPlan, DataLossPolicy, parse_queue_partition
from sluice.connectors.planner import OffsetView
from sluice.connectors.planning import linger_s, ramped_budget
from sluice.connectors.positions import PartitionKey, Position
from sluice.connectors.record_tables import split_flagged
from sluice.connectors.records import RecordError, good_arrow_records
from sluice.connectors.rocketmq.client import MessageQueue
from sluice.connectors.rocketmq.offsets import consumer_group
from sluice.connectors.rocketmq.spark_source import RocketMQReader, plan_to_json
from sluice.connectors.sink_stages import Outcome, SinkStages, Staged, Unmet, envelope_prefixes_of
from sluice.connectors.stage_outcomes import Bad, Made
from sluice.connectors.transforms import arrow_head

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark.sql.datasource import InputPartition

    from sluice.connectors.api import SinkTask
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
    from sluice.connectors.transforms import Transform


#: The most messages a batch pulls on the driver to learn their envelope schemas or to look at the
#: converter settings (``SinkRunner._learn_on_driver``, ``_setting_notice``); a first batch is
#: 1,000 at most (planning.ramped_budget).
LEARN_ON_DRIVER_MAX = 5_000


def matching_topics(topics: list[str], pattern: str) -> list[str]:
    """Topics whose whole name matches ``pattern`` (Kafka's ``topics.regex`` semantics)."""
    compiled = re.compile(pattern)
    return sorted(t for t in topics if compiled.fullmatch(t))


def topics_now(client: SyncRocketMQClient, topics: Sequence[str], pattern: str) -> list[str]:
    """A sink's topics: ``topics``, or the broker's topics matching ``topics.regex`` now."""
    return matching_topics(client.all_topics(), pattern) if pattern else list(topics)


def pulled(options: Mapping[str, str]) -> list[pa.RecordBatch]:
    """The messages of a plan's ranges (the reader's ``options``), pulled in this process by the
    reader's own code."""
    reader = RocketMQReader(options)
    return [batch for part in reader.partitions() for batch in reader.read(part)]


def _read_share(
    reader: RocketMQReader, shares: Sequence[InputPartition], index: int
) -> Iterator[pa.RecordBatch]:
    """A Spark task's share of a sink batch, pulled by the reader's own code (``sink_job``)."""
    return reader.read(shares[index])


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
        #: what status shows for the task; None until a first batch was looked at (_setting_notice)
        self.notice: str | None = None
        #: new batches planned in this attempt: the first one is small (planning.ramped_budget)
        self.planned = 0

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
        return topics_now(self.ctx.rocketmq, self.topics, self.pattern)

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

    def _setting_notice(self, plan: BatchPlan) -> str | None:
        """What a batch's messages say about the converter settings, looked at once per task, in a
        small batch (None: not looked at yet).

        A json converter with schemas off (and no declared schema) writes envelope-carrying
        messages as JSON text: a valid config with a silently different result (a table with the
        records' coordinates and their JSON, not their fields). Kafka Connect would do the same
        without a word; Sluice says so once in status and in the worker log.
        """
        converter = self.setup.converter
        if not isinstance(converter, JsonConverter) or converter.schemas_enable or converter.value_schema:
            return ""
        if plan.record_span > LEARN_ON_DRIVER_MAX:
            return None
        messages = pa.Table.from_batches(self._pulled(plan))
        enveloped = pc.starts_with(messages.column("body").cast(pa.string(), safe=False), SCHEMA_KEY)
        hits = pc.indices_nonzero(pc.fill_null(enveloped, False))
        if not len(hits):
            return ""
        first = messages.slice(hits[0].as_py(), 1).to_pylist()[0]
        notice = (
            f"connector {self.connector}: value.converter.schemas.enable=false, but messages carry the "
            f"Connect envelope {{schema, payload}} (first at topic {first['topic']!r} offset "
            f"{first['queue_offset']}): they are written as JSON text, not as their fields; "
            "set value.converter.schemas.enable=true"
        )
        log.warning("%s", notice)
        return notice

    def run(self, plan: BatchPlan, rerun: bool) -> int:
        if self.notice is None:
            self.notice = self._setting_notice(plan)
        self._write_batch(plan)
        if not isinstance(self.task, TransactionalSink):
            self.ctx.store.commit(plan)
        self.setup.positions.committed_batch(plan)  # by the store or in the sink's transaction
        self._mirror_consumer_offsets(plan)
        return plan.record_span

    def _learn_on_driver(self, plan: BatchPlan) -> None:
        """Learn a small batch's envelope schemas from its messages pulled here, before its stages
        run (a larger batch's are learnt from what its stages find: ``Unmet``)."""
        converter = self.setup.converter
        if converter.discovers_envelopes and plan.record_span <= LEARN_ON_DRIVER_MAX:
            found = envelope_prefixes_of(
                self._pulled(plan), keys=converter.key_envelopes, tombstone=TOMBSTONE_PROPERTY
            )
            converter.seen_prefixes.remember(found)

    def _pulled(self, plan: BatchPlan) -> list[pa.RecordBatch]:
        """The plan's messages pulled here, by the reader's own code."""
        return pulled(self._read_options(plan))

    def _read_options(self, plan: BatchPlan) -> dict[str, str]:
        """The reader's options for ``plan``: a queue's range is never split between Spark tasks,
        so each share holds whole queues, and a key's records are in one (its queue's): a sink
        staging from the tasks (StagesOnExecutors) keeps each key's records in order."""
        return {
            "namesrv": self.ctx.settings.namesrv,
            "plan": plan_to_json(plan.ranges),
            "maxRecordsPerSplit": str(max(plan.record_span, 1)),
            "failOnDataLoss": str(self.setup.data_loss is DataLossPolicy.FAIL).lower(),
            "maxTasks": str(self.ctx.settings.batch_tasks),
        }

    @property
    def _sees_every_barrier_copy(self) -> bool:
        """A task that orders barriers sees every copy; others one of each (``once_per_barrier``)."""
        return isinstance(self.task, OrdersBarriers) and self.task.orders_barriers()

    def _stages(self) -> SinkStages:
        """The sink's stages for the envelope schemas met so far, with the chain's Arrow head
        (``_spark_tail`` runs the rest). A type the converter does not read fails the task, naming it."""
        try:
            return SinkStages.of(
                self.setup.converter, self.setup.chain, self.connector,
                barriers_once=not self._sees_every_barrier_copy, tolerates=self.tolerates,
            )  # fmt: skip
        except ValueError as exc:
            raise RecordError(f"connector {self.connector}: {exc}") from None

    @property
    def _spark_tail(self) -> list[Transform]:
        """The chain from its first Spark SQL transform on, which runs over a DataFrame of the
        stages' records (Spark by nature: bound at the end of the stages)."""
        chain = self.setup.chain
        return list(chain[len(arrow_head(chain)) :])

    def _write_batch(self, plan: BatchPlan, *, learn: bool = True) -> None:
        """Run the batch through the sink's stages (connectors.sink_stages), in this process when it
        is within the worker's ``local_batch_max_records``, else as one Spark job whose tasks run
        them on their shares (``spark_binding.sink_job``), and write it. A schema not met is learnt
        from what the stages found and the batch run again, once; a bad record fails the batch
        naming it, or under tolerance is dead-lettered."""
        converter = self.setup.converter
        topics = {r.topic for r in plan.ranges if not r.is_empty}
        if learn and not converter.knows_schemas(topics):
            self._learn_on_driver(plan)
        stages = self._stages()
        outcomes = self._outcomes(plan, stages, self._stager(plan))
        unmet = [o for o in outcomes if isinstance(o, Unmet)]
        if unmet and learn:
            log.info(
                "connector %s: batch %s carries an envelope schema not met before: learning it",
                self.connector, plan.batch_id,
            )  # fmt: skip
            for o in unmet:
                converter.seen_prefixes.remember(o.found)
            self._write_batch(plan, learn=False)
            return
        if unmet:  # never: what the stages found is what they match
            raise RecordError(
                f"connector {self.connector}: batch {plan.batch_id}: envelope schemas learnt not met"
            )
        bad = [o for o in outcomes if isinstance(o, Bad)]
        if bad:
            self.setup.meters.record_errors(1)  # the batch stops at the first bad record it meets
            raise RecordError(bad[0].message)
        self._wrote_outcomes(outcomes, stages, plan)

    def _stager(self, plan: BatchPlan) -> Callable[[pa.Table, int], object] | None:
        """Where a batch runs as a Spark job and the sink stages (connectors.api.StagesOnExecutors),
        what its tasks stage their records with."""
        if self._runs_here(plan) or self._spark_tail:
            return None
        return self.task.stager(plan) if isinstance(self.task, StagesOnExecutors) else None

    def _runs_here(self, plan: BatchPlan) -> bool:
        """Whether the batch's stages run in this process (the worker's ``local_batch_max_records``)."""
        return plan.record_span <= self.ctx.settings.local_batch_max_records

    def _outcomes(
        self, plan: BatchPlan, stages: SinkStages, stager: Callable[[pa.Table, int], object] | None
    ) -> list[Outcome | Staged]:
        """The stages' outcome of each share of the batch: one share, read here, for a batch within
        the worker's local bound; else one per Spark task of the batch's job."""
        reader = RocketMQReader(self._read_options(plan))
        shares = reader.partitions()
        if self._runs_here(plan):
            return [stages.run(batch for share in shares for batch in reader.read(share))]
        read_share = partial(_read_share, reader, tuple(shares))
        return sink_job(self.ctx.spark, len(shares), read_share, stages, stager)

    def _wrote_outcomes(self, outcomes: list[Outcome | Staged], stages: SinkStages, plan: BatchPlan) -> None:
        """Send the shares' dead letters, then write what the stages made: merge what the Spark
        tasks staged, or write the records (none: an empty batch, which commits its positions)."""
        task = self.task
        dead = [o.dead for o in outcomes if isinstance(o, Made | Staged) and o.dead is not None]
        if dead:
            send_dead_letters(pa.concat_tables(dead), self.setup)
        staged = [o.share for o in outcomes if isinstance(o, Staged)]
        if staged and isinstance(task, StagesOnExecutors):
            try:
                task.write_staged(staged, plan)
                return
            except StagedRowsRefused as exc:  # the records again, here, where the write names them
                log.info("connector %s: %s; writing the batch from the worker", self.connector, exc)
                outcomes = self._outcomes(plan, stages, None)
        made = [o.records for o in outcomes if isinstance(o, Made) and o.records is not None]
        records = pa.concat_tables(made, promote_options="default") if made else empty_records()
        if self._spark_tail and records.num_rows:
            records = batch_table(chain_frame(self._spark_tail, table_frame(self.ctx.spark, records)))
            where = f"connector {self.connector}"
            records = (
                self._without_flagged(records, plan) if self.tolerates else good_arrow_records(records, where)
            )
        if isinstance(task, WritesFrames):
            task.write_frame(table_frame(self.ctx.spark, records), plan)
        else:
            self._write_table(records, plan)

    @property
    def tolerates(self) -> bool:
        return self.config.get("errors.tolerance") == "all"

    def _write_table(self, table: pa.Table, plan: BatchPlan) -> None:
        """Check a batch's records and write them; refused records are the messages they were
        read from, pulled again, for the dead-letter topic (activities.dead_letters.write_rounds)."""
        records = good_arrow_records(table, f"connector {self.connector}")
        write_rounds(self.task, records, plan, self.setup, partial(self._dead_letters_of, plan))

    def _without_flagged(self, records: pa.Table, plan: BatchPlan) -> pa.Table:
        """``records`` without those flagged after the stages (by the chain's Spark tail), which go
        to the dead-letter topic."""
        good, bad = split_flagged(records)
        if bad.num_rows:
            send_dead_letters(self._dead_letters_of(plan, bad), self.setup)
        return good

    def _dead_letters_of(self, plan: BatchPlan, bad: pa.Table) -> pa.Table:
        """Dead letters of ``bad`` records (partition, offset, error): the messages they were read
        from, pulled again (records are refused or flagged past the stages rarely)."""
        return dead_letters(pa.Table.from_batches(self._pulled(plan)), bad, self.connector)

    def _mirror_consumer_offsets(self, plan: BatchPlan) -> None:
        for r in plan.ranges:
            broker, queue_id = parse_queue_partition(r.partition)
            try:
                self.ctx.rocketmq.update_consumer_offset(
                    self.group, MessageQueue(r.topic, broker, queue_id), r.end.offset
                )
            except Exception:  # a dashboard hint only; the offset store is the truth
                log.warning("could not mirror consumer offset of %s/%s", r.topic, r.partition, exc_info=True)
