"""What the replicator tests share: RocketMQ Connect's Replicator configs for the local stack's two
clusters, messages sent to each queue with keys, tags, properties and binary bodies, and each
queue's content read back for comparison."""

from __future__ import annotations

import time
from typing import Any

from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.connectors.rocketmq.values import OutgoingMessage
from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.rocketmq import CLUSTER_NAME, REPLICA_CLUSTER_NAME
from tests.runtime.helpers import FAST_HEARTBEAT

TAGS = ("a", "b", "skip")


def clusters(stack_config: StackConfig) -> dict[str, str]:
    return {
        "src.endpoint": stack_config.namesrv_address, "src.cluster": CLUSTER_NAME,
        "src.cloud": "local", "src.region": "here",
        "dest.endpoint": stack_config.replica_namesrv_address, "dest.cluster": REPLICA_CLUSTER_NAME,
        "dest.cloud": "local", "dest.region": "there", "src.acl.enable": "false", "dest.acl.enable": "false",
    }  # fmt: skip


def replicator(stack_config: StackConfig, topictags: str, **extra: str) -> dict[str, str]:
    """As a RocketMQ Connect user writes it (apache/rocketmq-connect's replicator README keys)."""
    return {
        "connector.class": "org.apache.rocketmq.replicator.ReplicatorSourceConnector",
        **clusters(stack_config),
        "src.topictags": topictags,
        "consumefromwhere": "CONSUME_FROM_FIRST_OFFSET",
        "sync.tps": "100000",
        "batch.max.records": "300",
        "poll.interval.ms": "200",
        **FAST_HEARTBEAT,
        **extra,
    }


def send(client: SyncRocketMQClient, topic: str, queues: int, start: int, count: int) -> None:
    """``count`` messages to each queue: keys, a tag of TAGS in turn, properties, a binary body;
    returns once each queue's end has them."""
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
            result = client.send_batch(mq, batch[lo : lo + 100])
        # A queue's end (what a pull or max_offset sees) follows a send by a moment (the broker
        # dispatches its commit log to the queue): wait, so what a test reads next is all of it.
        deadline = time.monotonic() + 10
        while client.max_offset(mq) < result.offsets[-1] + 1 and time.monotonic() < deadline:
            time.sleep(0.01)


def queue(client: SyncRocketMQClient, topic: str, queue_id: int, start: int = 0) -> list[Any]:
    """Queue ``queue_id`` of ``topic`` from ``start`` to its end."""
    mq = next(m for m in client.queues(topic) if m.queue_id == queue_id)
    return client.pull_range(mq, start, client.max_offset(mq), max_per_request=512)


def content(messages: list[Any]) -> list[tuple[object, ...]]:
    return [(m.body, m.keys, m.tags, m.properties.get("n"), m.properties.get("color")) for m in messages]


def expected_copies(
    source: SyncRocketMQClient, topic: str, queues: int, tags: tuple[str, ...]
) -> dict[int, list[Any]]:
    """What a replicator copying ``tags`` must leave in each target queue: the source queue's
    messages with those tags, in order."""
    return {q: [m for m in queue(source, topic, q) if m.tags in tags] for q in range(queues)}


def total_of(client: SyncRocketMQClient, topic: str) -> int:
    """Messages in every queue of ``topic`` (0 before the topic exists)."""
    if not client.topic_exists(topic):
        return 0
    return sum(client.max_offset(mq) for mq in client.queues(topic))
