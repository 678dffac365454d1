"""A task that takes longer to open than its heartbeat timeout (a slow database or log to connect
to) runs once: its attempt beats from its start, so Temporal never runs a second attempt beside it,
and its topic holds every record exactly once."""

from __future__ import annotations

import asyncio
import uuid

from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.workflows.types import ConnectorState, TaskState
from tests.runtime.helpers import wait_for


def _sent(client: SyncRocketMQClient, topic: str) -> list[str]:
    return sorted(
        m.body.decode()
        for mq in client.queues(topic)
        for m in client.pull_range(mq, 0, client.max_offset(mq))
    )


async def test_a_task_slower_to_open_than_its_heartbeat_timeout_runs_once(
    start_worker, sluice, topic_name: str, rocketmq_admin: SyncRocketMQClient
) -> None:
    start_worker()
    name = f"slow-open-{uuid.uuid4().hex[:8]}"
    config = {"connector.class": "dummy-source", "topic": topic_name, "records.per.partition": "30",
              "open.slow.ms": "6000", "task.heartbeat.timeout.s": "2", "poll.interval.ms": "200"}  # fmt: skip
    await sluice.create(name, config)
    await wait_for(lambda: len(_sent(rocketmq_admin, topic_name)) >= 30, 120, "the records in the topic")
    await asyncio.sleep(8)  # a second attempt, had one started beside the first, sends its copy by then
    assert _sent(rocketmq_admin, topic_name) == sorted(f"value-0-{i}" for i in range(30))
    status = await sluice.status(name)
    assert status.state == ConnectorState.RUNNING
    assert [(t.state, t.attempts, t.error, t.last_error) for t in status.tasks] == [
        (TaskState.RUNNING, 1, "", "")
    ]
    await sluice.delete(name)
