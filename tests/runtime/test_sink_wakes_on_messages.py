"""An idle sink waits on its queues, not on a clock (activities.runner.WaitsForRecords): its wait
ends when a message is stored past what it committed, as a Kafka consumer's poll returns when
records arrive, and runs out with nothing sent. Against the real broker and offset store."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.activities.context import RuntimeContext
from sluice.activities.runner import TaskSetup, WaitsForRecords
from sluice.activities.sink_runner import SinkRunner
from sluice.connectors.api import open_sink_task
from sluice.connectors.converters import converter_for
from sluice.connectors.file.sink import FileSinkConnector
from sluice.connectors.rocketmq.values import OutgoingMessage
from sluice.connectors.transforms import build_chain
from sluice.deploy.local.config import StackConfig
from sluice.worker.settings import settings


@pytest.fixture
def ctx(stack_config: StackConfig, fresh_schema: str) -> Iterator[RuntimeContext]:
    runtime = dataclasses.replace(
        settings().runtime,
        database_url=stack_config.database_url,
        store_schema=fresh_schema,
        namesrv=stack_config.namesrv_address,
    )
    context = RuntimeContext(runtime)
    context.store.migrate()
    yield context
    context.close()


def test_an_idle_sinks_wait_ends_when_a_message_arrives(
    ctx: RuntimeContext, topic_name: str, tmp_path: Path
) -> None:
    config = {"name": "wakes", "connector.class": "file-sink", "file": str(tmp_path / "out.txt"),
              "topics": topic_name, "poll.interval.ms": "30000"}  # fmt: skip
    parsed = FileSinkConnector().parse(config)
    setup = TaskSetup(ctx, "wakes", parsed, converter_for(parsed), build_chain(parsed))
    runner = SinkRunner(setup, open_sink_task(FileSinkConnector, config, 0), 1)
    assert isinstance(runner, WaitsForRecords)
    runner.ensure_topic()
    assert runner.next_plan() == (None, False)  # nothing sent yet: an empty poll
    assert not runner.wait_for_records(1.0), "nothing was sent: the wait runs out"

    queue = sorted(ctx.rocketmq.queues(topic_name), key=lambda q: q.queue_id)[2]
    sender = threading.Timer(1.0, ctx.rocketmq.send_batch, (queue, [OutgoingMessage(b"hello")]))
    sender.start()
    try:
        assert runner.wait_for_records(60.0), "the message sent during the wait ends it"
    finally:
        sender.join()
    plan, rerun = runner.next_plan()
    assert plan is not None and not rerun
    assert [(r.partition, r.start.offset, r.end.offset) for r in plan.ranges if not r.is_empty] == [
        (queue.key, 0, 1)
    ]
