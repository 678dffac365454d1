"""Plugin discovery: built-in connectors and transforms, plus third-party ones via entry points.

A third-party package declares, in its pyproject.toml::

    [project.entry-points."sluice.connectors"]
    my-source = "my_pkg.source:MySourceConnector"
    [project.entry-points."sluice.transforms"]
    MyTransform = "my_pkg.transforms:MyTransform"

Names are resolved in this order: built-in short name, entry point name, dotted path
(``package.module:Class`` or ``package.module.Class``). No plugin module is imported until its
name is asked for, so listing plugins stays cheap. The name-to-object machinery is
``sluice.connectors.discovery``; transforms are loaded by ``sluice.connectors.transforms`` (re-exported here).
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib.metadata import EntryPoint
from typing import TYPE_CHECKING, Final

from sluice.connectors.api import Connector
from sluice.connectors.discovery import (
    CONNECTOR_GROUP,
    TRANSFORM_GROUP,
    PluginNotFoundError,
    connector_entry_points,
    import_path,
    looks_like_path,
    transform_entry_points,
)

if TYPE_CHECKING:
    from sluice.connectors.transforms import Transform

__all__ = [
    "BUILTIN_CONNECTORS",
    "CONNECTOR_ALIASES",
    "CONNECTOR_GROUP",
    "TRANSFORM_GROUP",
    "PluginNotFoundError",
    "connector_entry_points",
    "builtin_name",
    "connector_aliases",
    "known_connectors",
    "load_connector_class",
    "load_transform_class",
    "transform_entry_points",
]

BUILTIN_CONNECTORS: Final = {
    "file-source": "sluice.connectors.file.source:FileSourceConnector",
    "file-sink": "sluice.connectors.file.sink:FileSinkConnector",
    "dummy-source": "sluice.connectors.dummy:DummySourceConnector",
    "dummy-sink": "sluice.connectors.dummy:DummySinkConnector",
    "postgres-sink": "sluice.connectors.postgres.sink:PostgresSinkConnector",
    "jdbc-source": "sluice.connectors.jdbc.source:JdbcSourceConnector",
    "jdbc-sink": "sluice.connectors.jdbc.sink:JdbcSinkConnector",
    "postgres-cdc": "sluice.connectors.cdc.postgres.source:PostgresCdcConnector",
    "mysql-cdc": "sluice.connectors.cdc.mysql.source:MySqlCdcConnector",
    "opensearch-sink": "sluice.connectors.opensearch.sink:OpenSearchSinkConnector",
    "delta-sink": "sluice.connectors.lake.sink:DeltaSinkConnector",
    "iceberg-sink": "sluice.connectors.lake.sink:IcebergSinkConnector",
    "rocketmq-replicator": "sluice.connectors.replicator.source:ReplicatorSourceConnector",
    "rocketmq-replicator-checkpoint": "sluice.connectors.replicator.checkpoint:ReplicatorCheckpointConnector",
    "rocketmq-replicator-heartbeat": "sluice.connectors.replicator.heartbeat:ReplicatorHeartbeatConnector",
    "mqtt-source": "sluice.connectors.mqtt.source:MqttSourceConnector",
    "mqtt-sink": "sluice.connectors.mqtt.sink:MqttSinkConnector",
}

#: Connector class names from Kafka Connect's and RocketMQ Connect's configs, and the built-in
#: connector each one runs (docs/connectors.md, "Aliases"): a user's existing file runs
#: unchanged.
CONNECTOR_ALIASES: Final = {
    "org.apache.kafka.connect.file.FileStreamSourceConnector": "file-source",
    "FileStreamSource": "file-source",
    "org.apache.kafka.connect.file.FileStreamSinkConnector": "file-sink",
    "FileStreamSink": "file-sink",
    "org.apache.rocketmq.connect.file.FileSourceConnector": "file-source",
    "org.apache.rocketmq.connect.file.FileSinkConnector": "file-sink",
    "io.confluent.connect.jdbc.JdbcSourceConnector": "jdbc-source",
    "org.apache.rocketmq.connect.jdbc.connector.JdbcSourceConnector": "jdbc-source",
    "io.confluent.connect.jdbc.JdbcSinkConnector": "jdbc-sink",
    "org.apache.rocketmq.connect.jdbc.connector.JdbcSinkConnector": "jdbc-sink",
    "io.debezium.connector.postgresql.PostgresConnector": "postgres-cdc",
    "org.apache.rocketmq.connect.debezium.postgres.DebeziumPostgresConnector": "postgres-cdc",
    "io.debezium.connector.mysql.MySqlConnector": "mysql-cdc",
    "org.apache.rocketmq.connect.debezium.mysql.DebeziumMysqlConnector": "mysql-cdc",
    "io.confluent.connect.elasticsearch.ElasticsearchSinkConnector": "opensearch-sink",
    "org.apache.rocketmq.connect.deltalake.connector.DeltalakeSinkConnector": "delta-sink",
    "org.apache.iceberg.connect.IcebergSinkConnector": "iceberg-sink",
    "io.tabular.iceberg.connect.IcebergSinkConnector": "iceberg-sink",
    "org.apache.rocketmq.connect.elasticsearch.connector.ElasticsearchSinkConnector": "opensearch-sink",
    "org.apache.rocketmq.replicator.ReplicatorSourceConnector": "rocketmq-replicator",
    "org.apache.rocketmq.replicator.ReplicatorCheckpointConnector": "rocketmq-replicator-checkpoint",
    "org.apache.rocketmq.replicator.ReplicatorHeartbeatConnector": "rocketmq-replicator-heartbeat",
    "org.apache.rocketmq.connect.mqtt.connector.MqttSourceConnector": "mqtt-source",
    "org.apache.rocketmq.connect.mqtt.connector.MqttSinkConnector": "mqtt-sink",
}


def load_transform_class(
    name: str, known: Iterable[str] = (), extra: Iterable[EntryPoint] | None = None
) -> type[Transform]:
    """``sluice.connectors.transforms.load_transform_class``, imported when asked: the transforms
    are Arrow stages, and listing or validating connectors without transforms loads no pyarrow."""
    from sluice.connectors.transforms import load_transform_class as load

    return load(name, known, extra)


def builtin_name(name: str) -> str:
    """The built-in short name a connector class alias stands for (the name itself otherwise)."""
    return CONNECTOR_ALIASES.get(name.strip(), name.strip())


def known_connectors(extra: Iterable[EntryPoint] | None = None) -> list[str]:
    return sorted({*BUILTIN_CONNECTORS, *connector_entry_points(extra)})


def connector_aliases() -> dict[str, str]:
    """Every accepted class-name alias and the built-in connector it runs."""
    return dict(CONNECTOR_ALIASES)


def _unknown(key: str, extra: Iterable[EntryPoint] | None) -> str:
    return (
        f"unknown connector class {key!r}; known: {', '.join(known_connectors(extra))}, and the Kafka "
        "Connect and RocketMQ Connect class names `sluice plugins` lists (or a 'package.module:Class' path)"
    )


def load_connector_class(name: str, extra: Iterable[EntryPoint] | None = None) -> type[Connector]:
    """The connector class for a short name, entry point name or dotted path; unknown -> clear error."""
    key = builtin_name(name)
    try:
        if key in BUILTIN_CONNECTORS:
            cls = import_path(BUILTIN_CONNECTORS[key])
        # Installed plugins only for other names: listing entry points reads every installed
        # distribution's metadata (tens of ms), and every task attempt loads its class.
        elif key in (eps := connector_entry_points(extra)):
            cls = eps[key].load()
        elif looks_like_path(key):
            cls = import_path(key)
        else:
            raise PluginNotFoundError(_unknown(key, extra))
    except ModuleNotFoundError as exc:
        if exc.name and key.startswith(exc.name) and key[len(exc.name) : len(exc.name) + 1] in (".", ":"):
            # nothing of the path is installed: a class name Sluice does not know, not a broken plugin
            raise PluginNotFoundError(_unknown(key, extra)) from None
        raise PluginNotFoundError(f"connector {key!r} cannot be loaded: {exc}") from exc
    except (ImportError, AttributeError) as exc:
        raise PluginNotFoundError(f"connector {key!r} cannot be loaded: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, Connector)):
        raise PluginNotFoundError(f"connector {key!r} resolves to {cls!r}, which is not a Connector subclass")
    return cls
