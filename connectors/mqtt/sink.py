"""``mqtt-sink``: RocketMQ topics published to an MQTT broker.

RocketMQ Connect's ``org.apache.rocketmq.connect.mqtt.connector.MqttSinkConnector`` keys are
accepted (``mqttBrokerUrl``, ``mqttAccessKey``, ``mqttSecretKey``, ``sinkTopic``,
``connect.topicnames``); docs/mqtt.md has the mapping.

Each record is published at ``mqtt.qos`` with ``mqtt.retain``: its value's bytes as the payload
(binary as it is, text as UTF-8, structs as JSON; a null value is an empty payload, which clears a
retained message), to the MQTT topic named by the record's ``mqtt.topic.property`` header when it
has one, else by the ``mqtt.topic`` template (``${topic}``: the RocketMQ topic, ``${key}``: the
record's key). Records are published in the batch's order on one connection, so each key keeps its
order. ``write`` returns only once every QoS 1 message has its PUBACK and every QoS 2 message its
PUBCOMP, so positions are committed only after that. **At least once**: a batch that fails part way
is published again whole.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from sluice.connectors.api import Delivery, SinkConnector, SinkTask
from sluice.connectors.config import ConfigDef, ConfigField, at_least
from sluice.connectors.model import BatchPlan
from sluice.connectors.mqtt.broker import BROKER_FIELDS, broker_of, client_id_of
from sluice.connectors.records import RecordError, position

if TYPE_CHECKING:
    import pyarrow as pa

    from sluice.connectors.mqtt.session import MqttConnection

_PLACEHOLDER: Final = re.compile(r"\$\{(topic|key)\}")
#: Publishes waiting for their acknowledgement at most. Why so few: paho looks through every queued
#: publish on each acknowledgement (to send the next), so a batch queued whole costs time quadratic
#: in its size (1,400 msgs/s for batches of 20,000, measured); and packet ids are 16 bits.
MAX_OUTSTANDING: Final = 1_000


def template_problem(value: Any) -> str | None:
    """Validator of ``mqtt.topic``: a topic name (no wildcards) with ``${topic}``/``${key}``."""
    text = str(value)
    if not text:
        return "an empty MQTT topic"
    if "+" in text or "#" in text:
        return f"{text!r}: an MQTT topic to publish to has no wildcards ('+', '#')"
    left = _PLACEHOLDER.sub("", text)
    if "${" in left:
        return f"{text!r}: only ${{topic}} and ${{key}} are replaced"
    return None


SINK_FIELDS: Final = (
    *BROKER_FIELDS,
    ConfigField("mqtt.topic", str, "${topic}", doc="MQTT topic to publish to: ${topic} is the RocketMQ "
                "topic, ${key} the record's key", validator=template_problem, aliases=("sinkTopic",)),
    ConfigField("mqtt.topic.property", str, "", doc="a message property naming each record's MQTT topic "
                "(records without it use mqtt.topic)"),
    ConfigField("mqtt.qos", int, 1, choices=(0, 1, 2)),
    ConfigField("mqtt.retain", bool, False, doc="publish as retained messages"),
    ConfigField("mqtt.publish.timeout.ms", int, 30_000, validator=at_least(1),
                doc="how long a batch waits for the broker's acknowledgements"),
)  # fmt: skip


class MqttSinkTask(SinkTask):
    """See the module docstring."""

    delivery = Delivery.AT_LEAST_ONCE

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        super().__init__(config, task_id)
        self._template = str(config["mqtt.topic"])
        self._property = str(config["mqtt.topic.property"])
        self._qos = int(config["mqtt.qos"])
        self._retain = bool(config["mqtt.retain"])
        self._timeout_s = int(config["mqtt.publish.timeout.ms"]) / 1000
        self._connection: MqttConnection | None = None

    def _started(self) -> MqttConnection:
        if self._connection is None:
            from sluice.connectors.mqtt.session import MqttConnection

            self._connection = MqttConnection(
                broker_of(self.config, client_id_of(self.name, self.task_id, "sink")), persistent=False
            )
            self._connection.start()
        self._connection.check()
        return self._connection

    def write(self, records: pa.Table, plan: BatchPlan) -> None:
        if not records.num_rows:
            return
        connection = self._started()
        if not connection.wait_connected(self._timeout_s):
            connection.check()
            raise ConnectionError(f"connector {self.name}: {connection.waiting_for()}")
        rows = zip(
            records.column("topic").to_pylist(), records.column("partition").to_pylist(),
            records.column("offset").to_pylist(), _keys(records.column("key")),
            records.column("headers").to_pylist(), payloads(records.column("value")).to_pylist(), strict=True,
        )  # fmt: skip
        pending: deque[Any] = deque()
        for topic, partition, offset, key, headers, payload in rows:
            target = dict(headers or ()).get(self._property) if self._property else None
            target = target or self._template.replace("${topic}", topic or "").replace("${key}", key or "")
            if not target or "+" in target or "#" in target:
                raise RecordError(
                    f"connector {self.name}: record at {position(topic, partition, offset)}: "
                    f"{target!r} is not an MQTT topic to publish to"
                )
            if len(pending) >= MAX_OUTSTANDING:
                self._acknowledged(pending.popleft(), connection)
            pending.append(connection.client.publish(target, payload, qos=self._qos, retain=self._retain))
        while pending:  # PUBACK / PUBCOMP for every message before the positions commit
            self._acknowledged(pending.popleft(), connection)

    def _acknowledged(self, info: Any, connection: MqttConnection) -> None:
        """Wait for one publish's acknowledgement; a batch the broker did not take fails whole."""
        try:
            info.wait_for_publish(self._timeout_s)
        except (RuntimeError, ValueError) as exc:  # not connected, or not queued
            connection.check()
            raise ConnectionError(f"connector {self.name}: {connection.broker.describe}: {exc}") from None
        if not info.is_published() and self._qos:
            connection.check()
            raise ConnectionError(
                f"connector {self.name}: {connection.broker.describe} did not acknowledge a publish "
                f"within {self._timeout_s:g} s; the batch is published again"
            )

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()


def _keys(column: pa.ChunkedArray) -> list[str | None]:
    import pyarrow as pa

    if pa.types.is_binary(column.type):
        return [None if k is None else k.decode("utf-8", "replace") for k in column.to_pylist()]
    return [None if k is None else str(k) for k in column.to_pylist()]


def payloads(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Each value's payload bytes: binary as it is, text as UTF-8, structs as JSON (as the file sink
    writes its lines); null as an empty payload."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from sluice.connectors.file.sink import value_line

    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    lines = value_line(values)
    return pc.if_else(pc.is_null(values), pa.scalar(b"", pa.binary()), lines)


class MqttSinkConnector(SinkConnector):
    """See the module docstring."""

    plugin_name = "mqtt-sink"
    task_class = MqttSinkTask
    config_def = ConfigDef(SINK_FIELDS)
