"""Configs written for Kafka Connect or RocketMQ Connect run unchanged: keys, class names, converters."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.activities.validation import validate_config
from sluice.connectors.config import ConfigDef, ConfigField
from sluice.connectors.file.sink import FileSinkConnector
from sluice.connectors.file.source import FileSourceConnector
from sluice.connectors.plugins import load_connector_class

FIELDS = ConfigDef(
    (
        ConfigField("tasks.max", int, 1, aliases=("max.tasks",)),
        ConfigField("file", str, "", aliases=("filename",)),
    ),
    owner="connector 'c'",
)


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ({"max.tasks": "3"}, {"tasks.max": "3"}),
        ({"tasks.max": "2", "max.tasks": "2"}, {"tasks.max": "2"}),
        ({"filename": "/a", "other": "x"}, {"file": "/a", "other": "x"}),
        ({"file": "/a"}, {"file": "/a"}),
    ],
)
def test_alias_keys_become_the_field_name(raw: dict[str, Any], canonical: dict[str, Any]) -> None:
    assert FIELDS.canonical(raw) == canonical
    assert FIELDS.validate(raw) == []


def test_alias_and_name_with_different_values_is_an_error_naming_both() -> None:
    errors = FIELDS.validate({"tasks.max": "2", "max.tasks": "3"})
    assert [e.field for e in errors] == ["tasks.max"]
    assert "'tasks.max' and 'max.tasks'" in errors[0].message


def test_parse_keeps_no_alias_key() -> None:
    assert FIELDS.parse({"max.tasks": "4", "filename": "/x"}) == {"tasks.max": 4, "file": "/x"}


@pytest.mark.parametrize(
    ("class_name", "expected"),
    [
        ("org.apache.rocketmq.connect.file.FileSourceConnector", FileSourceConnector),
        ("org.apache.rocketmq.connect.file.FileSinkConnector", FileSinkConnector),
        ("org.apache.kafka.connect.file.FileStreamSourceConnector", FileSourceConnector),
        ("FileStreamSource", FileSourceConnector),
        ("org.apache.kafka.connect.file.FileStreamSinkConnector", FileSinkConnector),
        ("FileStreamSink", FileSinkConnector),
    ],
)
def test_peer_class_names_load_the_builtin(class_name: str, expected: type) -> None:
    assert load_connector_class(class_name) is expected


def test_rocketmq_connect_readme_config_validates_into_canonical_task_configs(tmp_path: Any) -> None:
    """RocketMQ Connect's README file source, verbatim keys: filename, connect.topicname, max.tasks,
    connector-class, and its StringConverter class names."""
    path = tmp_path / "in.txt"
    path.write_text("a\n")
    result = validate_config(
        "fileSourceConnector",
        {
            "connector-class": "org.apache.rocketmq.connect.file.FileSourceConnector",
            "filename": str(path),
            "connect.topicname": "fileTopic",
            "max.tasks": "1",
            "value.converter": "org.apache.rocketmq.connect.runtime.converter.record.StringConverter",
            "key.converter": "org.apache.rocketmq.connect.runtime.converter.record.StringConverter",
        },
    )
    assert result.errors == []
    (task,) = result.task_configs
    assert task["connector.class"] == "org.apache.rocketmq.connect.file.FileSourceConnector"
    assert task["files"] == str(path)
    assert task["topic"] == "fileTopic"
    assert not {"filename", "connect.topicname", "max.tasks", "connector-class"} & set(task)
    parsed = FileSourceConnector().parse(task)
    assert parsed["value.converter"] == "string"


def test_kafka_json_converter_class_is_the_json_converter(tmp_path: Any) -> None:
    out = tmp_path / "out.txt"
    result = validate_config(
        "sink",
        {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "file": str(out),
            "topics": "connect-test",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
        },
    )
    assert result.errors == []
    parsed = FileSinkConnector().parse(result.task_configs[0])
    assert parsed["value.converter"] == "json"


def test_unknown_converter_class_is_refused_naming_the_field() -> None:
    result = validate_config(
        "sink",
        {"connector.class": "FileStreamSink", "file": "/tmp/x", "topics": "t", "value.converter": "a.B"},
    )
    assert any("'value.converter'" in e and "a.B" in e for e in result.errors), result.errors
