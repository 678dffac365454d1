"""``mqtt-source``: MQTT subscriptions into RocketMQ topics, with nothing lost across restarts.

RocketMQ Connect's ``org.apache.rocketmq.connect.mqtt.connector.MqttSourceConnector`` keys are
accepted (``mqttBrokerUrl``, ``mqttAccessKey``, ``mqttSecretKey``, ``sourceTopic``,
``connect.topicname``); docs/mqtt.md has the mapping.

How nothing is lost: the task's session is persistent (clean session off, or MQTT 5's clean start
off with ``mqtt.session.expiry.s``), its QoS 1 and 2 messages are acknowledged to the broker
(PUBACK, or PUBREC for QoS 2) only in ``committed``, after their batch was sent to RocketMQ and its
positions committed. A worker killed, a broker restarted or a connection dropped before that leaves
them unacknowledged in the session, and the broker delivers them again. **At least once**: the
messages delivered again are the ones in flight at the crash (received, not yet acknowledged), so
they are the only duplicates; QoS 0 messages in flight are lost, as QoS 0 allows.

Partitions: one per subscription route (``subscriptions``), named ``task<id>:<filter>``, numbered
by an :class:`Inbox` from the committed position. The task count shares each filter through a
shared subscription (``$share/<group>/<filter>``, group ``mqtt.shared.group``, by default the
connector's name when there are several tasks).

Each record: the MQTT topic as its key (``mqtt.key=topic``, or ``none``), the payload's bytes as its
value, exactly as published; headers ``mqtt.topic``, ``mqtt.qos``, ``mqtt.retain``, MQTT 5's
content type (``mqtt.content.type``) and user properties as they are.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final

from sluice.connectors.api import SourceConnector, SourceTask
from sluice.connectors.config import (
    ConfigDef,
    ConfigField,
    FieldError,
    at_least,
    idle_backoff_field,
    valid_optional_topic,
)
from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.mqtt.broker import BROKER_FIELDS, broker_of, client_id_of
from sluice.connectors.mqtt.inbox import Inbox, Received
from sluice.connectors.mqtt.subscriptions import (
    Rule,
    filters_problem,
    route_of,
    routes,
    rules_problem,
    shared,
)
from sluice.connectors.positions import Position
from sluice.connectors.source_reads import SourceRead

if TYPE_CHECKING:
    import paho.mqtt.client as paho
    import pyarrow as pa

    from sluice.connectors.mqtt.session import MqttConnection

log = logging.getLogger(__name__)

#: MQTT topics whose route is remembered at most (devices x topics; forgotten all at once past it)
MAX_ROUTED_TOPICS: Final = 100_000
#: How many tasks share the filters (each subscribes through ``$share/<group>/``).
TASK_COUNT_KEY: Final = "mqtt.task.count"

SOURCE_FIELDS: Final = (
    *BROKER_FIELDS,
    ConfigField("topic", str, "", doc="RocketMQ topic of the filters without a rule",
                validator=valid_optional_topic, aliases=("connect.topicname",)),
    ConfigField("mqtt.topics", list[str], [], doc="topic filters, comma-separated ('+' and '#' allowed)",
                validator=filters_problem, aliases=("sourceTopic",)),
    ConfigField("mqtt.topic.rules", str, "", doc="'filter=>topic;...': where each filter's messages go",
                validator=rules_problem),
    ConfigField("mqtt.qos", int, 1, choices=(0, 1, 2), doc="subscription QoS (1 or 2: nothing lost)"),
    ConfigField("mqtt.session.expiry.s", int, 7 * 24 * 3600, validator=at_least(0),
                doc="MQTT 5: how long the broker keeps the session while the task is away"),
    ConfigField("mqtt.shared.group", str, "", doc="shared subscription group (default: the connector's "
                "name when tasks.max > 1)"),
    ConfigField("mqtt.key", str, "topic", choices=("topic", "none"), doc="the record key: the MQTT topic, "
                "or none"),
    ConfigField("mqtt.replay.wait.ms", int, 10_000, validator=at_least(0), doc="how long a batch re-run "
                "after a crash waits for the broker to deliver its messages again"),
    idle_backoff_field(100, "100 ms: MQTT messages are wanted in RocketMQ within a second"),
    ConfigField("poll.interval.ms", int, 50, validator=at_least(0), doc="wait between empty batches"),
)  # fmt: skip


def _group(config: Mapping[str, Any]) -> str:
    group = str(config.get("mqtt.shared.group") or "")
    if group or int(config.get(TASK_COUNT_KEY) or 1) <= 1:
        return group
    return re.sub(r"[^A-Za-z0-9_-]", "_", str(config.get("name") or "sluice"))


class MqttSourceConnector(SourceConnector):
    """See the module docstring."""

    plugin_name = "mqtt-source"
    config_def = ConfigDef(SOURCE_FIELDS)

    def validate(self, raw_config: Mapping[str, Any]) -> list[FieldError]:
        errors = super().validate(raw_config)
        if errors:
            return errors
        parsed = self.parse(raw_config)
        try:
            routes(parsed["mqtt.topics"], parsed["mqtt.topic.rules"], parsed["topic"])
        except ValueError as exc:
            name = str(raw_config.get("name") or "")
            errors.append(FieldError("mqtt.topics", f"connector {name!r}: field 'mqtt.topics': {exc}"))
        return errors

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        """``tasks.max`` tasks, sharing every filter (a shared subscription when more than one)."""
        return [{**config, TASK_COUNT_KEY: str(max_tasks)} for _ in range(max_tasks)]


class MqttSourceTask(SourceTask):
    """See the module docstring."""

    #: a re-run reads what the broker delivers again, not the same records by number: it sends
    #: them all (at least once) rather than leave out by number what an earlier attempt sent
    replays_exactly: ClassVar[bool] = False
    #: its read subscribes a persistent session on the broker
    previewable: ClassVar[bool] = False

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        super().__init__(config, task_id)
        self._rules: list[Rule] = routes(config["mqtt.topics"], config["mqtt.topic.rules"], config["topic"])
        self._partitions = [f"task{task_id}:{r.topic_filter}" for r in self._rules]
        self._qos = int(config["mqtt.qos"])
        self._key_is_topic = config["mqtt.key"] == "topic"
        self._replay_wait_s = int(config["mqtt.replay.wait.ms"]) / 1000
        self._inbox = Inbox(len(self._rules))
        self._connection: MqttConnection | None = None
        #: acknowledgements of committed messages that found the connection down, by packet id: the
        #: broker hands those messages again when it is back, and they are acknowledged then
        self._owed: dict[int, int] = {}
        self._owed_lock = threading.Lock()
        #: each MQTT topic's route, found once (a device publishes to the same topic again and again)
        self._routes: dict[str, int | None] = {}

    # -- the connection -----------------------------------------------------------------------

    def _started(self, bases: Mapping[str, int]) -> MqttConnection:
        """The connection, started on first use once every route is numbered from ``bases``."""
        if self._connection is None:
            from sluice.connectors.mqtt.session import MqttConnection

            for i, p in enumerate(self._partitions):
                self._inbox.rebase(i, bases.get(p, 0))
            group = _group(self.config)
            self._connection = MqttConnection(
                broker_of(self.config, client_id_of(self.name, self.task_id, "source")),
                persistent=True,
                session_expiry_s=int(self.config["mqtt.session.expiry.s"]),
                subscriptions=[(shared(r.topic_filter, group), self._qos) for r in self._rules],
                on_message=self._received,
                on_new_session=self._new_session,
                manual_ack=True,
            )
            self._connection.start()
        self._connection.check()
        return self._connection

    def _new_session(self) -> None:
        """No session on the broker (the first connection, or the old one expired): packet ids
        held or owed mean nothing there."""
        self._inbox.forget_ids()
        with self._owed_lock:
            self._owed.clear()

    def _ack(self, mid: int, qos: int) -> None:
        """Acknowledge a committed message, or owe it while the connection is down (paho drops
        what it is asked to send then)."""
        assert self._connection is not None
        if self._connection.connected:
            self._connection.client.ack(mid, qos)
            return
        with self._owed_lock:
            self._owed[mid] = qos

    def _received(self, msg: paho.MQTTMessage) -> None:
        """paho's network thread: number the message on its route (acknowledged at commit)."""
        if msg.dup and msg.qos:
            with self._owed_lock:
                owed = self._owed.pop(msg.mid, None)
            if owed is not None:  # committed already: its acknowledgement was owed, and goes now
                self._ack(msg.mid, msg.qos)
                return
        route = self._routes.get(msg.topic, -1)
        if route == -1:
            if len(self._routes) > MAX_ROUTED_TOPICS:
                self._routes.clear()
            route = self._routes[msg.topic] = route_of(self._rules, msg.topic)
        if route is None:  # a retained or overlapping delivery no rule asked for
            if msg.qos:
                self._ack(msg.mid, msg.qos)
            return
        payload, properties = bytes(msg.payload), _properties(msg)
        self._inbox.put(
            route, msg.topic, payload, msg.qos, msg.mid, bool(msg.retain), properties, bool(msg.dup)
        )

    def waiting_for(self) -> str:
        return self._connection.waiting_for() if self._connection is not None else ""

    # -- positions ----------------------------------------------------------------------------

    def partitions(self) -> list[str]:
        return list(self._partitions)

    def topic_of(self, partition: str) -> str:
        return self._rules[self._partitions.index(partition)].topic

    def topics(self) -> list[str]:
        return sorted({r.topic for r in self._rules})

    def latest_positions(self, committed: Mapping[str, Position]) -> dict[str, Position]:
        self._started({p: pos.offset for p, pos in committed.items()})
        return {p: Position((self._inbox.end(i),)) for i, p in enumerate(self._partitions)}

    def earliest_positions(self) -> dict[str, Position]:
        return {p: Position((self._inbox.first(i),)) for i, p in enumerate(self._partitions)}

    def read(self, ranges: Sequence[PartitionRange]) -> SourceRead:
        self._started({r.partition: r.start.offset for r in ranges})
        tables = []
        for r in ranges:
            route = self._partitions.index(r.partition)
            got = self._inbox.take(route, r.start.offset, r.end.offset, self._replay_wait_s)
            if len(got) < r.end.offset - r.start.offset:
                log.warning(
                    "connector %s: %s: the broker delivered %d of the %d messages of a batch re-run; "
                    "the rest were acknowledged or lost by the broker (its session expired?)",
                    self.name, r.partition, len(got), r.end.offset - r.start.offset,
                )  # fmt: skip
            if got:
                tables.append(_records(r.partition, self._rules[route].topic, got, self._key_is_topic))
        return SourceRead(tables=tuple(tables))

    def committed(self, plan: BatchPlan) -> None:
        """Acknowledge the committed batch's messages to the broker (PUBACK; PUBREC for QoS 2)."""
        if self._connection is None:
            return
        for r in plan.ranges:
            if r.partition in self._partitions:
                for m in self._inbox.release(self._partitions.index(r.partition), r.end.offset):
                    if m.qos and m.mid:  # mid 0: delivered in a session that is gone
                        self._ack(m.mid, m.qos)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()


def _properties(msg: paho.MQTTMessage) -> tuple[tuple[str, str], ...]:
    """MQTT 5 user properties and content type (none over MQTT 3.1.1)."""
    props = getattr(msg, "properties", None)
    if props is None:
        return ()
    pairs = [(str(k), str(v)) for k, v in getattr(props, "UserProperty", []) or []]
    content_type = getattr(props, "ContentType", None)
    if content_type:
        pairs.append(("mqtt.content.type", str(content_type)))
    return tuple(pairs)


def _records(partition: str, topic: str, got: list[Received], key_is_topic: bool) -> pa.Table:
    import numpy as np
    import pyarrow as pa

    from sluice.connectors.source_reads import record_table

    topics = [m.topic for m in got]
    names: list[str] = []
    values: list[str] = []
    counts = np.empty(len(got), np.int32)
    for i, m in enumerate(got):
        names += ("mqtt.topic", "mqtt.qos", "mqtt.retain")
        values += (m.topic, _QOS[m.qos], "true" if m.retain else "false")
        for k, v in m.properties:
            names.append(k)
            values.append(v)
        counts[i] = 3 + len(m.properties)
    offsets = np.zeros(len(got) + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    headers = pa.MapArray.from_arrays(
        pa.array(offsets), pa.array(names, pa.string()), pa.array(values, pa.string())
    )
    return record_table(
        partition,
        [m.seq for m in got],
        [m.payload for m in got],
        topic=topic,
        keys=topics if key_is_topic else None,
        headers=headers,
        timestamps=pa.array([m.at_ms * 1000 for m in got], pa.timestamp("us", tz="UTC")),
        value_type=pa.binary(),
    )


_QOS: Final = ("0", "1", "2")

MqttSourceConnector.task_class = MqttSourceTask
