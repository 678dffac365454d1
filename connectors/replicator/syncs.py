"""Offset syncs: where a replicator's copies of each source queue begin in the target queues.

After each committed batch the replicator task records, for each source queue range it copied,
``OffsetSync(partition, start, target topic, target queue, target end before the batch)``
(connectors.replicator.translation says why that bounds the copies) as a JSON message on the
target cluster's ``offset.syncs.topic`` (one queue, created on first use), at most one per source
queue a second: a translation scans the target queue from the latest sync at or below the group's
offset, so sparser syncs only lengthen that scan. MirrorMaker 2 keeps its offset syncs the same
way, in a topic of the cluster. A sync lost to a crash right after a commit only lengthens a scan.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Final

from sluice.connectors.api import TargetCluster
from sluice.connectors.replicator.translation import OffsetSync

if TYPE_CHECKING:
    from sluice.connectors.model import PartitionRange
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient

log = logging.getLogger(__name__)

#: At most one sync per source queue in this many seconds.
SYNC_INTERVAL_S: Final = 1.0


def sync_body(sync: OffsetSync, replicator: str) -> bytes:
    return json.dumps(
        {"replicator": replicator, "partition": sync.partition, "source": sync.source_offset,
         "topic": sync.target_topic, "queue": sync.target_queue, "target": sync.target_offset},
        separators=(",", ":"),
    ).encode()  # fmt: skip


def parse_sync(body: bytes) -> OffsetSync | None:
    """A sync message's sync; None for a body that is not one (logged: the topic is shared)."""
    try:
        doc = json.loads(body)
        return OffsetSync(str(doc["partition"]), int(doc["source"]), str(doc["topic"]), str(doc["queue"]),
                          int(doc["target"]))  # fmt: skip
    except (ValueError, KeyError, TypeError):
        log.warning("offset syncs: a message is not an offset sync; left out")
        return None


class SyncWriter:
    """Records a replicator task's offset syncs (module docstring)."""

    def __init__(self, cluster: TargetCluster, topic: str, replicator: str) -> None:
        self.cluster = cluster
        self.topic = topic
        self.replicator = replicator
        self._client: SyncRocketMQClient | None = None
        self._last: dict[str, float] = {}

    def record(
        self,
        ranges: Sequence[PartitionRange],
        ends: Mapping[str, int],
        topic_of: Callable[[str], str],
        pinned: Mapping[str, str],
    ) -> None:
        """Syncs of a committed batch: ``ends`` are the target queue ends its plan recorded
        (``<topic>/<queue>``), ``pinned`` the target queue of each pinned source queue."""
        now = time.monotonic()
        syncs = []
        for r in ranges:
            if r.is_empty or now - self._last.get(r.partition, -SYNC_INTERVAL_S) < SYNC_INTERVAL_S:
                continue
            topic = topic_of(r.partition)
            queues = [pinned[r.partition]] if r.partition in pinned else [
                k.split("/", 1)[1] for k in ends if k.split("/", 1)[0] == topic
            ]  # fmt: skip
            for queue in queues:
                end = ends.get(f"{topic}/{queue}")
                if end is not None:
                    syncs.append(OffsetSync(r.partition, r.start.offset, topic, queue, end))
            self._last[r.partition] = now
        if syncs:
            self._send(syncs)

    def _send(self, syncs: list[OffsetSync]) -> None:
        from sluice.connectors.rocketmq.values import OutgoingMessage

        client = self._ensure()
        (mq,) = client.queues(self.topic)[:1]
        client.send_batch(mq, [OutgoingMessage(sync_body(s, self.replicator)) for s in syncs])

    def _ensure(self) -> SyncRocketMQClient:
        from sluice.connectors.replicator.cluster import client_of

        if self._client is None:
            self._client = client_of(self.cluster)
            if not self._client.topic_exists(self.topic):
                self._client.create_topic(self.topic, queue_count=1, cluster=self.cluster.cluster or None)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def read_syncs(client: SyncRocketMQClient, topic: str, start: int) -> Iterator[tuple[int, OffsetSync]]:
    """The syncs on ``topic`` from offset ``start`` to its end now, with their offsets."""
    (mq,) = client.queues(topic)[:1]
    for m in client.pull_range(mq, start, client.max_offset(mq), max_per_request=512):
        sync = parse_sync(m.body)
        if sync is not None:
            yield m.queue_offset, sync
