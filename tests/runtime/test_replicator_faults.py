"""The Replicator through faults (connectors.replicator), checked by content per queue: each of the
two clusters' brokers restarted in the middle of a copy loses and doubles nothing; a source topic
deleted and recreated is named as data loss and, under ``data.loss=skip``, copied on from where the
new topic stands; a message whose copy is over the target's size limit fails the task naming its
queue and offset, or is dead-lettered under ``errors.tolerance=all`` while the rest is copied.
"""

from __future__ import annotations

import re
import uuid

import pytest

from sluice.connectors.dead_letter_messages import MAX_DEAD_LETTER_BODY
from sluice.connectors.rocketmq.codec import encode_batch_entries, stored_size
from sluice.connectors.rocketmq.limits import MAX_MESSAGE_BYTES
from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.connectors.rocketmq.values import OutgoingMessage
from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.rocketmq import CLUSTER_NAME
from sluice.deploy.local.stack import restart_service
from sluice.workflows.types import TaskState
from tests.runtime.helpers import wait_for
from tests.runtime.replication import content, expected_copies, queue, replicator, send, total_of

pytestmark = [pytest.mark.fault, pytest.mark.timeout(600)]


async def test_broker_restarts_on_either_cluster_lose_and_double_nothing(
    start_worker, sluice, stack_config: StackConfig, rocketmq_admin: SyncRocketMQClient,
    replica_admin: SyncRocketMQClient,
) -> None:  # fmt: skip
    topic = f"RB_{uuid.uuid4().hex[:10]}"
    rocketmq_admin.create_topic(topic, queue_count=4, cluster=CLUSTER_NAME)
    send(rocketmq_admin, topic, 4, 0, 600)
    start_worker()
    name = f"replicator-{uuid.uuid4().hex[:8]}"
    # a slow copy (300 messages/s) so that each restart lands in the middle of it
    await sluice.create(name, replicator(stack_config, f"{topic},*", **{"sync.tps": "300"}))
    await wait_for(lambda: total_of(replica_admin, topic) >= 300, 180, "the first copies")
    restart_service(stack_config, "broker")  # the source cluster: pulls fail until it is back
    send(rocketmq_admin, topic, 4, 600, 300)
    await wait_for(lambda: total_of(replica_admin, topic) >= 2600, 240, "copies after the source came back")
    assert total_of(replica_admin, topic) < 3600  # the target's restart, too, lands mid-copy
    restart_service(stack_config, "replica-broker")  # the target cluster: sends fail, or go unanswered
    send(rocketmq_admin, topic, 4, 900, 300)
    expected = expected_copies(rocketmq_admin, topic, 4, ("a", "b", "skip"))
    total = sum(len(v) for v in expected.values())
    await wait_for(lambda: total_of(replica_admin, topic) >= total, 300, "every copy")
    for q in range(4):
        assert content(queue(replica_admin, topic, q)) == content(expected[q])  # once, in order
    assert total_of(replica_admin, topic) == total == 4 * 1200
    status = await sluice.status(name)
    assert all(t.state == TaskState.RUNNING for t in status.tasks), status
    await sluice.delete(name)


async def test_a_recreated_source_topic_is_named_as_data_loss_and_skip_copies_on(
    start_worker, sluice, stack_config: StackConfig, rocketmq_admin: SyncRocketMQClient,
    replica_admin: SyncRocketMQClient,
) -> None:  # fmt: skip
    topic = f"RD_{uuid.uuid4().hex[:10]}"
    rocketmq_admin.create_topic(topic, queue_count=2, cluster=CLUSTER_NAME)
    send(rocketmq_admin, topic, 2, 0, 90)
    start_worker()
    name = f"replicator-{uuid.uuid4().hex[:8]}"
    await sluice.create(name, replicator(stack_config, f"{topic},*"))
    await wait_for(lambda: total_of(replica_admin, topic) >= 180, 180, "the old topic copied")
    # read once every message is copied (so dispatched: a queue's end lags the send a moment)
    before = expected_copies(rocketmq_admin, topic, 2, ("a", "b", "skip"))
    assert sum(len(v) for v in before.values()) == 180
    rocketmq_admin.delete_topic(topic)
    rocketmq_admin.create_topic(topic, queue_count=2, cluster=CLUSTER_NAME)
    send(rocketmq_admin, topic, 2, 1000, 30)  # the new topic's offsets start again at 0

    async def failed() -> str:
        status = await sluice.status(name)
        return next((t.error for t in status.tasks if t.state == TaskState.FAILED and t.error), "")

    await wait_for(failed, 120, "the task to fail on the recreated topic")
    error = await failed()
    # where the new queue ended when the task looked: 30, or 0 when it looked before the broker had
    # dispatched the new sends to the queue (both are the recreated topic, not the old one's 90)
    assert "data loss" in error and topic in error and re.search(r"now ends at (0|30) ", error), error
    assert total_of(replica_admin, topic) == 180  # nothing of the new topic at the old offsets

    # data.loss=skip: the copy goes on from where each new queue stands when the task sees it
    await sluice.reconfigure(name, {**await sluice.config(name), "data.loss": "skip"})

    async def moved_on() -> bool:  # each queue's position moved to where the new topic ends
        offsets = await sluice.offsets(name)
        return [o["offset"]["position"]["key"] for o in offsets] == [[30], [30]]

    await wait_for(moved_on, 120, "the positions moved to the new topic's ends")
    assert all(t.state == TaskState.RUNNING for t in (await sluice.status(name)).tasks)
    send(rocketmq_admin, topic, 2, 2000, 40)
    await wait_for(lambda: total_of(replica_admin, topic) >= 260, 120, "the new topic's later messages")
    for q in range(2):
        later = [m for m in queue(rocketmq_admin, topic, q) if int(m.properties["n"]) >= 2000]
        assert content(queue(replica_admin, topic, q)) == content(before[q] + later)
    await sluice.delete(name)


def _just_under_the_limit(topic: str) -> OutgoingMessage:
    """A message the source cluster stores whose copy, with the Replicator's properties, is over
    the target's limit (both brokers keep RocketMQ's default maxMessageSize)."""
    probe = OutgoingMessage(b"", keys="big", tags="a", properties={"n": "0", "color": "red"})
    (entry,) = encode_batch_entries([probe], ["0" * 32], topic)
    body = bytes(range(256)) * ((MAX_MESSAGE_BYTES - stored_size(len(entry), topic) - 8) // 256)
    return OutgoingMessage(body, keys="big", tags="a", properties={"n": "0", "color": "red"})


@pytest.mark.parametrize("tolerance", ["none", "all"])
async def test_a_copy_over_the_target_limit_fails_naming_it_or_is_dead_lettered(
    tolerance: str, start_worker, sluice, stack_config: StackConfig, rocketmq_admin: SyncRocketMQClient,
    replica_admin: SyncRocketMQClient,
) -> None:  # fmt: skip
    topic, dead = f"RS_{uuid.uuid4().hex[:10]}", f"DLQ_{uuid.uuid4().hex[:10]}"
    rocketmq_admin.create_topic(topic, queue_count=1, cluster=CLUSTER_NAME)
    (mq,) = rocketmq_admin.queues(topic)
    send(rocketmq_admin, topic, 1, 1, 20)
    big = rocketmq_admin.send_batch(mq, [_just_under_the_limit(topic)]).offsets[0]
    send(rocketmq_admin, topic, 1, 21, 20)
    start_worker()
    name = f"replicator-{uuid.uuid4().hex[:8]}"
    errors = {"errors.tolerance": tolerance}
    if tolerance == "all":
        rocketmq_admin.create_topic(dead, queue_count=1, cluster=CLUSTER_NAME)
        errors["errors.deadletterqueue.topic.name"] = dead
    await sluice.create(name, replicator(stack_config, f"{topic},*", **errors))
    messages = queue(rocketmq_admin, topic, 0)
    if tolerance == "none":

        async def failed() -> str:
            status = await sluice.status(name)
            return next((t.error for t in status.tasks if t.state == TaskState.FAILED and t.error), "")

        await wait_for(failed, 180, "the task to fail on the oversized copy")
        error = await failed()
        assert f"{topic}/broker-a:0" in error and f"offset {big}" in error, error
        assert "over RocketMQ's maximum message size" in error, error
        # nothing of the batch that held it was copied: its earlier records wait for the fix
        assert total_of(replica_admin, topic) <= big
    else:
        await wait_for(lambda: total_of(replica_admin, topic) >= 40, 180, "every other message copied")
        assert content(queue(replica_admin, topic, 0)) == content(messages[:big] + messages[big + 1 :])
        (letter,) = queue(rocketmq_admin, dead, 0)
        # the record as far as a dead letter holds it, and where the whole of it still is
        assert letter.body == messages[big].body[:MAX_DEAD_LETTER_BODY]
        assert letter.properties["sluice.original.size"] == str(len(messages[big].body))
        assert letter.properties["sluice.truncated"] == "true"
        assert letter.properties["sluice.origin.partition"] == f"{topic}/broker-a:0"
        assert letter.properties["sluice.origin.offset"] == str(big)
    await sluice.delete(name)
