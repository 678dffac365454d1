"""``rocketmq-replicator-heartbeat``: replication lag measured end to end.

RocketMQ Connect's ``org.apache.rocketmq.replicator.ReplicatorHeartbeatConnector`` with its keys
(``heartbeat.interval.ms``, ``heartbeat.topic``, the cluster keys). Every interval the task sends a
heartbeat (body ``ping``; properties ``src``, ``dest`` and ``heartbeatStartAt``, epoch millis) to
the heartbeat topic on the *source* cluster; a replicator that copies that topic brings it to the
target cluster, where the task reads the copies back: the time from ``heartbeatStartAt`` to the
copy's store time is the replication lag end to end, shown as the task's lag in seconds
(``lag_seconds``: status, CLI, REST API, metrics). A heartbeat not copied yet counts from its send
to now, so a stalled replicator shows a growing lag, not its last good figure.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from sluice.connectors.api import SourceConnector, TargetCluster
from sluice.connectors.config import ConfigDef, ConfigField, at_least, non_empty
from sluice.connectors.model import PartitionRange
from sluice.connectors.positions import Position
from sluice.connectors.replicator.cluster import CLUSTER_FIELDS, client_of, dest_cluster, source_cluster
from sluice.connectors.replicator.rounds import RoundsTask
from sluice.connectors.replicator.topics import target_topic
from sluice.connectors.source_reads import SourceRead, record_table

if TYPE_CHECKING:
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient

BEATS: Final = "heartbeats"
STARTED_AT: Final = "heartbeatStartAt"
LAG: Final = "end-to-end"
MAX_UNCOPIED: Final = 4096

HEARTBEAT_FIELDS: Final = (
    *CLUSTER_FIELDS,
    ConfigField("heartbeat.interval.ms", int, 1000, validator=at_least(100)),
    ConfigField("heartbeat.topic", str, "replicator_heartbeat", validator=non_empty),
    ConfigField("dest.topic", str, ""),
    ConfigField("topic.rename.format", str, ""),
)


class ReplicatorHeartbeatConnector(SourceConnector):
    plugin_name = "rocketmq-replicator-heartbeat"
    config_def = ConfigDef(HEARTBEAT_FIELDS)

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        return [dict(config)]  # one task, as RocketMQ Connect's


class ReplicatorHeartbeatTask(RoundsTask):
    """See the module docstring."""

    rounds = BEATS

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        super().__init__(config, task_id, int(config["heartbeat.interval.ms"]))
        self._source, self._dest = source_cluster(config), dest_cluster(config)
        self._topic = str(config["heartbeat.topic"])
        self._copies = target_topic(self._topic, config)
        self._dst: SyncRocketMQClient | None = None
        #: per target queue, the next copy to read
        self._read_to: dict[str, int] = {}
        self._lag_s: float | None = None
        #: send times of heartbeats not seen copied yet, oldest first: only the oldest counts, and
        #: the first MAX_UNCOPIED are kept (a replicator stopped for days must not grow it forever)
        self._sent_ms: list[int] = []

    def target_cluster(self) -> TargetCluster:
        return self._source  # heartbeats start on the source cluster, for a replicator to copy

    def topics(self) -> list[str]:
        return [self._topic]

    def topic_of(self, partition: str) -> str:
        return self._topic

    def read(self, ranges: Sequence[PartitionRange]) -> SourceRead:
        rows = [r for r in ranges if not r.is_empty]
        if not rows:
            return SourceRead()
        import pyarrow as pa

        now = int(time.time() * 1000)
        if len(self._sent_ms) < MAX_UNCOPIED:
            self._sent_ms.append(now)
        headers = pa.array(
            [[("src", self._source.label), ("dest", self._dest.label), (STARTED_AT, str(now))]],
            pa.map_(pa.string(), pa.string()),
        )
        return SourceRead(tables=(record_table(BEATS, [rows[0].end.offset - 1], ["ping"], headers=headers),))

    def lag_seconds(self, committed: Mapping[str, Position]) -> dict[str, float]:
        """The latest heartbeat copy's lag, or the age of the oldest heartbeat not copied yet."""
        from sluice.connectors.rocketmq.errors import TopicNotFoundError

        if self._dst is None:
            self._dst = client_of(self._dest)
        try:
            queues = self._dst.queues(self._copies)
        except TopicNotFoundError:
            queues = []
        for mq in queues:
            end = self._dst.max_offset(mq)
            start = self._read_to.get(mq.key, max(self._dst.min_offset(mq), end - 64))
            for m in self._dst.pull_range(mq, start, end, max_per_request=64):
                started = m.properties.get(STARTED_AT, "")
                if started.isdigit():
                    self._lag_s = max(0.0, (m.store_timestamp_ms - int(started)) / 1000)
                    self._sent_ms = [t for t in self._sent_ms if t > int(started)]
            self._read_to[mq.key] = end
        waiting = (time.time() * 1000 - self._sent_ms[0]) / 1000 if self._sent_ms else 0.0
        lag = max(self._lag_s or 0.0, waiting if waiting > self.interval_ms / 1000 else 0.0)
        return {LAG: round(lag, 3)}

    def close(self) -> None:
        if self._dst is not None:
            self._dst.close()


ReplicatorHeartbeatConnector.task_class = ReplicatorHeartbeatTask
