"""Direct pipelines: a source task's records written by a sink task, with no topic between them.

RocketMQ Connect's DirectTask, configured as its users write it::

    connector.direct.enable=true
    source.task.class=io.confluent.connect.jdbc.source.JdbcSourceTask
    sink.task.class=io.confluent.connect.jdbc.sink.JdbcSinkTask
    connection.url=...            # unprefixed: both sides
    source.connection.url=...     # source side only (prefix stripped); wins over the unprefixed key
    sink.connection.url=...       # sink side only

A task class is Kafka Connect's or RocketMQ Connect's task class name (``TASK_CLASS_ALIASES``), a
connector class alias, or a Sluice plugin name. Transforms run once each, in the order a record
would meet them through a topic: the source side's (``source.transforms``), the pipeline's
(unprefixed ``transforms``, which go to neither side), then the sink side's (``sink.transforms``).
Each batch runs read → transforms → sink write (activities.direct_runner); the source's positions
are the batch's, committed with the data for a transactional sink (exactly once, e.g. MariaDB →
PostgreSQL), after the write otherwise.

The sink side reads no topic: its records carry the topics their source gives them (a JDBC
source's ``topic.prefix`` + table), which the sink maps to tables as it always does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from sluice.connectors.transforms import Transform

DIRECT_ENABLE: Final = "connector.direct.enable"
SOURCE_TASK_CLASS: Final = "source.task.class"
SINK_TASK_CLASS: Final = "sink.task.class"
SOURCE_PREFIX: Final = "source."
SINK_PREFIX: Final = "sink."
#: What a sink side is given to read when the config names no topic: none is read (a sink's
#: config requires ``topics`` or ``topics.regex``; a direct pipeline's records name their topics).
SINK_READS_NO_TOPIC: Final = {"topics.regex": ".*"}
#: The pipeline's own keys: neither side gets them.
PIPELINE_KEYS: Final = frozenset({DIRECT_ENABLE, SOURCE_TASK_CLASS, SINK_TASK_CLASS, "connector.class"})

#: Kafka Connect's and RocketMQ Connect's task class names, and the built-in connector that runs
#: each (docs/connectors.md, "Direct pipelines").
TASK_CLASS_ALIASES: Final = {
    "io.confluent.connect.jdbc.source.JdbcSourceTask": "jdbc-source",
    "io.confluent.connect.jdbc.sink.JdbcSinkTask": "jdbc-sink",
    "org.apache.rocketmq.connect.jdbc.source.JdbcSourceTask": "jdbc-source",
    "org.apache.rocketmq.connect.jdbc.sink.JdbcSinkTask": "jdbc-sink",
    "org.apache.kafka.connect.file.FileStreamSourceTask": "file-source",
    "org.apache.kafka.connect.file.FileStreamSinkTask": "file-sink",
    "org.apache.rocketmq.connect.file.FileSourceTask": "file-source",
    "org.apache.rocketmq.connect.file.FileSinkTask": "file-sink",
    "io.debezium.connector.mysql.MySqlConnectorTask": "mysql-cdc",
    "io.debezium.connector.postgresql.PostgresConnectorTask": "postgres-cdc",
    "io.confluent.connect.elasticsearch.ElasticsearchSinkTask": "opensearch-sink",
    "org.apache.iceberg.connect.IcebergSinkTask": "iceberg-sink",
    "org.apache.rocketmq.replicator.ReplicatorSourceTask": "rocketmq-replicator",
    "org.apache.rocketmq.connect.mqtt.connector.MqttSourceTask": "mqtt-source",
    "org.apache.rocketmq.connect.mqtt.connector.MqttSinkTask": "mqtt-sink",
}


#: Unprefixed keys of the pipeline's own transform chain (they go to neither side).
CHAIN_KEYS: Final = ("transforms", "predicates")


@dataclass(frozen=True)
class DirectSides:
    """A direct config split into each side's raw config, ``connector.class`` set to the plugin
    that runs the side's task class, and the pipeline's own chain keys; ``missing`` names the
    task-class keys that were not given."""

    source: dict[str, Any]
    sink: dict[str, Any]
    chain: dict[str, Any]
    missing: tuple[str, ...] = ()


def is_direct(config: Mapping[str, Any]) -> bool:
    return str(config.get(DIRECT_ENABLE, "")).strip().lower() == "true"


def task_plugin(task_class: str) -> str:
    """The connector that runs ``task_class`` (an alias, a connector name or path otherwise)."""
    name = task_class.strip()
    return TASK_CLASS_ALIASES.get(name, name)


def direct_sides(config: Mapping[str, Any]) -> DirectSides:
    """Each side's config: its prefixed keys (prefix stripped) over the unprefixed ones; the
    pipeline's own keys and chain go to neither."""
    unprefixed = {k: v for k, v in config.items() if not k.startswith((SOURCE_PREFIX, SINK_PREFIX))}
    chain = {k: v for k, v in unprefixed.items() if k.split(".")[0] in CHAIN_KEYS}
    shared = {k: v for k, v in unprefixed.items() if k not in PIPELINE_KEYS and k not in chain}
    sides: dict[str, dict[str, Any]] = {}
    missing = []
    for prefix, class_key in ((SOURCE_PREFIX, SOURCE_TASK_CLASS), (SINK_PREFIX, SINK_TASK_CLASS)):
        own = {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix) and k != class_key}
        side = {**shared, **own}
        task_class = str(config.get(class_key) or "").strip()
        if not task_class:
            missing.append(class_key)
        side["connector.class"] = task_plugin(task_class)
        if prefix == SINK_PREFIX and not ({"topics", "topics.regex"} & side.keys()):
            side.update(SINK_READS_NO_TOPIC)
        sides[prefix] = side
    return DirectSides(sides[SOURCE_PREFIX], sides[SINK_PREFIX], chain, tuple(missing))


def direct_task_config(
    config: Mapping[str, Any], source_task: Mapping[str, Any], sink_task: Mapping[str, Any]
) -> dict[str, str]:
    """A direct task's config: the pipeline's own keys and chain, and each side's task config as
    its connector made it (canonical names, a source's share of tables or files), prefixed: a task
    config holds no shared key, so each side reads exactly what its validation read."""
    sides = direct_sides(config)
    own = {k: v for k, v in config.items() if k in PIPELINE_KEYS and k != "connector.class"}
    return {
        **own,
        **{k: str(v) for k, v in sides.chain.items()},
        **{
            f"{SOURCE_PREFIX}{k}": str(v)
            for k, v in source_task.items()
            if k not in ("connector.class", "name")
        },
        **{f"{SINK_PREFIX}{k}": str(v) for k, v in sink_task.items() if k not in ("connector.class", "name")},
    }


def direct_chain(sides: DirectSides) -> list[Transform]:
    """The transforms a direct batch runs, in order: the source side's, the pipeline's, the sink
    side's; raises ConfigError listing a chain's problems."""
    from sluice.connectors.transforms import build_chain  # the transforms load pyarrow

    return [t for config in (sides.source, sides.chain, sides.sink) for t in build_chain(config)]


def side_secret_names(side: str, names: frozenset[str]) -> frozenset[str]:
    """A side's secret field names as a direct config may spell them: unprefixed and prefixed."""
    return names | {f"{side}{n}" for n in names}
