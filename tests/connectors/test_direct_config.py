"""A direct pipeline's config (connectors.direct): each side's keys, task class aliases, task
configs and secret fields, as RocketMQ Connect's users write them."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.activities.validation import secret_fields, validate_config
from sluice.connectors.direct import (
    SINK_READS_NO_TOPIC,
    direct_chain,
    direct_sides,
    direct_task_config,
    is_direct,
    task_plugin,
)

BASE = {
    "connector.direct.enable": "true",
    "source.task.class": "io.confluent.connect.jdbc.source.JdbcSourceTask",
    "sink.task.class": "io.confluent.connect.jdbc.sink.JdbcSinkTask",
}


@pytest.mark.parametrize(
    ("given", "source", "sink"),
    [
        pytest.param(  # unprefixed to both; prefixed to one side, stripped
            {"name": "d", "batch.max.records": "50", "source.mode": "bulk", "sink.insert.mode": "upsert"},
            {"name": "d", "batch.max.records": "50", "mode": "bulk", "connector.class": "jdbc-source"},
            {
                "name": "d",
                "batch.max.records": "50",
                "insert.mode": "upsert",
                "connector.class": "jdbc-sink",
                **SINK_READS_NO_TOPIC,
            },  # fmt: skip
            id="shared-and-own",
        ),
        pytest.param(  # a prefixed key wins over the same unprefixed key, on its side only
            {"connection.url": "a", "sink.connection.url": "b", "sink.topics": "t"},
            {"connection.url": "a", "connector.class": "jdbc-source"},
            {"connection.url": "b", "connector.class": "jdbc-sink", "topics": "t"},
            id="prefixed-wins",
        ),
        pytest.param(  # the pipeline's own keys go to neither side
            {"connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector"},
            {"connector.class": "jdbc-source"},
            {"connector.class": "jdbc-sink", **SINK_READS_NO_TOPIC},
            id="pipeline-keys",
        ),
    ],
)
def test_each_side_gets_its_keys(given: dict[str, Any], source: dict[str, Any], sink: dict[str, Any]) -> None:
    sides = direct_sides({**BASE, **given})
    assert (sides.source, sides.sink, sides.missing) == (source, sink, ())


@pytest.mark.parametrize(
    ("task_class", "plugin"),
    [
        ("io.confluent.connect.jdbc.source.JdbcSourceTask", "jdbc-source"),
        ("org.apache.rocketmq.connect.jdbc.sink.JdbcSinkTask", "jdbc-sink"),
        ("io.debezium.connector.mysql.MySqlConnectorTask", "mysql-cdc"),
        (" file-sink ", "file-sink"),  # Sluice's own plugin names
        ("my_pkg.tasks:Source", "my_pkg.tasks:Source"),  # a plugin path, resolved as connector classes are
    ],
)
def test_task_classes_name_the_connector_that_runs_them(task_class: str, plugin: str) -> None:
    assert task_plugin(task_class) == plugin


def test_transforms_run_once_each_source_side_then_pipeline_then_sink_side() -> None:
    config = {
        **BASE,
        "transforms": "p", "transforms.p.type": "RegexRouter",
        "transforms.p.regex": "a", "transforms.p.replacement": "b",
        "source.transforms": "s", "source.transforms.s.type": "HoistField$Value",
        "source.transforms.s.field": "v",
        "sink.transforms": "k", "sink.transforms.k.type": "ExtractField$Value",
        "sink.transforms.k.field": "v",
    }  # fmt: skip
    sides = direct_sides(config)
    assert sides.source["transforms"] == "s"
    assert sides.sink["transforms"] == "k" and sides.chain["transforms"] == "p"
    assert [t.alias for t in direct_chain(sides)] == ["s", "p", "k"]


def test_a_missing_task_class_is_named() -> None:
    config = {"connector.direct.enable": "true", "source.task.class": "file-source"}
    assert direct_sides(config).missing == ("sink.task.class",)
    result = validate_config("d", config)
    assert result.errors == [
        "connector 'd': field 'sink.task.class' is required when connector.direct.enable=true"
    ]


def test_is_direct_reads_the_flag_as_rocketmq_connect_does() -> None:
    assert is_direct({"connector.direct.enable": "True"}) and not is_direct(
        {"connector.direct.enable": "false"}
    )
    assert not is_direct({})


def test_a_task_config_holds_each_side_canonical_and_prefixed() -> None:
    config = {**BASE, "table.whitelist": "a,b", "batch.max.rows": "9", "transforms": "r", "sink.x": "1"}
    source_task = {"connector.class": "jdbc-source", "tables": "a", "batch.max.records": "9"}
    task = direct_task_config(config, source_task, {"connector.class": "jdbc-sink", "x": "1"})
    assert task == {
        **BASE, "transforms": "r", "source.tables": "a", "source.batch.max.records": "9", "sink.x": "1",
    }  # fmt: skip
    sides = direct_sides(task)
    assert sides.source == {"tables": "a", "batch.max.records": "9", "connector.class": "jdbc-source"}
    assert sides.chain == {"transforms": "r"}


def test_a_file_to_file_pipeline_validates_into_one_task_per_source_task(tmp_path: Any) -> None:
    config = {
        "connector.direct.enable": "true",
        "source.task.class": "org.apache.kafka.connect.file.FileStreamSourceTask",
        "sink.task.class": "org.apache.kafka.connect.file.FileStreamSinkTask",
        "source.file": str(tmp_path / "in.txt"),
        "sink.file": str(tmp_path / "out.txt"),
        "topic": "lines",
        "topics": "lines",
    }
    result = validate_config("d", config)
    assert result.errors == []
    assert (result.kind, result.connector_class) == ("source", "file-source -> file-sink")
    (task,) = result.task_configs
    assert direct_sides(task).source["files"] == str(tmp_path / "in.txt")


def test_a_side_that_is_the_wrong_kind_is_named() -> None:
    config = {**BASE, "sink.task.class": "file-source", "file": "/tmp/x", "topic": "t"}
    config["source.task.class"] = "file-source"
    errors = validate_config("d", config).errors
    assert errors == ["connector 'd': field 'sink.task.class': file-source is not a sink"]


def test_secret_fields_of_both_sides_prefixed_and_not() -> None:
    names = secret_fields({**BASE})
    assert {"connection.password", "source.connection.password", "sink.connection.password"} <= names


def test_a_spark_sql_transform_is_refused_naming_the_field_and_tolerance_is_taken(tmp_path: Any) -> None:
    config = {
        "connector.direct.enable": "true", "source.task.class": "file-source", "sink.task.class": "file-sink",
        "source.file": str(tmp_path / "in.txt"), "sink.file": str(tmp_path / "out.txt"), "topic": "t",
    }  # fmt: skip
    sql = {"transforms": "s", "transforms.s.type": "sql", "transforms.s.filter": "true"}
    (error,) = validate_config("d", {**config, **sql}).errors
    assert error.startswith("connector 'd': field 'transforms': a direct pipeline")
    tolerant = {"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "d_dlq"}
    assert validate_config("d", {**config, **tolerant}).errors == []
