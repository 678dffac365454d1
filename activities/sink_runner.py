"""One sink task's micro-batches: plan queue ranges, record, read exactly them, convert, write, commit.

Positions are per (topic, queue) (``PartitionKey(queue, topic)``). The sink's own ``prepare`` state
is recorded with the plan, so a re-run after a crash can undo a partial write; a
``TransactionalSink`` (PostgreSQL) commits positions in its own data transaction instead of the
runtime.
Consumer-group offsets are mirrored to the broker (group ``sluice-<connector>``) so RocketMQ's own
tools show the lag; the store stays the truth.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from activities.bad_records import checked_records
from activities.runner import TaskSetup, next_plan
from connectors.api import TransactionalSink
from connectors.model import BatchPlan, DataLossPolicy
from connectors.planner import OffsetView
from connectors.positions import PartitionKey, Position

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from connectors.api import SinkTask
    from connectors.rocketmq.client import MessageQueue
    from connectors.rocketmq.sync_client import SyncRocketMQClient


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
    def __init__(self, setup: TaskSetup, task: SinkTask, task_count: int) -> None:
        self.setup = setup
        self.ctx = setup.ctx
        self.connector = setup.connector
        self.config = setup.config
        self.task = task
        self.task_count = task_count
        self.topics: list[str] = list(setup.config["topics"])
        self.group = f"sluice-{setup.connector}"

    def ensure_topic(self) -> None:
        client = self.ctx.rocketmq
        for topic in self.topics:
            if not client.topic_exists(topic):
                client.create_topic(topic, queue_count=int(self.config.get("topic.queues", 4)))

    def next_plan(self) -> tuple[BatchPlan | None, bool]:
        view = QueueView(self.ctx.rocketmq, self.topics, self.task.task_id, self.task_count)
        plan, rerun = next_plan(self.setup, self.task.task_id, view, int(self.config["batch.max.records"]))
        if plan is None or rerun:
            return plan, rerun
        plan = replace(plan, sink_state=self.task.prepare(plan))
        return self.ctx.store.record_plan(plan), False

    def close(self) -> None:
        self.task.close()

    def waiting_for(self) -> str:
        return ""

    def run(self, plan: BatchPlan, rerun: bool) -> int:
        from connectors.rocketmq.spark_source import plan_to_json, register
        from connectors.transforms import apply_chain

        spark = self.ctx.spark
        register(spark)
        messages = (
            spark.read.format("rocketmq")
            .option("namesrv", self.ctx.settings.namesrv)
            .option("plan", plan_to_json(plan.ranges))
            .option("failOnDataLoss", str(self.setup.data_loss is DataLossPolicy.FAIL).lower())
            .load()
        )
        records = apply_chain(self.setup.chain, self.setup.converter.to_records(messages))
        with checked_records(records, self.setup, originals=messages) as good:
            self.task.write(spark, good, plan)
        if not isinstance(self.task, TransactionalSink):
            self.ctx.store.commit(plan)
        self._mirror_consumer_offsets(plan)
        return plan.record_span

    def _mirror_consumer_offsets(self, plan: BatchPlan) -> None:
        from connectors.model import parse_queue_partition
        from connectors.rocketmq.client import MessageQueue

        for r in plan.ranges:
            broker, queue_id = parse_queue_partition(r.partition)
            try:
                self.ctx.rocketmq.update_consumer_offset(
                    self.group, MessageQueue(r.topic, broker, queue_id), r.end.offset
                )
            except Exception:  # a dashboard hint only; the offset store is the truth
                log.warning("could not mirror consumer offset of %s/%s", r.topic, r.partition, exc_info=True)
