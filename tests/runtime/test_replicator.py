"""RocketMQ at both ends (connectors.replicator): the local stack's cluster copied into its second
cluster with RocketMQ Connect's Replicator configs, checked by content per queue: every copied
message once, in its queue's order, with its body, keys, tag and properties, through a worker
SIGKILL; and a consumer group moved to the target cluster after a checkpoint resumes exactly where
it stopped on the source.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.connectors.rocketmq.values import MessageQueue, OutgoingMessage
from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.rocketmq import CLUSTER_NAME, REPLICA_CLUSTER_NAME
from tests.runtime.helpers import FAST_HEARTBEAT, wait_for

TAGS = ("a", "b", "skip")


@pytest.fixture(scope="module")
def replica_admin(stack_config: StackConfig) -> Iterator[SyncRocketMQClient]:
    with SyncRocketMQClient(stack_config.replica_namesrv_address) as client:
        yield client


def _clusters(stack_config: StackConfig) -> dict[str, str]:
    return {
        "src.endpoint": stack_config.namesrv_address, "src.cluster": CLUSTER_NAME,
        "src.cloud": "local", "src.region": "here",
        "dest.endpoint": stack_config.replica_namesrv_address, "dest.cluster": REPLICA_CLUSTER_NAME,
        "dest.cloud": "local", "dest.region": "there", "src.acl.enable": "false", "dest.acl.enable": "false",
    }  # fmt: skip


def _replicator(stack_config: StackConfig, topictags: str, **extra: str) -> dict[str, str]:
    """As a RocketMQ Connect user writes it (apache/rocketmq-connect's replicator README keys)."""
    return {
        "connector.class": "org.apache.rocketmq.replicator.ReplicatorSourceConnector",
        **_clusters(stack_config),
        "src.topictags": topictags,
        "consumefromwhere": "CONSUME_FROM_FIRST_OFFSET",
        "sync.tps": "100000",
        "batch.max.records": "300",
        "poll.interval.ms": "200",
        **FAST_HEARTBEAT,
        **extra,
    }


def _send(client: SyncRocketMQClient, topic: str, queues: int, start: int, count: int) -> None:
    """``count`` messages to each queue: keys, a tag of TAGS in turn, properties, a binary body."""
    for q in range(queues):
        mq = next(m for m in client.queues(topic) if m.queue_id == q)
        batch = [
            OutgoingMessage(
                bytes([q, i % 256]) + f"body-{q}-{i}".encode(),
                keys=f"k{i % 7}",
                tags=TAGS[i % 3],
                properties={"n": str(i), "color": ("red", "blue")[i % 2]},
            )
            for i in range(start, start + count)
        ]
        for lo in range(0, len(batch), 100):
            client.send_batch(mq, batch[lo : lo + 100])


def _queue(client: SyncRocketMQClient, topic: str, queue: int, start: int = 0) -> list[Any]:
    mq = next(m for m in client.queues(topic) if m.queue_id == queue)
    return client.pull_range(mq, start, client.max_offset(mq), max_per_request=512)


def _content(messages: list[Any]) -> list[tuple[object, ...]]:
    return [(m.body, m.keys, m.tags, m.properties.get("n"), m.properties.get("color")) for m in messages]


def _copied(
    source: SyncRocketMQClient, topic: str, queues: int, tags: tuple[str, ...]
) -> dict[int, list[Any]]:
    return {q: [m for m in _queue(source, topic, q) if m.tags in tags] for q in range(queues)}


@pytest.mark.fault
@pytest.mark.private_worker  # SIGKILLs its worker
@pytest.mark.timeout(600)
async def test_a_replicator_copies_each_queue_exactly_once_in_order_through_a_worker_kill(
    start_worker, sluice, stack_config: StackConfig, rocketmq_admin: SyncRocketMQClient,
    replica_admin: SyncRocketMQClient,
) -> None:  # fmt: skip
    topic = f"R_{uuid.uuid4().hex[:10]}"
    rocketmq_admin.create_topic(topic, queue_count=4, cluster=CLUSTER_NAME)
    _send(rocketmq_admin, topic, 4, 0, 600)
    name = f"replicator-{uuid.uuid4().hex[:8]}"
    first = start_worker()
    await sluice.create(name, _replicator(stack_config, f"{topic},a||b", **{"max.tasks": "2"}))

    def copies() -> int:
        if not replica_admin.topic_exists(topic):
            return 0
        return sum(replica_admin.max_offset(mq) for mq in replica_admin.queues(topic))

    await wait_for(lambda: copies() >= 300, 180, "the first copies in the target cluster")
    first.kill()  # SIGKILL mid-run: a batch in flight is abandoned half-way
    start_worker()
    _send(rocketmq_admin, topic, 4, 600, 150)
    expected = _copied(rocketmq_admin, topic, 4, ("a", "b"))
    total = sum(len(v) for v in expected.values())
    await wait_for(lambda: copies() >= total, 300, "every copy in the target cluster")

    assert len(replica_admin.queues(topic)) == 4  # created with the source's queue count
    for q in range(4):
        copied = _queue(replica_admin, topic, q)
        assert _content(copied) == _content(expected[q])  # queue i to queue i, in order, once
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
    _send(rocketmq_admin, topic, 2, 0, 240)
    start_worker()
    name = f"replicator-{uuid.uuid4().hex[:8]}"
    await sluice.create(name, _replicator(stack_config, f"{topic},a||b"))
    # the group consumed part of each queue on the source cluster (it copies only tags a and b)
    consumed = {0: 37, 1: 200}
    for q, offset in consumed.items():
        rocketmq_admin.update_consumer_offset(group, MessageQueue(topic, "broker-a", q), offset)
    checkpoint = {
        "connector.class": "org.apache.rocketmq.replicator.ReplicatorCheckpointConnector",
        **_clusters(stack_config),
        "src.topictags": f"{topic},a||b",
        "sync.gids": group,
        "checkpoint.interval.ms": "500",
        "sync.group.offsets.enabled": "true",
        "poll.interval.ms": "200",
        **FAST_HEARTBEAT,
    }
    await sluice.create(f"{name}-checkpoint", checkpoint)
    total = sum(len(v) for v in _copied(rocketmq_admin, topic, 2, ("a", "b")).values())

    def target_offsets() -> dict[int, int | None]:
        return {
            q: replica_admin.query_consumer_offset(group, MessageQueue(topic, "broker-r", q)) for q in (0, 1)
        }

    await wait_for(
        lambda: (
            replica_admin.topic_exists(topic)
            and sum(replica_admin.max_offset(mq) for mq in replica_admin.queues(topic)) >= total
            and None not in target_offsets().values()
        ),
        240,
        "every copy and the group's translated offsets in the target cluster",
    )
    for q, offset in target_offsets().items():
        assert offset is not None
        # what the group has left to consume is the same on both sides: nothing lost, nothing again
        left = [m for m in _queue(rocketmq_admin, topic, q, consumed[q]) if m.tags in ("a", "b")]
        assert _content(_queue(replica_admin, topic, q, offset)) == _content(left)
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
        **_clusters(stack_config), "heartbeat.topic": beats, "heartbeat.interval.ms": "300",
        "poll.interval.ms": "100", **FAST_HEARTBEAT,
    })  # fmt: skip
    await sluice.create(
        f"{name}-copy", _replicator(stack_config, beats, **{"consumefromwhere": "CONSUME_FROM_FIRST_OFFSET"})
    )

    async def lag_shown() -> bool:
        status = await sluice.status(name)
        return any(t.metrics and "end-to-end" in t.metrics.lag_seconds for t in status.tasks)

    await wait_for(
        lambda: replica_admin.topic_exists(beats) and _total_of(replica_admin, beats) >= 3,
        120,
        "copied heartbeats",
    )
    await wait_for(lag_shown, 60, "the heartbeat's end-to-end lag in status")
    copy = next(m for q in range(4) for m in _queue(replica_admin, beats, q))
    assert copy.body == b"ping" and copy.properties["heartbeatStartAt"].isdigit()
    status = await sluice.status(name)
    (lag,) = [
        t.metrics.lag_seconds["end-to-end"] for t in status.tasks if t.metrics and t.metrics.lag_seconds
    ]
    assert 0 <= lag < 30
    await sluice.delete(f"{name}-copy")
    await sluice.delete(name)


def _total_of(client: SyncRocketMQClient, topic: str) -> int:
    return sum(client.max_offset(mq) for mq in client.queues(topic))
