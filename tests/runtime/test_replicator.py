"""RocketMQ at both ends (connectors.replicator): the local stack's cluster copied into its second
cluster with RocketMQ Connect's Replicator configs, checked by content per queue: every copied
message once, in its queue's order, with its body, keys, tag and properties, through a worker
SIGKILL; and a consumer group moved to the target cluster after a checkpoint resumes exactly where
it stopped on the source.
"""

from __future__ import annotations

import uuid

import pytest

from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.connectors.rocketmq.values import MessageQueue
from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.rocketmq import CLUSTER_NAME
from tests.runtime.helpers import FAST_HEARTBEAT, wait_for
from tests.runtime.replication import clusters, content, expected_copies, queue, replicator, send, total_of


@pytest.mark.fault
@pytest.mark.private_worker  # SIGKILLs its worker
@pytest.mark.timeout(600)
async def test_a_replicator_copies_each_queue_exactly_once_in_order_through_a_worker_kill(
    start_worker, sluice, stack_config: StackConfig, rocketmq_admin: SyncRocketMQClient,
    replica_admin: SyncRocketMQClient,
) -> None:  # fmt: skip
    topic = f"R_{uuid.uuid4().hex[:10]}"
    rocketmq_admin.create_topic(topic, queue_count=4, cluster=CLUSTER_NAME)
    send(rocketmq_admin, topic, 4, 0, 600)
    name = f"replicator-{uuid.uuid4().hex[:8]}"
    first = start_worker()
    await sluice.create(name, replicator(stack_config, f"{topic},a||b", **{"max.tasks": "2"}))

    def copies() -> int:
        return total_of(replica_admin, topic)

    await wait_for(lambda: copies() >= 300, 180, "the first copies in the target cluster")
    first.kill()  # SIGKILL mid-run: a batch in flight is abandoned half-way
    start_worker()
    send(rocketmq_admin, topic, 4, 600, 150)
    expected = expected_copies(rocketmq_admin, topic, 4, ("a", "b"))
    total = sum(len(v) for v in expected.values())
    await wait_for(lambda: copies() >= total, 300, "every copy in the target cluster")

    assert len(replica_admin.queues(topic)) == 4  # created with the source's queue count
    for q in range(4):
        copied = queue(replica_admin, topic, q)
        assert content(copied) == content(expected[q])  # queue i to queue i, in order, once
        # the Replicator's properties, as RocketMQ Connect's copies carry them
        ext = [{k.removeprefix("connect-ext-"): v for k, v in m.properties.items()} for m in copied]
        assert [e["EXTEND_UNIQ_INFO"] for e in ext] == [m.msg_id for m in expected[q]]
        assert {e["REPLICATOR-source-topic"] for e in ext} == {topic}
        assert {e["REPLICATOR-BORN-SOURCE"] for e in ext} == {f"local_{CLUSTER_NAME}_here,"}
    assert copies() == total  # nothing more arrives: no message doubled
    queues = {f"{topic}/broker-a:{q}" for q in range(4)}

    async def lag_shown() -> bool:  # each source queue's lag, in messages and seconds, in status
        status = await sluice.status(name)
        shown = {p for t in status.tasks if t.metrics for p in t.metrics.lag_seconds}
        return shown == queues

    await wait_for(lag_shown, 60, "every source queue's lag in the connector's status")
    status = await sluice.status(name)
    assert status.kind == "source" and not [t for t in status.tasks if t.error]
    assert all(s >= 0 for t in status.tasks if t.metrics for s in t.metrics.lag_seconds.values())
    await sluice.delete(name)


@pytest.mark.timeout(600)
async def test_a_group_moved_to_the_target_after_a_checkpoint_resumes_where_it_stopped(
    start_worker, sluice, stack_config: StackConfig, rocketmq_admin: SyncRocketMQClient,
    replica_admin: SyncRocketMQClient,
) -> None:  # fmt: skip
    topic, group = f"C_{uuid.uuid4().hex[:10]}", f"G_{uuid.uuid4().hex[:8]}"
    rocketmq_admin.create_topic(topic, queue_count=2, cluster=CLUSTER_NAME)
    send(rocketmq_admin, topic, 2, 0, 240)
    start_worker()
    name = f"replicator-{uuid.uuid4().hex[:8]}"
    await sluice.create(name, replicator(stack_config, f"{topic},a||b"))
    # the group consumed part of each queue on the source cluster (it copies only tags a and b)
    consumed = {0: 37, 1: 200}
    for q, offset in consumed.items():
        rocketmq_admin.update_consumer_offset(group, MessageQueue(topic, "broker-a", q), offset)
    checkpoint = {
        "connector.class": "org.apache.rocketmq.replicator.ReplicatorCheckpointConnector",
        **clusters(stack_config),
        "src.topictags": f"{topic},a||b",
        "sync.gids": group,
        "checkpoint.interval.ms": "500",
        "sync.group.offsets.enabled": "true",
        "poll.interval.ms": "200",
        **FAST_HEARTBEAT,
    }
    await sluice.create(f"{name}-checkpoint", checkpoint)
    total = sum(len(v) for v in expected_copies(rocketmq_admin, topic, 2, ("a", "b")).values())

    def target_offsets() -> dict[int, int | None]:
        return {
            q: replica_admin.query_consumer_offset(group, MessageQueue(topic, "broker-r", q)) for q in (0, 1)
        }

    # What the group has left to consume, per queue, on the source cluster (tags a and b only).
    left = {
        q: content([m for m in queue(rocketmq_admin, topic, q, c) if m.tags in ("a", "b")])
        for q, c in consumed.items()
    }

    def exact() -> bool:
        """Every copy landed and each translated offset leaves exactly ``left`` to consume. A
        checkpoint taken while a queue's copies were still landing translates to that queue's end
        then (the group would see again what it consumed since, never skip one); a later one
        moves it forward to the exact offset. A skip is never moved back, so it fails here."""
        if total_of(replica_admin, topic) < total:
            return False
        offsets = target_offsets()
        if None in offsets.values():
            return False
        return all(content(queue(replica_admin, topic, q, o or 0)) == left[q] for q, o in offsets.items())

    await wait_for(exact, 240, "every copy, and the group's offsets in the target cluster translated exactly")
    await sluice.delete(f"{name}-checkpoint")
    await sluice.delete(name)


@pytest.mark.timeout(300)
async def test_heartbeats_copied_by_a_replicator_show_the_lag_end_to_end(
    start_worker, sluice, stack_config: StackConfig, replica_admin: SyncRocketMQClient
) -> None:
    beats = f"HB_{uuid.uuid4().hex[:10]}"
    start_worker()
    name = f"heartbeat-{uuid.uuid4().hex[:8]}"
    await sluice.create(name, {
        "connector.class": "org.apache.rocketmq.replicator.ReplicatorHeartbeatConnector",
        **clusters(stack_config), "heartbeat.topic": beats, "heartbeat.interval.ms": "300",
        "poll.interval.ms": "100", **FAST_HEARTBEAT,
    })  # fmt: skip
    await sluice.create(
        f"{name}-copy", replicator(stack_config, beats, **{"consumefromwhere": "CONSUME_FROM_FIRST_OFFSET"})
    )

    async def lag_shown() -> bool:
        status = await sluice.status(name)
        return any(t.metrics and "end-to-end" in t.metrics.lag_seconds for t in status.tasks)

    await wait_for(
        lambda: total_of(replica_admin, beats) >= 3,
        120,
        "copied heartbeats",
    )
    await wait_for(lag_shown, 60, "the heartbeat's end-to-end lag in status")
    copy = next(m for q in range(4) for m in queue(replica_admin, beats, q))
    assert copy.body == b"ping" and copy.properties["heartbeatStartAt"].isdigit()
    status = await sluice.status(name)
    (lag,) = [
        t.metrics.lag_seconds["end-to-end"] for t in status.tasks if t.metrics and t.metrics.lag_seconds
    ]
    assert 0 <= lag < 30
    await sluice.delete(f"{name}-copy")
    await sluice.delete(name)
