"""opensearch-sink without a service: config keys and aliases, bulk bodies, and the per-item
classification of bulk responses (table-driven). The sink against the real OpenSearch is in
tests/runtime/test_opensearch_pipeline.py."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from sluice.connectors.config import ConfigError
from sluice.connectors.opensearch import config as cfg
from sluice.connectors.opensearch.bulk import Action, WriteRules, build_actions, bulk_body
from sluice.connectors.opensearch.mappings import index_mapping
from sluice.connectors.opensearch.responses import (
    ItemResult,
    Outcome,
    classify_item,
    classify_response,
    to_retry,
)
from sluice.connectors.opensearch.sink import OpenSearchSinkConnector, OpenSearchSinkTask
from sluice.connectors.plugins import builtin_name, load_connector_class
from sluice.connectors.secrets import REDACTED

BASE = {"connector.class": "opensearch-sink", "name": "os", "topics": "orders"}


# ---- config ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "alias",
    [
        "io.confluent.connect.elasticsearch.ElasticsearchSinkConnector",
        "org.apache.rocketmq.connect.elasticsearch.connector.ElasticsearchSinkConnector",
        "opensearch-sink",
    ],
)
def test_class_aliases_run_the_opensearch_sink(alias: str) -> None:
    assert builtin_name(alias) == "opensearch-sink"
    assert load_connector_class(alias) is OpenSearchSinkConnector


def test_confluent_keys_parse_unchanged() -> None:
    raw = {
        **BASE,
        "connection.url": "http://a:9200, https://b:9201/",
        "connection.username": "elastic",
        "connection.password": "s3cret",
        "key.ignore": "true",
        "schema.ignore": "true",
        "write.method": "UPSERT",  # Confluent's spelling
        "behavior.on.null.values": "DELETE",
        "topic.index.map": "orders:shop-orders,users:people",
        "batch.size": "500",
        "max.retries": "7",
        "retry.backoff.ms": "250",
        "drop.invalid.message": "true",
    }
    connector = OpenSearchSinkConnector()
    assert connector.validate(raw) == []
    c = connector.parse(raw)
    assert (c["write.method"], c["behavior.on.null.values"]) == ("upsert", "delete")
    assert (c["key.ignore"], c["schema.ignore"], c["drop.invalid.message"]) == (True, True, True)
    assert (c["batch.size"], c["max.retries"], c["retry.backoff.ms"]) == (500, 7, 250)
    assert cfg.urls(c) == ["http://a:9200", "https://b:9201"]
    assert cfg.index_map(c) == {"orders": "shop-orders", "users": "people"}
    assert cfg.credentials(c) == ("elastic", "s3cret")


def test_defaults_follow_confluent() -> None:
    c = OpenSearchSinkConnector().parse({**BASE, "connection.url": "http://h:9200"})
    assert c["write.method"] == "insert" and c["behavior.on.null.values"] == "fail"
    assert (c["key.ignore"], c["schema.ignore"], c["batch.size"], c["max.retries"]) == (False, False, 2000, 5)


def test_rocketmq_connect_host_and_port_stand_for_the_url() -> None:
    raw = {**BASE, "elasticsearchHost": "127.0.0.1", "elasticsearchPort": "19200"}
    raw.pop("topics")
    raw["connect.topicnames"] = "orders"  # RocketMQ Connect's sink key
    assert OpenSearchSinkConnector().validate(raw) == []
    assert cfg.urls(OpenSearchSinkConnector().parse(raw)) == ["http://127.0.0.1:19200"]


@pytest.mark.parametrize(
    ("extra", "field", "text"),
    [
        ({}, "connection.url", "is required"),
        ({"connection.url": "ftp://h"}, "connection.url", "http(s)://host:port"),
        ({"connection.url": "http://h:9200", "write.method": "merge"}, "write.method", "insert, upsert"),
        ({"connection.url": "http://h", "behavior.on.null.values": "x"}, "behavior.on.null.values", "ignore"),
        ({"connection.url": "http://h", "topic.index.map": "orders"}, "topic.index.map", "topic:index"),
        ({"connection.url": "http://h", "topic.index.map": "o:Big"}, "topic.index.map", "upper-case"),
        ({"connection.url": "http://h", "batch.size": "0"}, "batch.size", ">= 1"),
    ],
)
def test_bad_configs_name_the_field(extra: dict[str, str], field: str, text: str) -> None:
    errors = OpenSearchSinkConnector().validate({**BASE, **extra})
    assert [e.field for e in errors] == [field], errors
    assert text in errors[0].message and "connector 'os'" in errors[0].message


def test_credentials_are_secret_and_never_in_messages() -> None:
    connector = OpenSearchSinkConnector()
    raw = {**BASE, "connection.url": "http://admin:pw-in-url@h:9200", "connection.password": "pw-key"}
    shown = connector.full_config_def("os").redact(raw)
    assert shown["connection.password"] == REDACTED and shown["connection.url"] == REDACTED
    parsed = connector.parse(raw)
    assert cfg.urls(parsed) == ["http://h:9200"] and cfg.shown_url(raw["connection.url"]) == "http://h:9200"
    assert cfg.credentials(parsed) == ("admin", "pw-in-url")
    errors = connector.validate({**raw, "connection.url": "http://admin:pw-in-url@h:port"})
    assert errors and all("pw-in-url" not in e.message for e in errors)


def test_task_refuses_a_config_without_url() -> None:
    with pytest.raises(ConfigError, match="connection.url"):
        OpenSearchSinkTask({**BASE}, 0)


# ---- bulk actions and bodies -------------------------------------------------------------------


def _records(values: list[Any], keys: list[Any], value_type: pa.DataType | None = None) -> pa.Table:
    n = len(values)
    return pa.table(
        {
            "topic": pa.array(["Orders"] * n, pa.string()),
            "partition": pa.array(["broker-a:0"] * n, pa.string()),
            "offset": pa.array(list(range(n)), pa.int64()),
            "key": pa.array(keys),
            "value": pa.array(values, value_type) if value_type else pa.array(values),
        }
    )


STRUCT = pa.struct([("id", pa.int64()), ("name", pa.string()), ("price", pa.decimal128(10, 2))])


def test_struct_values_become_documents_in_record_order() -> None:
    values = [{"id": 1, "name": 'a"b', "price": Decimal("1.50")}, {"id": 2, "name": None, "price": None}]
    table = _records(values, ["k1", "k2"], STRUCT)
    actions, invalid, ignored = build_actions(table.take([1, 0]), WriteRules())
    assert (invalid, ignored) == ([], 0)
    assert [(a.op, a.index, a.doc_id, a.offset) for a in actions] == [
        ("index", "orders", "k1", 0),
        ("index", "orders", "k2", 1),
    ]
    assert json.loads(actions[0].source or "") == {"id": 1, "name": 'a"b', "price": 1.5}
    assert actions[1].source == '{"id":2,"name":null,"price":null}', "nulls kept: an upsert clears them"


def test_upsert_delete_and_ignore() -> None:
    values = [{"id": 1, "name": "x", "price": None}, None]
    table = _records(values, ["k1", "k1"], STRUCT)
    rules = WriteRules(write_method="upsert", null_values="delete", index_map={"Orders": "shop"})
    actions, invalid, _ = build_actions(table, rules)
    assert [(a.op, a.index, a.doc_id) for a in actions] == [
        ("update", "shop", "k1"),
        ("delete", "shop", "k1"),
    ]
    assert bulk_body(actions).decode().splitlines() == [
        '{"update": {"_index": "shop", "_id": "k1"}}',
        '{"doc":{"id":1,"name":"x","price":null},"doc_as_upsert":true}',
        '{"delete": {"_index": "shop", "_id": "k1"}}',
    ]
    assert bulk_body(actions).endswith(b"\n")
    ignored = build_actions(table, WriteRules(null_values="ignore"))
    assert (len(ignored[0]), ignored[2]) == (1, 1)


@pytest.mark.parametrize(
    ("values", "keys", "rules", "reason"),
    [
        ([None], ["k"], WriteRules(), "behavior.on.null.values=fail"),
        (['{"a": 1}'], [None], WriteRules(), "key is null"),
        (['{"a": 1}'], [""], WriteRules(), "key is empty"),
        (["[1, 2]"], ["k"], WriteRules(), "not a JSON object"),
        (["not json"], ["k"], WriteRules(), "not a JSON object"),
        ([7], ["k"], WriteRules(), "is not a document"),
    ],
)
def test_records_that_cannot_be_documents(
    values: list[Any], keys: list[Any], rules: WriteRules, reason: str
) -> None:
    actions, invalid, _ = build_actions(_records(values, keys), rules)
    assert actions == [] and len(invalid) == 1
    assert reason in invalid[0].reason
    assert (invalid[0].topic, invalid[0].partition, invalid[0].offset) == ("Orders", "broker-a:0", 0)


def test_ids_from_keys_or_positions() -> None:
    key_struct = pa.array([{"id": 5}, {"id": 6}], pa.struct([("id", pa.int32())]))
    two = pa.array(
        [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}], pa.struct([("a", pa.int32()), ("b", pa.string())])
    )
    values = ['{"v": 1}', '{"v": 2}']
    table = _records(values, [None, None]).set_column(3, "key", key_struct)
    assert [a.doc_id for a in build_actions(table, WriteRules())[0]] == ["5", "6"]
    table = table.set_column(3, "key", two)
    assert [a.doc_id for a in build_actions(table, WriteRules())[0]] == ['{"a":1,"b":"x"}', '{"a":2,"b":"y"}']
    ignored = build_actions(table, WriteRules(key_ignore=True))[0]
    assert [a.doc_id for a in ignored] == ["Orders+broker-a:0+0", "Orders+broker-a:0+1"]
    numbers = _records(values, pa.array([10, 11], pa.int64()))
    assert [a.doc_id for a in build_actions(numbers, WriteRules())[0]] == ["10", "11"]


def test_json_text_values_are_documents() -> None:
    actions, invalid, _ = build_actions(_records(['{"name": "é", "n": 1}'], ["k"]), WriteRules())
    assert invalid == [] and actions[0].source == '{"name":"é","n":1}'
    binary = _records([b'{"n": 2}'], ["k"], pa.binary())
    assert build_actions(binary, WriteRules())[0][0].source == '{"n":2}'


def test_mapping_from_the_schema() -> None:
    kind = pa.struct(
        [
            ("id", pa.int64()),
            ("qty", pa.int32()),
            ("name", pa.string()),
            ("price", pa.decimal128(10, 2)),
            ("at", pa.timestamp("us", "UTC")),
            ("ok", pa.bool_()),
            ("tags", pa.list_(pa.string())),
            ("address", pa.struct([("city", pa.string())])),
        ]
    )
    props = (index_mapping(kind) or {})["properties"]
    assert props["id"] == {"type": "long"} and props["qty"] == {"type": "integer"}
    assert props["name"]["type"] == "text" and props["name"]["fields"]["keyword"]["type"] == "keyword"
    assert props["price"] == {"type": "double"} and props["at"] == {"type": "date"}
    assert props["ok"] == {"type": "boolean"} and props["tags"]["type"] == "text"
    assert props["address"] == {"properties": {"city": props["name"]}}
    assert index_mapping(pa.string()) is None


# ---- bulk responses ----------------------------------------------------------------------------


def _item(op: str, status: int, kind: str = "", reason: str = "") -> dict[str, Any]:
    body: dict[str, Any] = {"_index": "i", "_id": "1", "status": status}
    if kind:
        body["error"] = {"type": kind, "reason": reason, "caused_by": {"type": "x", "reason": "why"}}
    return {op: body}


@pytest.mark.parametrize(
    ("item", "outcome"),
    [
        (_item("index", 201), Outcome.OK),
        (_item("index", 200), Outcome.OK),
        (_item("update", 200), Outcome.OK),
        (_item("delete", 200), Outcome.OK),
        (_item("delete", 404), Outcome.OK),  # already gone: what a delete wants
        (_item("index", 400, "mapper_parsing_exception", "failed to parse field [price]"), Outcome.REJECTED),
        (
            _item("update", 400, "illegal_argument_exception", "Document contains at least one immense term"),
            Outcome.REJECTED,
        ),
        (_item("index", 400, "strict_dynamic_mapping_exception", "mapping set to strict"), Outcome.REJECTED),
        (_item("index", 429, "es_rejected_execution_exception", "rejected execution"), Outcome.RETRY),
        (_item("index", 503, "unavailable_shards_exception", "primary shard is not active"), Outcome.RETRY),
        (_item("index", 500, "exception", "boom"), Outcome.RETRY),
        (_item("update", 409, "version_conflict_engine_exception", "conflict"), Outcome.RETRY),
        (_item("index", 404, "index_not_found_exception", "no such index"), Outcome.FATAL),
        (_item("index", 403, "cluster_block_exception", "read-only"), Outcome.FATAL),
        (_item("index", 401, "security_exception", "unauthorized"), Outcome.FATAL),
        ({"index": {}, "update": {}}, Outcome.RETRY),
    ],
)
def test_bulk_items_are_classified(item: dict[str, Any], outcome: Outcome) -> None:
    result = classify_item(item)
    assert result.outcome is outcome
    if outcome is not Outcome.OK and "error" in next(iter(item.values())):
        body = next(iter(item.values()))
        assert body["error"]["type"] in result.reason and "caused by x: why" in result.reason


def test_bulk_response_shape() -> None:
    assert (
        classify_response({"errors": False, "items": [_item("index", 201)] * 2}, 2)
        == [ItemResult(Outcome.OK, 200)] * 2
    )
    with pytest.raises(ValueError, match="1 items for 2 actions"):
        classify_response({"errors": False, "items": [_item("index", 201)]}, 2)
    with pytest.raises(ValueError, match="no items"):
        classify_response({"error": "html page"}, 1)


@pytest.mark.parametrize(
    ("docs", "outcomes", "retried"),
    [
        # the failed item goes again
        (["a", "b"], ["ok", "retry"], [1]),
        # an older write of a document a later item wrote is not sent again (it would undo it)
        (["a", "a"], ["retry", "ok"], []),
        # both versions failed: both go again, in order
        (["a", "b", "a"], ["retry", "ok", "retry"], [0, 2]),
        # a refused later version does not supersede the older one
        (["a", "a"], ["retry", "rejected"], [0]),
        (["a", "b"], ["ok", "ok"], []),
    ],
)
def test_retry_keeps_each_documents_order(docs: list[str], outcomes: list[str], retried: list[int]) -> None:
    ops = [("index", "i", d) for d in docs]
    results = [ItemResult(Outcome(o), 0) for o in outcomes]
    assert to_retry(ops, results) == retried


def test_action_names_its_record() -> None:
    a = Action("index", "i", "1", "{}", "T", "broker-a:2", 9)
    assert a.where() == "topic 'T' queue 'broker-a:2' offset 9"
