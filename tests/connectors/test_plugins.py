"""Plugin discovery: built-ins by short name and path, third-party entry points, clear unknown-name errors."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import Any

import pytest

from sluice.connectors.api import SinkConnector, SourceConnector
from sluice.connectors.dummy import DummySinkConnector, DummySourceConnector
from sluice.connectors.file.sink import FileSinkConnector
from sluice.connectors.file.source import FileSourceConnector
from sluice.connectors.jdbc.sink import JdbcSinkConnector
from sluice.connectors.plugins import (
    CONNECTOR_GROUP,
    TRANSFORM_GROUP,
    PluginNotFoundError,
    known_connectors,
    load_connector_class,
    load_transform_class,
)
from sluice.connectors.transforms import Transform, create_transform, known_transforms
from sluice.connectors.transforms.fields import InsertField


class ThirdPartySource(DummySourceConnector):
    plugin_name = "acme-source"


class ThirdPartyTransform(Transform):
    def apply(self, df: Any) -> Any:
        return df


NOT_A_CONNECTOR = object()
THIRD_PARTY = [
    EntryPoint("acme-source", f"{__name__}:ThirdPartySource", CONNECTOR_GROUP),
    EntryPoint("broken", f"{__name__}:NOT_A_CONNECTOR", CONNECTOR_GROUP),
    EntryPoint("AcmeTransform", f"{__name__}:ThirdPartyTransform", TRANSFORM_GROUP),
]


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("file-source", FileSourceConnector),
        ("file-sink", FileSinkConnector),
        ("dummy-source", DummySourceConnector),
        ("dummy-sink", DummySinkConnector),
        ("sluice.connectors.file.source:FileSourceConnector", FileSourceConnector),
        ("sluice.connectors.file.sink.FileSinkConnector", FileSinkConnector),
        ("connectors.file.sink:FileSinkConnector", FileSinkConnector),  # a path from before sluice.<folder>
        (" dummy-sink ", DummySinkConnector),
        ("jdbc-sink", JdbcSinkConnector),
        ("io.confluent.connect.jdbc.JdbcSinkConnector", JdbcSinkConnector),
        ("org.apache.rocketmq.connect.jdbc.connector.JdbcSinkConnector", JdbcSinkConnector),
    ],
)
def test_builtin_connectors(name: str, cls: type) -> None:
    assert load_connector_class(name) is cls


def test_builtins_have_task_classes() -> None:
    for name in ("file-source", "dummy-source"):
        source = load_connector_class(name)
        assert issubclass(source, SourceConnector) and source.task_class.position_unit in ("records", "bytes")
    for name in ("file-sink", "dummy-sink", "postgres-sink", "jdbc-sink"):
        sink = load_connector_class(name)
        assert issubclass(sink, SinkConnector)


def test_third_party_entry_point() -> None:
    assert load_connector_class("acme-source", extra=THIRD_PARTY) is ThirdPartySource
    assert known_connectors(THIRD_PARTY) == [
        "acme-source",
        "broken",
        "delta-sink",
        "dummy-sink",
        "dummy-source",
        "file-sink",
        "file-source",
        "iceberg-sink",
        "jdbc-sink",
        "jdbc-source",
        "mqtt-sink",
        "mqtt-source",
        "mysql-cdc",
        "opensearch-sink",
        "postgres-cdc",
        "postgres-sink",
        "rocketmq-replicator",
        "rocketmq-replicator-checkpoint",
        "rocketmq-replicator-heartbeat",
    ]
    assert load_transform_class("AcmeTransform", extra=THIRD_PARTY) is ThirdPartyTransform
    assert load_transform_class("AcmeTransform$Key", extra=THIRD_PARTY) is ThirdPartyTransform


def test_unknown_connector_lists_known_names() -> None:
    with pytest.raises(PluginNotFoundError) as info:
        load_connector_class("mongodb-source")
    assert str(info.value) == (
        "unknown connector class 'mongodb-source'; known: delta-sink, dummy-sink, dummy-source, file-sink, "
        "file-source, iceberg-sink, jdbc-sink, jdbc-source, mqtt-sink, mqtt-source, mysql-cdc, "
        "opensearch-sink, postgres-cdc, "
        "postgres-sink, rocketmq-replicator, rocketmq-replicator-checkpoint, rocketmq-replicator-heartbeat, "
        "and the Kafka Connect and RocketMQ Connect class names `sluice plugins` lists "
        "(or a 'package.module:Class' path)"
    )


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("broken", "connector 'broken' resolves to <object"),
        # a class name from another runtime's file (Sluice knows no such module): named with the known
        (
            "no.such.module:Thing",
            "unknown connector class 'no.such.module:Thing'; known: acme-source, broken, delta-sink, ",
        ),
        ("com.example.Nope", "and the Kafka Connect and RocketMQ Connect class names `sluice plugins` lists"),
        (
            "sluice.connectors.file.source:Nope",
            "connector 'sluice.connectors.file.source:Nope' cannot be loaded",
        ),
        ("sluice.connectors.config:ConfigDef", "is not a Connector subclass"),
    ],
)
def test_bad_connector_names(name: str, message: str) -> None:
    with pytest.raises(PluginNotFoundError, match=None) as info:
        load_connector_class(name, extra=THIRD_PARTY)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("name", "target"),
    [
        ("InsertField$Value", "value"),
        ("InsertField$Key", "key"),
        ("InsertField", "value"),
        ("insert-field", "value"),
        ("org.apache.kafka.connect.transforms.InsertField$Value", "value"),
    ],
)
def test_transform_names(name: str, target: str) -> None:
    transform = create_transform(name)
    assert isinstance(transform, InsertField)
    assert transform.target == target


def test_unknown_transform_lists_known() -> None:
    with pytest.raises(LookupError) as info:
        create_transform("Nope")
    message = str(info.value)
    assert message.startswith("unknown transform type 'Nope'; known: ")
    for name in ("Cast$Value", "Filter", "RegexRouter", "sql", "ValueToKey", "TimestampConverter$Value"):
        assert name in message
    assert "Filter" in known_transforms()
