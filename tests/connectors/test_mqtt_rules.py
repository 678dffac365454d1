"""The MQTT connectors' pure parts, by tables: topic filters as the MQTT specification writes them,
matching, rules from filters to RocketMQ topics, broker URLs, RocketMQ Connect's HMAC password, the
sink's topic template and payloads, and the source's inbox (numbering, re-run waits, release)."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

from sluice.activities.validation import validate_config
from sluice.connectors.mqtt.broker import broker_of, hmac_password, parse_url
from sluice.connectors.mqtt.inbox import Inbox
from sluice.connectors.mqtt.sink import payloads, template_problem
from sluice.connectors.mqtt.subscriptions import Rule, filter_problem, matches, parse_rules, route_of, routes


@pytest.mark.parametrize(
    ("topic_filter", "problem"),
    [
        ("sensors/+/temp", None),
        ("sensors/#", None),
        ("#", None),
        ("+", None),
        ("a//b", None),
        ("", "empty"),
        ("sensors/#/temp", "'#' must be a whole level, and the last one"),
        ("sensors/te#", "'#' must be a whole level"),
        ("sensors/te+", "'+' must be a whole level"),
        ("$share/g/sensors/#", "without $share/"),
        ("a\x00b", "NUL"),
    ],
)
def test_topic_filters(topic_filter: str, problem: str | None) -> None:
    got = filter_problem(topic_filter)
    assert (got is None) if problem is None else (got is not None and problem in got)


@pytest.mark.parametrize(
    ("topic_filter", "topic", "matched"),
    [
        ("sensors/+/temp", "sensors/a1/temp", True),
        ("sensors/+/temp", "sensors/a1/hum", False),
        ("sensors/+/temp", "sensors/a1/temp/x", False),
        ("sensors/#", "sensors", True),  # '#' matches the parent level too
        ("sensors/#", "sensors/a/b/c", True),
        ("#", "$SYS/broker/load", False),  # $-topics only by filters naming them
        ("$SYS/#", "$SYS/broker/load", True),
        ("+/x", "/x", True),
        ("a/b", "a/b", True),
        ("a/b", "a/b/", False),
    ],
)
def test_matching(topic_filter: str, topic: str, matched: bool) -> None:
    assert matches(topic_filter, topic) is matched


def test_rules_route_by_the_first_matching_filter() -> None:
    rules = routes(["alerts/#", "sensors/+/temp"], "sensors/+/temp=>TEMPS; sensors/#=>SENSORS", "OTHER")
    assert rules == [Rule("sensors/+/temp", "TEMPS"), Rule("sensors/#", "SENSORS"), Rule("alerts/#", "OTHER")]
    assert route_of(rules, "sensors/k/temp") == 0
    assert route_of(rules, "sensors/k/hum") == 1
    assert route_of(rules, "alerts/fire") == 2
    assert route_of(rules, "other") is None


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("a/+=>T;b", "'b' is not filter=>topic"),
        ("a/#/b=>T", "'#' must be a whole level"),
        ("a/b=>bad topic", "RocketMQ topic names allow only"),
    ],
)
def test_bad_rules_name_the_part(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_rules(text)


def test_a_filter_with_nowhere_to_go_is_refused() -> None:
    with pytest.raises(ValueError, match="'a/#' has no rule and 'topic' is not set"):
        routes(["a/#"], "", "")
    with pytest.raises(ValueError, match="no topic filter"):
        routes([], "", "T")


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        ("tcp://127.0.0.1:11883", ("127.0.0.1", 11883, False)),
        ("mqtt://broker", ("broker", 1883, False)),
        ("ssl://broker", ("broker", 8883, True)),
        ("mqtts://broker:18883", ("broker", 18883, True)),
        ("http://broker", "not an MQTT broker URL"),
        ("tcp://:1883", "names no host"),
        ("tcp://h:port", "not a number"),
    ],
)
def test_broker_urls(url: str, parsed: tuple[str, int, bool] | str) -> None:
    if isinstance(parsed, str):
        with pytest.raises(ValueError, match=parsed):
            parse_url(url)
    else:
        assert parse_url(url) == parsed


def test_rocketmq_connects_hmac_password_sits_behind_its_switch() -> None:
    # RFC 2202 test case 2: HMAC-SHA1(key "Jefe", "what do ya want for nothing?")
    assert hmac_password("what do ya want for nothing?", "Jefe") == "7/zfauXrL6LSdBbV8YTfnCWafHk="
    config = {"mqtt.broker.url": "tcp://h:1", "mqtt.username": "ak", "mqtt.password": "Jefe"}
    assert broker_of(config, "c1").password == "Jefe"
    hashed = broker_of(
        {**config, "mqtt.password.hmac": True, "mqtt.client.id": "what do ya want for nothing?"}, "c"
    )
    assert (
        hashed.password == "7/zfauXrL6LSdBbV8YTfnCWafHk="
        and hashed.client_id == "what do ya want for nothing?"
    )


def test_rocketmq_connect_configs_run_unchanged() -> None:
    source = validate_config("m", {
        "connector.class": "org.apache.rocketmq.connect.mqtt.connector.MqttSourceConnector",
        "mqttBrokerUrl": "tcp://127.0.0.1:11883", "mqttAccessKey": "sluice", "mqttSecretKey": "s3cret",
        "sourceTopic": "sensors/#", "connect.topicname": "SENSORS",
    })  # fmt: skip
    assert not source.errors, source.errors
    sink = validate_config("n", {
        "connector.class": "org.apache.rocketmq.connect.mqtt.connector.MqttSinkConnector",
        "mqttBrokerUrl": "tcp://127.0.0.1:11883", "mqttAccessKey": "sluice", "mqttSecretKey": "s3cret",
        "sinkTopic": "out/${key}", "connect.topicnames": "SENSORS",
    })  # fmt: skip
    assert not sink.errors, sink.errors


@pytest.mark.parametrize(
    ("key", "value", "error"),
    [
        ("mqtt.topics", "a/#/b", "field 'mqtt.topics'"),
        ("mqtt.qos", "3", "field 'mqtt.qos'"),
        ("mqtt.broker.url", "http://h", "field 'mqtt.broker.url'"),
        ("mqtt.topic.rules", "a=>", "field 'mqtt.topic.rules'"),
    ],
)
def test_bad_keys_are_refused_at_create_naming_the_key(key: str, value: str, error: str) -> None:
    config = {
        "connector.class": "mqtt-source", "mqtt.broker.url": "tcp://127.0.0.1:1", "mqtt.topics": "a/#",
        "topic": "T", key: value,
    }  # fmt: skip
    result = validate_config("m", config)
    assert any(error in e for e in result.errors), result.errors


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("${topic}", None),
        ("out/${key}/x", None),
        ("out/+", "no wildcards"),
        ("", "empty"),
        ("${nope}", "only"),
    ],
)
def test_sink_topic_templates(template: str, problem: str | None) -> None:
    got = template_problem(template)
    assert (got is None) if problem is None else (got is not None and problem in got)


def test_payloads_are_the_values_bytes() -> None:
    assert payloads(pa.array([b"\x00\xff", None], pa.binary())).to_pylist() == [b"\x00\xff", b""]
    assert payloads(pa.array(["é", None])).to_pylist() == ["é".encode(), b""]
    assert payloads(pa.array([{"a": 1}])).to_pylist() == [b'{"a":1}']


def test_the_inbox_numbers_from_the_committed_position_and_releases_what_committed() -> None:
    inbox = Inbox(1)
    inbox.rebase(0, 100)
    for i in range(3):
        inbox.put(0, "t", bytes([i]), 1, 7 + i, False, ())
    assert (inbox.first(0), inbox.end(0), inbox.held()) == (100, 103, 3)
    assert [m.payload for m in inbox.take(0, 101, 103, 0)] == [b"\x01", b"\x02"]
    assert [m.mid for m in inbox.release(0, 102)] == [7, 8]
    assert (inbox.first(0), inbox.held()) == (102, 1)


def test_a_rerun_waits_for_messages_delivered_again_then_numbers_past_its_range() -> None:
    inbox = Inbox(1)
    inbox.rebase(0, 10)
    threading.Timer(0.2, lambda: [inbox.put(0, "t", b"x", 1, i, False, ()) for i in range(2)]).start()
    started = time.monotonic()
    got = inbox.take(0, 10, 12, 5)
    assert [m.seq for m in got] == [10, 11] and time.monotonic() - started < 4
    # fewer than the range: past the wait, numbering jumps to its end (nothing numbered inside it)
    assert [m.seq for m in inbox.take(0, 12, 15, 0.1)] == []
    inbox.put(0, "t", b"y", 1, 9, False, ())
    assert inbox.end(0) == 16


def test_a_message_handed_again_on_the_same_session_is_held_once() -> None:
    inbox = Inbox(1)
    assert inbox.put(0, "t", b"a", 1, 5, False, ())
    assert not inbox.put(0, "t", b"a", 1, 5, False, (), dup=True)  # the broker resent it: held already
    assert inbox.end(0) == 1
    assert [m.mid for m in inbox.release(0, 1)] == [5]
    assert inbox.put(0, "t", b"b", 1, 5, False, (), dup=True)  # id 5 acknowledged: this one is new


def test_a_new_session_voids_the_packet_ids_held() -> None:
    inbox = Inbox(1)
    inbox.put(0, "t", b"a", 1, 5, False, ())
    inbox.forget_ids()  # the old session expired: id 5 may name another message now
    assert inbox.put(0, "t", b"c", 1, 5, False, (), dup=True)
    assert [(m.payload, m.mid) for m in inbox.release(0, 2)] == [(b"a", 0), (b"c", 5)]
