"""``rocketmq-replicator``: one RocketMQ cluster's topics copied into another, exactly once.

RocketMQ Connect's ``org.apache.rocketmq.replicator.ReplicatorSourceConnector``, configured with
its own keys (docs/replicator.md). A partition is one source queue, ``<topic>/<broker>:<queue>``;
its position is the queue offset. A batch pulls exact offset ranges from the source cluster
(``read``, one split per queue range, read where the batch runs) and the source runner sends them
to the target cluster (``target_cluster``) the way every source's messages are sent: each carries
its source queue and offset, the plan records the target queues' ends first, and a re-run after a
crash leaves out what an earlier attempt sent. So the copy is exactly once into the target.

What a copy keeps: the body as it is, keys, tags and user properties; it adds the Replicator's
``REPLICATOR-BORN-SOURCE`` (the clusters it came through: a message that already passed the target
is not copied back, so two replicators can run in both directions), ``REPLICATOR-BORN-TOPIC``,
``REPLICATOR-BORN-SOURCE-TIMESTAMP``, ``REPLICATOR-source-topic`` and ``EXTEND_UNIQ_INFO`` (the
source message id). Queue i goes to queue i when the topics' queue counts match
(``pinned_queues``), otherwise by key (a keyless message by its source queue). Target topics are
created with the source topic's queue count and read/write permission and grow with it
(``topic_shape``). ``sync.tps`` caps messages per second; ``consumefromwhere`` says where a queue
never copied before starts.
"""

from __future__ import annotations

import json
import logging
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from sluice.connectors.api import SourceConnector, SourceTask, TargetCluster, TopicShape
from sluice.connectors.config import (
    ConfigDef,
    ConfigField,
    FieldError,
    at_least,
    idle_backoff_field,
    non_empty,
)
from sluice.connectors.model import BatchPlan, DataLossPolicy, PartitionRange
from sluice.connectors.planning import natural_key
from sluice.connectors.positions import Position, offset_batch_end
from sluice.connectors.replicator.cluster import (
    CLUSTER_FIELDS,
    client_of,
    dest_cluster,
    source_cluster,
)
from sluice.connectors.replicator.filters import PropertyFilter, parse_property_filter
from sluice.connectors.replicator.syncs import SyncWriter
from sluice.connectors.replicator.topics import CopiedTopic, copied_topics, parse_topic_tags
from sluice.connectors.source_reads import ArrowSplits, SourceRead

if TYPE_CHECKING:
    from sluice.connectors.replicator.reads import QueueRead
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
    from sluice.connectors.rocketmq.values import MessageQueue, TopicRoute

log = logging.getLogger(__name__)

FIRST: Final = "CONSUME_FROM_FIRST_OFFSET"
LAST: Final = "CONSUME_FROM_LAST_OFFSET"
TIMESTAMP: Final = "CONSUME_FROM_TIMESTAMP"
#: Where each queue starts, resolved once when the connector's tasks are made (``task_configs``).
START_OFFSETS_KEY: Final = "replicator.start.offsets"
#: How many tasks share the source queues (a queue is task ``crc32(partition) % count``'s).
TASK_COUNT_KEY: Final = "replicator.task.count"


def _topic_tags(value: Any) -> str | None:
    try:
        parse_topic_tags(str(value))
    except ValueError as exc:
        return str(exc)
    return None


def _property_filter(value: Any) -> str | None:
    try:
        parse_property_filter(str(value), "and")
    except ValueError as exc:
        return str(exc)
    return None


REPLICATOR_FIELDS: Final = (
    *CLUSTER_FIELDS,
    idle_backoff_field(200, "200 ms: a replicator's lag is the window a failover loses to it"),
    ConfigField("src.topictags", str, doc="topics and tags copied: 'topic,TagA||TagB;topic2,*'",
                validator=_topic_tags),
    ConfigField("dest.topic", str, "", doc="one topic every source topic is copied into (default: "
                "each to its own name)"),
    ConfigField("topic.rename.format", str, "", doc="target topic name with ${topic} for the source's "
                "(legacy replicator's key), when dest.topic is not set"),
    ConfigField("filter.properties", str, "", doc="copy only messages with these properties: 'p1,p2' "
                "(present) or 'p1=v1,p2=v2' (equal)", validator=_property_filter),
    ConfigField("filter.properties.operator", str, "and", choices=("and", "or"),
                normalize=lambda v: str(v).strip().lower()),
    ConfigField("consumefromwhere", str, LAST, choices=(FIRST, LAST, TIMESTAMP),
                normalize=lambda v: str(v).strip().upper(),
                doc="where a queue never copied before starts"),
    ConfigField("consumefromtimestamp", int, 0, doc="epoch millis, with CONSUME_FROM_TIMESTAMP",
                validator=at_least(0)),
    ConfigField("sync.tps", int, 1000, doc="most messages copied per second by a task",
                validator=at_least(1)),
    ConfigField("enable.retrysync", bool, True, doc="copy the retry topics of src.retrygids' groups"),
    ConfigField("enable.dlqsync", bool, True, doc="copy the dead-letter topics of src.retrygids' groups"),
    ConfigField("src.retrygids", list[str], [], doc="consumer groups whose retry and dead-letter "
                "topics are copied", aliases=("dest.dlqgids", "src.dlqgids")),
    ConfigField("dest.retrytopic", str, "", doc="topic the retry topics go to (default: their own names)"),
    ConfigField("dest.dlqtopic", str, "", doc="topic the dead-letter topics go to (default: their own "
                "names)", aliases=("dest.dqltopic",)),
    ConfigField("offset.syncs.topic", str, "replicator_offset_syncs", validator=non_empty,
                doc="target-cluster topic of the offset syncs the checkpoint connector translates with"),
)  # fmt: skip


class ReplicatorSourceConnector(SourceConnector):
    """See the module docstring."""

    plugin_name = "rocketmq-replicator"
    config_def = ConfigDef(REPLICATOR_FIELDS)

    def validate(self, raw_config: Mapping[str, Any]) -> list[FieldError]:
        errors = super().validate(raw_config)
        name = str(raw_config.get("name") or "")
        if str(raw_config.get("consumefromwhere") or "").strip().upper() == TIMESTAMP and not raw_config.get(
            "consumefromtimestamp"
        ):
            errors.append(FieldError(
                "consumefromtimestamp",
                f"connector {name!r}: field 'consumefromtimestamp' is required with "
                "consumefromwhere=CONSUME_FROM_TIMESTAMP",
            ))  # fmt: skip
        for key in ("value.converter", "key.converter"):
            converter = str(raw_config.get(key) or "string").rsplit(".", 1)[-1].lower()
            if not converter.startswith(("string", "bytearray", "bytes")):
                errors.append(FieldError(
                    key,
                    f"connector {name!r}: field {key!r}: a replicator copies bodies and keys as they "
                    "are (string or bytes converter)",
                ))  # fmt: skip
        return errors

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        """``max.tasks`` tasks at most, one per source queue at most, each with where every queue
        not copied before starts (``consumefromwhere``, resolved now so replays agree)."""
        parsed = self.parse(config)
        with client_of(source_cluster(parsed)) as client:
            queues = {f"{t.source}/{mq.key}": mq for t in copied_topics(parsed) for mq in _queues(client, t)}
            starts = _start_offsets(client, queues, parsed)
        count = max(1, min(max_tasks, len(queues) or 1))
        shared = {**config, TASK_COUNT_KEY: str(count), START_OFFSETS_KEY: json.dumps(starts)}
        return [dict(shared) for _ in range(count)]


def _queues(client: SyncRocketMQClient, topic: CopiedTopic) -> list[MessageQueue]:
    from sluice.connectors.rocketmq.errors import TopicNotFoundError

    try:
        return client.queues(topic.source)
    except TopicNotFoundError:
        return []  # copied once it exists


def _start_offsets(
    client: SyncRocketMQClient, queues: Mapping[str, MessageQueue], config: Mapping[str, Any]
) -> dict[str, int]:
    where = config["consumefromwhere"]
    if where == FIRST:
        return {}
    if where == TIMESTAMP:
        stamp = int(config["consumefromtimestamp"])
        return {p: client.search_offset(mq, stamp) for p, mq in queues.items()}
    return {p: client.max_offset(mq) for p, mq in queues.items()}


@dataclass(frozen=True)
class _Tokens:
    """``sync.tps`` as a bucket of messages, refilled by the second: a batch is planned for at most
    what it holds (planning, so a re-run plan keeps its ranges)."""

    rate: int
    held: float
    at: float

    def take(self, wanted: int, now: float) -> tuple[int, _Tokens]:
        held = min(float(self.rate), self.held + (now - self.at) * self.rate)
        granted = min(wanted, int(held))
        return granted, _Tokens(self.rate, held - granted, now)


class ReplicatorSourceTask(SourceTask):
    """See the module docstring."""

    position_unit = "records"

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        super().__init__(config, task_id)
        self._topics = {t.source: t for t in copied_topics(config)}
        self._source = source_cluster(config)
        self._dest = dest_cluster(config)
        self._count = int(config.get(TASK_COUNT_KEY) or 1)
        self._starts: dict[str, int] = json.loads(str(config.get(START_OFFSETS_KEY) or "{}"))
        self._filter: PropertyFilter | None = (
            parse_property_filter(str(config["filter.properties"]), str(config["filter.properties.operator"]))
            if config.get("filter.properties")
            else None
        )
        self._policy = DataLossPolicy(str(config.get("data.loss") or "fail"))
        self._tokens = _Tokens(int(config["sync.tps"]), float(config["sync.tps"]), time.monotonic())
        self._client: SyncRocketMQClient | None = None
        self._syncs = SyncWriter(self._dest, str(config["offset.syncs.topic"]), self.name)
        #: the source queues of each copied topic, looked up at each planning
        self._queues: dict[str, list[MessageQueue]] = {}
        #: each queue's end at the last planning (``lag_seconds``)
        self._latest: dict[str, Position] = {}

    @property
    def client(self) -> SyncRocketMQClient:
        if self._client is None:
            self._client = client_of(self._source)
        return self._client

    # ---- partitions and positions -------------------------------------------------------------
    def partitions(self) -> list[str]:
        """This task's source queues: every queue of a copied topic whose ``crc32`` falls to it."""
        from sluice.connectors.rocketmq.errors import TopicNotFoundError

        found = []
        for topic in self._topics:
            try:
                queues = self.client.queues(topic)
            except TopicNotFoundError:
                queues = []
            self._queues[topic] = sorted(queues, key=lambda q: natural_key(q.key))
            found += [p for p in (f"{topic}/{q.key}" for q in queues) if self._mine(p)]
        return sorted(found, key=natural_key)

    def _mine(self, partition: str) -> bool:
        return zlib.crc32(partition.encode()) % self._count == self.task_id

    def _queue(self, partition: str) -> MessageQueue:
        from sluice.connectors.rocketmq.values import MessageQueue

        topic, key = partition.rsplit("/", 1)
        broker, queue = key.rsplit(":", 1)
        return MessageQueue(topic, broker, int(queue))

    def earliest_positions(self) -> dict[str, Position]:
        """The queue's first retained offset, or where ``consumefromwhere`` started it."""
        return {
            p: Position((max(self.client.min_offset(self._queue(p)), self._starts.get(p, 0)),))
            for p in self.partitions()
        }

    def latest_positions(self, committed: Mapping[str, Position]) -> dict[str, Position]:
        self._latest = {p: Position((self.client.max_offset(self._queue(p)),)) for p in self.partitions()}
        return self._latest

    def lag_seconds(self, committed: Mapping[str, Position]) -> dict[str, float]:
        """ReportsLagSeconds: per source queue, how long its oldest message not copied yet has
        been stored (0 when the queue is copied through)."""
        now_ms = time.time() * 1000
        out: dict[str, float] = {}
        for partition, latest in self._latest.items():
            done = committed.get(partition)
            start = done.offset if done is not None else latest.offset
            behind = 0.0
            if start < latest.offset:
                pulled = self.client.pull(self._queue(partition), start, 1).messages
                behind = max(0.0, (now_ms - pulled[0].store_timestamp_ms) / 1000) if pulled else 0.0
            out[partition] = round(behind, 3)
        return out

    def batch_end(self, partition: str, start: Position, latest: Position, budget: int | None) -> Position:
        """At most what ``sync.tps`` allows now (``_Tokens``)."""
        wanted = latest.offset - start.offset if budget is None else min(budget, latest.offset - start.offset)
        granted, self._tokens = self._tokens.take(wanted, time.monotonic())
        return offset_batch_end(start, latest, granted)

    # ---- where the copies go --------------------------------------------------------------------
    def target_cluster(self) -> TargetCluster:
        return self._dest

    def topic_of(self, partition: str) -> str:
        return self._topics[partition.rsplit("/", 1)[0]].target

    def topics(self) -> list[str]:
        return sorted({t.target for t in self._topics.values()})

    def topic_shape(self, topic: str) -> TopicShape:
        """The most queues and the widest read/write permission of the source topics copied into
        ``topic`` (the target stays writable: the copies are written to it)."""
        sources = [t.source for t in self._topics.values() if t.target == topic]
        routes = [r for r in map(self._route, sources) if r is not None]
        queues = max((len(r.queues) for r in routes), default=4)
        perm = 0
        for r in routes:
            perm |= r.perm
        return TopicShape(queues=queues, perm=(perm or 6) | 2)

    def _route(self, topic: str) -> TopicRoute | None:
        from sluice.connectors.rocketmq.errors import TopicNotFoundError

        try:
            return self.client.topic_route(topic, refresh=True)
        except TopicNotFoundError:
            return None

    def pinned_queues(self, topic: str, queue_count: int) -> dict[str, int]:
        """Source queue i to target queue i, for the source topics of ``topic`` with its count."""
        out: dict[str, int] = {}
        for source, copied in self._topics.items():
            if copied.target != topic:
                continue
            if source not in self._queues:  # a re-run plan is run before any planning
                self.partitions()
            queues = self._queues.get(source) or []
            if copied.target == topic and len(queues) == queue_count:
                out.update({f"{source}/{q.key}": i for i, q in enumerate(queues)})
        return out

    # ---- reading --------------------------------------------------------------------------------
    def read(self, ranges: Sequence[PartitionRange]) -> SourceRead:
        from sluice.connectors.replicator.reads import read_queue, replicated_schema

        splits = tuple(self._read_of(r) for r in ranges if not r.is_empty)
        if not splits:
            return SourceRead()
        return SourceRead(splits=(ArrowSplits(replicated_schema(), splits, partial(read_queue)),))

    def _read_of(self, r: PartitionRange) -> QueueRead:
        from sluice.connectors.replicator.reads import QueueRead

        mq = self._queue(r.partition)
        copied = self._topics[mq.topic]
        return QueueRead(
            cluster=self._source, topic=mq.topic, broker=mq.broker_name, queue=mq.queue_id,
            start=r.start.offset, end=r.end.offset, target_topic=copied.target, tags=copied.tags,
            properties=self._filter, born_source=self._source.label, dest_label=self._dest.label,
            born_topic=str(self.config["src.topictags"]), policy=self._policy,
        )  # fmt: skip

    # ---- after each commit ----------------------------------------------------------------------
    def committed(self, plan: BatchPlan) -> None:
        """Record the batch's offset syncs (connectors.replicator.translation) on the target."""
        ends: dict[str, int] = json.loads(plan.sink_state.get("queue_ends", "{}"))
        pinned: dict[str, str] = {}
        for topic in {self.topic_of(r.partition) for r in plan.ranges}:
            queues = sorted(
                (k.split("/", 1)[1] for k in ends if k.split("/", 1)[0] == topic), key=natural_key
            )
            pinned.update({p: queues[i] for p, i in self.pinned_queues(topic, len(queues)).items()})
        self._syncs.record(plan.ranges, ends, self.topic_of, pinned)

    def close(self) -> None:
        self._syncs.close()
        if self._client is not None:
            self._client.close()


ReplicatorSourceConnector.task_class = ReplicatorSourceTask
