"""One sink task's micro-batches: plan queue ranges, record, read exactly them, convert, write, commit.

Positions are per (topic, queue) and stored under "<topic>/<broker>:<queue>". The sink's own
``prepare`` state is recorded with the plan, so a re-run after a crash can undo a partial write;
a sink that commits positions in its own transaction (PostgreSQL) sets ``commits_positions``.
Consumer-group offsets are mirrored to the broker (group ``sluice-<connector>``) so RocketMQ's own
tools show the lag; the store stays the truth.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from activities.bad_records import checked_records
from activities.runner import TaskSetup
from connectors.model import BatchPlan, DataLossPolicy, PartitionRange
from connectors.planning import admit

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from connectors.api import SinkTask
    from connectors.rocketmq.client import MessageQueue


def assigned(queues: list[MessageQueue], task_id: int, task_count: int) -> list[MessageQueue]:
    """Queues of all topics split round-robin over the tasks, in a stable order."""
    ordered = sorted(queues, key=lambda q: (q.topic, q.broker_name, q.queue_id))
    return [q for i, q in enumerate(ordered) if i % task_count == task_id]


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

    def _queues(self) -> dict[str, MessageQueue]:
        client = self.ctx.rocketmq
        every = [q for topic in self.topics for q in client.queues(topic)]
        return {f"{q.topic}/{q.key}": q for q in assigned(every, self.task.task_id, self.task_count)}

    def next_plan(self) -> tuple[BatchPlan | None, bool]:
        store = self.ctx.store
        pending = store.pending_plan(self.connector, self.task.task_id)
        if pending is not None:
            return pending, True
        client = self.ctx.rocketmq
        queues = self._queues()
        committed_all = store.committed_positions(self.connector)
        earliest = {k: client.min_offset(q) for k, q in queues.items()}
        latest = {k: client.max_offset(q) for k, q in queues.items()}
        committed = {k: committed_all.get(k, earliest[k]) for k in queues}
        for k, start in committed.items():
            if start < earliest[k] or start > latest[k]:
                from connectors.rocketmq.offsets import check_data_loss

                q = queues[k]
                probe = PartitionRange(q.key, start, max(start, latest[k]), topic=q.topic)
                check_data_loss([probe], {q.key: earliest[k]}, self.setup.data_loss, topic=q.topic)
                committed[k] = max(earliest[k], min(start, latest[k]))
        ends = admit(committed, latest, int(self.config["batch.max.records"]))
        ranges = tuple(
            PartitionRange(queues[k].key, committed[k], end, topic=queues[k].topic)
            for k, end in sorted(ends.items())
            if end > committed[k]
        )
        if not ranges:
            return None, False
        batch_id = store.last_batch_id(self.connector, self.task.task_id) + 1
        plan = BatchPlan(self.connector, self.task.task_id, batch_id, ranges)
        plan = replace(plan, sink_state=self.task.prepare(plan))
        return store.record_plan(plan), False

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
        if not getattr(self.task, "commits_positions", False):
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
                    self.group, MessageQueue(r.topic, broker, queue_id), r.end
                )
            except Exception:  # a dashboard hint only; the offset store is the truth
                log.warning("could not mirror consumer offset of %s/%s", r.topic, r.partition, exc_info=True)
