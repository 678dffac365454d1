"""``rocketmq-replicator-checkpoint``: consumer groups' offsets translated to the target cluster.

RocketMQ Connect's ``org.apache.rocketmq.replicator.ReplicatorCheckpointConnector`` with its keys
(``sync.gids``, ``checkpoint.interval.ms``, ``checkpoint.topic``, the cluster keys and
``src.topictags``), and MirrorMaker 2's ``sync.group.offsets.enabled``. Every interval the task
reads each listed group's committed offsets on the source cluster's queues, translates them into
the target queues' offsets (connectors.replicator.translation, with the offset syncs the
replicator recorded: connectors.replicator.syncs) and writes one checkpoint per group and target
queue to ``checkpoint.topic`` on the target cluster::

    {"consumerGroup": "orders-app", "topic": "orders", "queue": "broker-b:0",
     "downstreamOffset": 1200, "upstreamOffsets": {"orders/broker-a:0": 1200},
     "upstreamLastTimestamp": 1765000000000, "metadata": "1765000000123"}

With ``sync.group.offsets.enabled=true`` the translated offsets are committed to the same group on
the target cluster once the checkpoint is committed, while no consumer of the group is online
there, and never backwards: a consumer switched to the target then resumes where it stopped.

A round (connectors.replicator.rounds) that is re-run reads the groups' offsets again: they only
move forward.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from sluice.connectors.api import SourceConnector, TargetCluster
from sluice.connectors.config import ConfigDef, ConfigField, at_least, non_empty
from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.planning import natural_key
from sluice.connectors.replicator.cluster import CLUSTER_FIELDS, client_of, dest_cluster, source_cluster
from sluice.connectors.replicator.rounds import RoundsTask
from sluice.connectors.replicator.syncs import read_syncs
from sluice.connectors.replicator.topics import copied_topics
from sluice.connectors.replicator.translation import Copy, SyncIndex, first_after, forward_only, least
from sluice.connectors.source_reads import SourceRead, record_table

if TYPE_CHECKING:
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
    from sluice.connectors.rocketmq.values import MessageQueue

log = logging.getLogger(__name__)

ROUNDS: Final = "checkpoints"
#: Target messages read per pull while a translation scans a queue.
SCAN_CHUNK: Final = 256

CHECKPOINT_FIELDS: Final = (
    *CLUSTER_FIELDS,
    ConfigField("src.topictags", str, doc="the replicated topics whose groups' offsets are translated"),
    ConfigField("dest.topic", str, ""),
    ConfigField("topic.rename.format", str, ""),
    ConfigField("sync.gids", list[str], doc="consumer groups whose offsets are translated",
                validator=lambda v: None if v else "names no consumer group"),
    ConfigField("checkpoint.interval.ms", int, 10_000, validator=at_least(100)),
    ConfigField("checkpoint.topic", str, "replicator_checkpoint", validator=non_empty),
    ConfigField("sync.group.offsets.enabled", bool, False,
                doc="commit the translated offsets to the groups on the target cluster"),
    ConfigField("offset.syncs.topic", str, "replicator_offset_syncs", validator=non_empty),
)  # fmt: skip


class ReplicatorCheckpointConnector(SourceConnector):
    plugin_name = "rocketmq-replicator-checkpoint"
    config_def = ConfigDef(CHECKPOINT_FIELDS)

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        return [dict(config)]  # one task, as RocketMQ Connect's


class ReplicatorCheckpointTask(RoundsTask):
    """See the module docstring."""

    rounds = ROUNDS

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        super().__init__(config, task_id, int(config["checkpoint.interval.ms"]))
        self._source, self._dest = source_cluster(config), dest_cluster(config)
        self._topics = copied_topics(config)
        self._groups = [str(g) for g in config["sync.gids"]]
        self._commits = bool(config.get("sync.group.offsets.enabled"))
        self._sync_topic = str(config["offset.syncs.topic"])
        self._index = SyncIndex()
        self._synced_to = 0
        self._src: SyncRocketMQClient | None = None
        self._dst: SyncRocketMQClient | None = None
        #: the last round's translations (group -> target topic -> queue -> offset), for ``committed``
        self._translated: dict[str, dict[str, dict[str, int]]] = {}

    @property
    def src(self) -> SyncRocketMQClient:
        if self._src is None:
            self._src = client_of(self._source)
        return self._src

    @property
    def dst(self) -> SyncRocketMQClient:
        if self._dst is None:
            self._dst = client_of(self._dest)
        return self._dst

    def target_cluster(self) -> TargetCluster:
        return self._dest

    def read(self, ranges: Sequence[PartitionRange]) -> SourceRead:
        """This round's checkpoints, translated now (module docstring)."""
        rows = [r for r in ranges if not r.is_empty]
        if not rows:
            return SourceRead()
        self._catch_up_syncs()
        offset = rows[0].end.offset - 1
        keys, values = [], []
        self._translated = {}
        stamp = str(int(time.time() * 1000))
        for group in self._groups:
            for topic in sorted({t.target for t in self._topics}):
                for queue, (down, up) in sorted(self._translate(group, topic).items()):
                    self._translated.setdefault(group, {}).setdefault(topic, {})[queue] = down
                    keys.append(f"{group}/{topic}/{queue}")
                    values.append(json.dumps({
                        "consumerGroup": group, "topic": topic, "queue": queue, "downstreamOffset": down,
                        "upstreamOffsets": up, "metadata": stamp,
                    }, separators=(",", ":")))  # fmt: skip
        table = record_table(
            ROUNDS, [offset] * len(values), values, keys=keys, topic=self.config["checkpoint.topic"]
        )
        return SourceRead(tables=(table,))

    def topic_of(self, partition: str) -> str:
        return str(self.config["checkpoint.topic"])

    def topics(self) -> list[str]:
        return [str(self.config["checkpoint.topic"])]

    def _catch_up_syncs(self) -> None:
        from sluice.connectors.rocketmq.errors import TopicNotFoundError

        try:
            read = list(read_syncs(self.dst, self._sync_topic, self._synced_to))
        except TopicNotFoundError:
            return  # no replicator has committed a batch yet
        self._index.add(s for _, s in read)
        if read:
            self._synced_to = read[-1][0] + 1

    def _translate(self, group: str, topic: str) -> dict[str, tuple[int, dict[str, int]]]:
        """Each target queue of ``topic`` and its offset for ``group`` with the source offsets it
        came from; a queue some source queue of the group cannot be translated for is left out."""
        out: dict[str, tuple[int, dict[str, int]]] = {}
        target = {q.key: q for q in self.dst.queues(topic)}
        for queue, partitions in self._index.feeds(topic).items():
            mq = target.get(queue)
            if mq is None:
                continue
            committed = {p: self._committed(group, p) for p in partitions}
            consumed = {p: c for p, c in committed.items() if c is not None}
            if not consumed:
                continue  # the group consumes none of them
            end = self.dst.max_offset(mq)
            found = [self._first_after(mq, p, c, end) for p, c in sorted(consumed.items())]
            down = least(found)
            if down is not None:
                out[queue] = (down, consumed)
        return out

    def _committed(self, group: str, partition: str) -> int | None:
        from sluice.connectors.rocketmq.values import MessageQueue

        topic, key = partition.rsplit("/", 1)
        broker, queue = key.rsplit(":", 1)
        return self.src.query_consumer_offset(group, MessageQueue(topic, broker, int(queue)))

    def _first_after(self, mq: MessageQueue, partition: str, committed: int, end: int) -> int:
        start = self._index.scan_start(partition, mq.topic, mq.key, committed)
        if start is None:
            start = self.dst.min_offset(mq)
        return first_after(self._copies(mq, start, end), partition, committed, end)

    def _copies(self, mq: MessageQueue, start: int, end: int) -> Iterator[Copy]:
        """The target queue's messages from ``start`` to ``end``, pulled a chunk at a time (a
        translation usually stops within the first)."""
        from sluice.connectors.converters import OFFSET_PROPERTY, PARTITION_PROPERTY

        for lo in range(start, end, SCAN_CHUNK):
            for m in self.dst.pull_range(mq, lo, min(lo + SCAN_CHUNK, end), max_per_request=SCAN_CHUNK):
                offset = m.properties.get(OFFSET_PROPERTY)
                yield Copy(
                    m.queue_offset,
                    m.properties.get(PARTITION_PROPERTY),
                    int(offset) if offset and offset.isdigit() else None,
                )

    def committed(self, plan: BatchPlan) -> None:
        """With ``sync.group.offsets.enabled``: the round's translations committed to the groups on
        the target cluster, where no consumer of the group is online, never backwards."""
        if not self._commits:
            return
        for group, topics in self._translated.items():
            for topic, offsets in topics.items():
                if self.dst.group_online(group, topic):
                    log.info(
                        "checkpoint: group %s is online on the target cluster; its offsets are its own", group
                    )
                    continue
                queues = {q.key: q for q in self.dst.queues(topic)}
                current = {
                    q: self.dst.query_consumer_offset(group, queues[q]) for q in offsets if q in queues
                }
                for queue, offset in sorted(
                    forward_only(current, offsets).items(), key=lambda kv: natural_key(kv[0])
                ):
                    self.dst.update_consumer_offset(group, queues[queue], offset)

    def close(self) -> None:
        for client in (self._src, self._dst):
            if client is not None:
                client.close()


ReplicatorCheckpointConnector.task_class = ReplicatorCheckpointTask
