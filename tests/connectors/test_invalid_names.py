"""Names RocketMQ refuses and paths that are directories are rejected when a connector is created,
not found by a task retrying forever (issue 12); a path that becomes a directory later fails the
task with a ConfigError naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.activities.connector_activities import validate_config
from sluice.connectors.api import open_sink_task
from sluice.connectors.config import ConfigError, topic_name_problem
from sluice.connectors.errors import FailureKind, classify
from sluice.connectors.file.sink import LENGTH_STATE, FileSinkConnector
from sluice.connectors.model import BatchPlan
from sluice.connectors.records import Record
from sluice.connectors.source_reads import records_table

REFUSED = ["my.topic", "my topic", "a/b", "ünïcode", "x" * 128, "rmq_sys_mine", "TBW102", "SELF_TEST_TOPIC"]
ACCEPTED = ["orders", "my-topic_2", "%RETRY%group", "a|b", "x" * 127]


@pytest.mark.parametrize("name", REFUSED)
def test_refused_topic_names(name: str) -> None:
    assert topic_name_problem(name)


@pytest.mark.parametrize("name", ACCEPTED)
def test_accepted_topic_names(name: str) -> None:
    assert topic_name_problem(name) is None


def source(**extra: str) -> dict[str, str]:
    return {"connector.class": "file-source", "file": "/tmp/in.txt", "topic": "orders", **extra}


def sink(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"connector.class": "file-sink", "file": str(tmp_path / "out.txt"), "topics": "orders", **extra}


@pytest.mark.parametrize(
    ("config", "field", "shown"),
    [
        (source(topic="my.topic"), "'topic'", "'my.topic'"),
        (source(topic="my topic"), "'topic'", "'my topic'"),
        (source(topic="t" * 128), "'topic'", "t" * 128),
        (source(**{"errors.deadletterqueue.topic.name": "dead.letters"}), "deadletterqueue", "dead.letters"),
    ],
    ids=["dot", "space", "too-long", "dead-letter-topic"],
)
def test_source_topic_names_are_checked_at_create(config: dict[str, str], field: str, shown: str) -> None:
    result = validate_config("src", config)
    assert len(result.errors) == 1, result.errors
    assert field in result.errors[0] and shown in result.errors[0] and "RocketMQ" in result.errors[0]
    assert result.errors[0].startswith("connector 'src':")


def test_every_sink_topic_is_checked(tmp_path: Path) -> None:
    result = validate_config("dst", sink(tmp_path, topics="orders,my.topic"))
    assert len(result.errors) == 1 and "'topics'" in result.errors[0] and "'my.topic'" in result.errors[0]
    assert validate_config("dst", sink(tmp_path, topics="orders, returns")).errors == []


def test_valid_names_pass(tmp_path: Path) -> None:
    assert validate_config("src", source(**{"errors.deadletterqueue.topic.name": "DLQ_src"})).errors == []
    assert validate_config("dst", sink(tmp_path)).errors == []


def test_a_sink_file_that_is_a_directory_is_rejected_at_create(tmp_path: Path) -> None:
    result = validate_config("dst", {**sink(tmp_path), "file": str(tmp_path)})
    assert len(result.errors) == 1
    assert "'file'" in result.errors[0] and "is a directory" in result.errors[0]


def test_a_sink_file_that_became_a_directory_fails_as_configuration(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    task = open_sink_task(FileSinkConnector, sink(tmp_path, name="dst"), 0)
    plan = BatchPlan("dst", 0, 1, (), sink_state={LENGTH_STATE: "0"})
    path.mkdir()  # replaced by a directory after the connector was created
    records = records_table([Record("p", 0, "x")])
    with pytest.raises(ConfigError) as info:
        task.write(records, plan)
    assert "field 'file'" in str(info.value) and "is a directory" in str(info.value)
    assert classify(info.value).kind is FailureKind.CONFIG


def test_a_sink_file_under_a_regular_file_fails_as_configuration(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("not a directory")
    config = {**sink(tmp_path, name="dst"), "file": str(tmp_path / "plain" / "out.txt")}
    task = open_sink_task(FileSinkConnector, config, 0)
    plan = BatchPlan("dst", 0, 1, (), sink_state={LENGTH_STATE: "0"})
    with pytest.raises(ConfigError) as info:
        task.write(records_table([Record("p", 0, "x")]), plan)
    assert "which is not a directory" in str(info.value)
    assert classify(info.value).kind is FailureKind.CONFIG
