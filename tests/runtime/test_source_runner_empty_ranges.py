"""The source runner and ``KnowsEmptyRanges`` (real Spark, RocketMQ and offset store): a range the
task says holds no records is never read and costs no job, yet its position is committed with the
batch (or it would be planned again forever); the other ranges are sent as usual."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from sluice.activities.context import RuntimeContext
from sluice.activities.runner import TaskSetup
from sluice.activities.source_runner import SourceRunner
from sluice.connectors.api import open_source_task
from sluice.connectors.converters import converter_for
from sluice.connectors.dummy import DummySourceConnector
from sluice.connectors.dummy.source import DummySourceTask
from sluice.connectors.model import PartitionRange
from sluice.connectors.positions import PartitionKey, Position
from sluice.deploy.local.config import StackConfig
from sluice.worker.settings import settings


class QuietPartitionSource(DummySourceTask):
    """The dummy source, saying its partition ``dummy-1`` holds nothing (and noting every read)."""

    def __init__(self, config: Any, task_id: int) -> None:
        super().__init__(config, task_id)
        self.reads: list[list[str]] = []

    def holds_records(self, r: PartitionRange) -> bool:
        return r.partition != "dummy-1"

    def read(self, ranges: Sequence[PartitionRange]) -> Any:
        self.reads.append([r.partition for r in ranges])
        return super().read(ranges)


class QuietPartitionConnector(DummySourceConnector):
    task_class = QuietPartitionSource


def test_a_range_known_empty_is_not_read_but_committed(
    stack_config: StackConfig, fresh_schema: str, topic_name: str
) -> None:
    runtime = dataclasses.replace(
        settings().runtime, database_url=stack_config.database_url, store_schema=fresh_schema
    )
    ctx = RuntimeContext(runtime)
    raw = {
        "connector.class": "dummy-source",
        "name": "quiet",
        "topic": topic_name,
        "partitions": "2",
        "records.per.partition": "5",
        "batch.max.records": "100",
    }
    config = QuietPartitionConnector().parse(raw)
    task = open_source_task(QuietPartitionConnector, raw, 0)
    runner = SourceRunner(TaskSetup(ctx, "quiet", config, converter_for(config)), task)
    try:
        runner.ensure_topic()
        plan, rerun = runner.next_plan()
        assert plan is not None and {r.partition for r in plan.ranges} == {"dummy-0", "dummy-1"}
        assert runner.run(plan, rerun) == 5
        assert isinstance(task, QuietPartitionSource) and task.reads == [["dummy-0"]]
        committed = ctx.store.committed_positions("quiet")
        assert committed == {PartitionKey(f"dummy-{p}"): Position((5,)) for p in (0, 1)}
        client = ctx.rocketmq
        sent = [
            m.body.decode()
            for mq in client.queues(topic_name)
            for m in client.pull_range(mq, 0, client.max_offset(mq))
        ]
        assert sorted(sent) == [f"value-0-{i}" for i in range(5)]
        assert runner.next_plan() == (None, False)  # nothing planned again for the quiet partition
    finally:
        runner.close()
        ctx.close()
