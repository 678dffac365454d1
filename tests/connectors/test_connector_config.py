"""Config validation, parsing and redaction: table-driven, no services needed."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.connectors.config import (
    COMMON_SINK_FIELDS,
    REDACTED,
    ConfigDef,
    ConfigError,
    ConfigField,
    FieldError,
    at_least,
)
from sluice.connectors.file.sink import FileSinkConnector
from sluice.connectors.file.source import FileSourceConnector

DEF = ConfigDef(
    (
        ConfigField("host", str, doc="database host"),
        ConfigField("port", int, 5432, validator=at_least(1)),
        ConfigField("ratio", float, 0.5),
        ConfigField("ssl", bool, False),
        ConfigField("tables", list[str], []),
        ConfigField("mode", str, "bulk", choices=("bulk", "incrementing")),
        ConfigField("password", str, "", secret=True),
    ),
    owner="connector 'pg'",
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            {"host": "db"},
            {
                "host": "db",
                "port": 5432,
                "ratio": 0.5,
                "ssl": False,
                "tables": [],
                "mode": "bulk",
                "password": "",
            },
        ),
        (
            {"host": "db", "port": "6543", "ssl": "TRUE", "tables": "a, b,,c", "ratio": "2"},
            {
                "host": "db",
                "port": 6543,
                "ratio": 2.0,
                "ssl": True,
                "tables": ["a", "b", "c"],
                "mode": "bulk",
                "password": "",
            },
        ),
        (
            {
                "host": "db",
                "port": 1,
                "ssl": True,
                "tables": ["x"],
                "mode": "incrementing",
                "extra.key": "kept",
            },
            {
                "host": "db",
                "port": 1,
                "ratio": 0.5,
                "ssl": True,
                "tables": ["x"],
                "mode": "incrementing",
                "password": "",
                "extra.key": "kept",
            },
        ),
    ],
    ids=["defaults", "strings-converted", "typed-values-and-unknown-key-kept"],
)
def test_parse(raw: dict[str, Any], expected: dict[str, Any]) -> None:
    assert DEF.parse(raw) == expected


@pytest.mark.parametrize(
    ("raw", "errors"),
    [
        ({}, [FieldError("host", "connector 'pg': field 'host' is required (database host)")]),
        (
            {"host": "db", "port": "x"},
            [FieldError("port", "connector 'pg': field 'port': expected an integer, got 'x'")],
        ),
        (
            {"host": "db", "port": "0"},
            [FieldError("port", "connector 'pg': field 'port': must be >= 1, got '0'")],
        ),
        (
            {"host": "db", "ssl": "maybe"},
            [FieldError("ssl", "connector 'pg': field 'ssl': expected a boolean (true/false), got 'maybe'")],
        ),
        (
            {"host": "db", "mode": "stream"},
            [
                FieldError(
                    "mode", "connector 'pg': field 'mode': must be one of bulk, incrementing, got 'stream'"
                )
            ],
        ),
        (
            {"host": "db", "ratio": "abc"},
            [FieldError("ratio", "connector 'pg': field 'ratio': expected a number, got 'abc'")],
        ),
        ({"host": 5}, [FieldError("host", "connector 'pg': field 'host': expected a string, got 5")]),
        (
            {"port": "-1", "ssl": "?"},
            [
                FieldError("host", "connector 'pg': field 'host' is required (database host)"),
                FieldError("port", "connector 'pg': field 'port': must be >= 1, got '-1'"),
                FieldError("ssl", "connector 'pg': field 'ssl': expected a boolean (true/false), got '?'"),
            ],
        ),
    ],
    ids=[
        "missing",
        "not-int",
        "validator",
        "not-bool",
        "choices",
        "not-float",
        "not-str",
        "every-error-at-once",
    ],
)
def test_validate_messages(raw: dict[str, Any], errors: list[FieldError]) -> None:
    assert DEF.validate(raw) == errors
    with pytest.raises(ConfigError) as info:
        DEF.parse(raw)
    assert info.value.errors == errors
    for e in errors:
        assert e.message in str(info.value)


def test_secret_value_never_in_errors_or_redacted_output() -> None:
    secret_def = ConfigDef((ConfigField("token", int, secret=True),), owner="connector 'x'")
    errors = secret_def.validate({"token": "hunter2"})
    assert errors == [
        FieldError("token", f"connector 'x': field 'token': expected an integer, got {REDACTED}")
    ]
    assert DEF.redact({"host": "db", "password": "hunter2", "api.key": "k1", "key.converter": "json"}) == {
        "host": "db",
        "password": REDACTED,
        "api.key": REDACTED,
        "key.converter": "json",
    }


def test_duplicate_field_is_a_definition_error() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        ConfigDef((ConfigField("a"), ConfigField("a")))


@pytest.mark.parametrize(
    ("raw", "fields"),
    [
        ({"connector.class": "file-source", "topic": "t", "file": "/tmp/x"}, []),
        ({"connector.class": "file-source", "topic": "t"}, ["file"]),
        ({"connector.class": "file-source", "topic": "t", "file": "/a", "files": "/b"}, ["file"]),
        ({"connector.class": "file-source", "file": "/a"}, ["topic"]),
        (
            {
                "connector.class": "file-source",
                "topic": "t",
                "file": "/a",
                "tasks.max": "0",
                "value.converter": "avro",
                "data.loss": "ignore",
                "errors.tolerance": "some",
            },
            ["tasks.max", "value.converter", "errors.tolerance", "data.loss"],
        ),
        (
            {
                "connector.class": "file-source",
                "topic": "t",
                "file": "/a",
                "transforms": "x",
                "transforms.x.type": "NoSuchTransform",
            },
            ["transforms.x.type"],
        ),
        (
            {
                "connector.class": "file-source",
                "topic": "t",
                "file": "/a",
                "transforms": "x",
                "transforms.x.type": "Cast$Value",
                "transforms.x.spec": "a:int99",
            },
            ["transforms.x"],
        ),
    ],
    ids=[
        "ok",
        "no-file",
        "file-and-files",
        "no-topic",
        "common-fields",
        "unknown-transform",
        "bad-transform-option",
    ],
)
def test_source_connector_validate(raw: dict[str, str], fields: list[str]) -> None:
    errors = FileSourceConnector().validate({"name": "lines", **raw})
    assert [e.field for e in errors] == fields
    assert all("'lines'" in e.message for e in errors)


def test_sink_common_fields_and_parse() -> None:
    assert "topics" in ConfigDef(COMMON_SINK_FIELDS)
    parsed = FileSinkConnector().parse(
        {
            "connector.class": "file-sink",
            "topics": "a,b",
            "file": "/tmp/o",
            "value.converter.schemas.enable": "true",
        }
    )
    assert parsed["topics"] == ["a", "b"]
    assert parsed["value.converter.schemas.enable"] is True
    assert parsed["tasks.max"] == 1
    assert parsed["data.loss"] == "fail"
    errors = FileSinkConnector().validate({"connector.class": "file-sink"})
    assert [e.message for e in errors] == [
        "connector 'file-sink': field 'file' is required (path of the file to append to)",
        "connector 'file-sink': set exactly one of 'topics' and 'topics.regex' (neither is set)",
    ]
