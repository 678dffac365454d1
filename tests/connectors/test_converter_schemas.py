"""One sink batch, several topics with their own envelope schemas (one table each): every record is
decoded with its topic's fields, and says which fields are its own."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from sluice.connectors.connect_schemas import envelope_schemas, merge_schemas
from sluice.connectors.converters import VALUE_SCHEMA_HEADER, JsonConverter
from sluice.connectors.records import ERROR_COLUMN
from sluice.connectors.sink_stages import Outcome, SinkStages, Unmet, envelope_prefixes_of
from sluice.connectors.stage_outcomes import Made
from tests.connectors.decoding import records_of
from tests.connectors.test_converters import BORN, READ_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def _struct(**fields: str):  # type: ignore[no-untyped-def]
    from pyspark.sql.types import _parse_datatype_string

    return _parse_datatype_string("struct<" + ",".join(f"{k}:{v}" for k, v in fields.items()) + ">")


def test_merge_schemas_table(spark: SparkSession) -> None:  # DDL parsing needs a session
    same = _struct(id="int", name="string")
    assert merge_schemas({"a": [same], "b": [same]}) == (same, None)
    merged, own = merge_schemas(
        {"orders": [_struct(id="int", total="double")], "products": [_struct(id="int", sku="string")]}
    )
    assert merged.simpleString() == "struct<id:int,total:double,sku:string>"
    assert {t: o.simpleString() for t, o in own.items()} == {
        "orders": "struct<id:int,total:double>",
        "products": "struct<id:int,sku:string>",
    }
    # A column added within one topic's batch: one topic, the union of its schemas.
    grown, only = merge_schemas({"t": [_struct(id="int"), _struct(id="int", note="string")]})
    assert grown.simpleString() == "struct<id:int,note:string>" and only is None
    # Different tables' keys: numbers widen to hold both.
    wide, own = merge_schemas(
        {"a": [_struct(id="int", v="decimal(10,2)")], "b": [_struct(id="bigint", v="decimal(5,4)")]}
    )
    assert wide.simpleString() == "struct<id:bigint,v:decimal(12,4)>"
    assert {t: o.simpleString() for t, o in own.items()} == {
        "a": "struct<id:int,v:decimal(10,2)>",
        "b": "struct<id:bigint,v:decimal(5,4)>",
    }
    with pytest.raises(ValueError, match="field 'id' is int in topic 'a' but string in topic 'b'"):
        merge_schemas({"a": [_struct(id="int")], "b": [_struct(id="string")]})


def _envelope(fields: list[tuple[str, str]], payload: dict[str, object]) -> bytes:
    schema = {
        "type": "struct",
        "fields": [{"type": t, "optional": True, "field": n} for n, t in fields],
        "optional": False,
    }
    return json.dumps({"schema": schema, "payload": payload}).encode()


def test_one_batch_of_two_topics_decodes_each_with_its_own_fields(spark: SparkSession) -> None:
    rows = [
        ("orders", "broker-a:0", 0, 0, None, None, {}, BORN, BORN,
         _envelope([("id", "int32"), ("total", "float64")], {"id": 1, "total": 9.5})),
        ("products", "broker-a:1", 0, 1, None, None, {}, BORN, BORN,
         _envelope([("id", "int32"), ("sku", "string")], {"id": 7, "sku": "K-7"})),
    ]  # fmt: skip
    out = records_of(JsonConverter(schemas_enable=True), spark.createDataFrame(rows, READ_SCHEMA))
    got = {r["topic"]: (r["value"], dict(r["headers"])[VALUE_SCHEMA_HEADER]) for r in out.to_pylist()}
    assert {t: v for t, (v, _) in got.items()} == {
        "orders": {"id": 1, "total": 9.5, "sku": None},
        "products": {"id": 7, "total": None, "sku": "K-7"},
    }
    own = {t: [f["name"] for f in json.loads(s)["fields"]] for t, (_, s) in got.items()}
    assert own == {"orders": ["id", "total"], "products": ["id", "sku"]}


def test_declared_decimal_reads_plain_json_numbers_exactly(spark: SparkSession) -> None:
    """A bare JSON body with a declared schema carries decimals as numbers (base64 is only Kafka's
    envelope form)."""
    from decimal import Decimal

    rows = [("t", "broker-a:0", 0, 0, None, None, {}, BORN, BORN, b'{"id": 1, "amount": 1234}'),
            ("t", "broker-a:0", 0, 1, None, None, {}, BORN, BORN, b'{"id": 2, "amount": -0.25}')]  # fmt: skip
    converter = JsonConverter(value_schema="id int, amount decimal(10,2)")
    out = records_of(converter, spark.createDataFrame(rows, READ_SCHEMA)).to_pylist()
    assert [r["value"]["amount"] for r in out] == [Decimal("1234.00"), Decimal("-0.25")]


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ('{"schema":{"type":"int32"}', [("t", {"type": "int32"})]),
        ('{"schema":null', []),  # a schemaless envelope: no schema to merge
        # laid out otherwise: the caller parses every message instead
        ('{"payload":1,"schema":{"type":"int32"}}', None),
        ('{"schema": {"type":"int32"}', [("t", {"type": "int32"})]),  # a space is still one value
        ('{"schema" :{"type":"int32"}', None),
        # ',"payload":' inside the schema: what precedes it is not one JSON value
        ('{"schema":{"type":"int32","doc":"x', None),
        ('{"schema":{"type":"struct","default":{"a":1', None),
    ],
)
def test_envelope_schemas_from_body_prefixes(prefix: str, expected: list[tuple[str, object]] | None) -> None:
    assert envelope_schemas([("t", prefix)]) == expected


A = '{"schema":{"type":"int32"},"payload":1}'
B = '{"schema":{"type":"int64"},"payload":2}'


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        ([("t", A), ("t", A), ("u", A), ("t", B)],
         [("t", '{"schema":{"type":"int32"}'), ("t", '{"schema":{"type":"int64"}'),
          ("u", '{"schema":{"type":"int32"}')]),
        ([("t", None), ("t", A)], [("t", '{"schema":{"type":"int32"}')]),  # null texts (tombstones) skipped
        ([], []),
        # laid out otherwise: read in Kafka's layout
        ([("t", A), ("u", '{"payload":1, "schema":{"type":"int32"}}')],
         [("t", '{"schema":{"type":"int32"}'), ("u", '{"schema":{"type":"int32"}')]),
        ([("t", A), ("t", "")], [("t", '{"schema":{"type":"int32"}')]),  # no envelope: flagged
        ([("t", '{"schema":{"type":"int32"}}')], []),  # no payload at all: not an envelope either
        # a ',"payload":' inside the schema is cut there, as the search cuts it (remember() refuses it)
        ([("t", '{"schema":{"doc":"a,"payload":b"},"payload":1}')], [("t", '{"schema":{"doc":"a')]),
    ],
)  # fmt: skip
def test_envelope_prefixes_of_a_share_are_what_the_search_finds(
    texts: list[tuple[str, str | None]], expected: list[tuple[str, str]]
) -> None:
    """In Arrow, over the reader's columns (a null text is a tombstone's body); the keys' texts
    (here the same) are found alike."""
    import pyarrow as pa

    marked = [[("sluice.tombstone", "true")] if text is None else [] for _, text in texts]
    batch = pa.RecordBatch.from_pydict(
        {
            "topic": [topic for topic, _ in texts],
            "keys": [text or "" for _, text in texts],
            "properties": pa.array(marked, pa.map_(pa.string(), pa.string())),
            "body": pa.array([None if t is None else t.encode() for _, t in texts], pa.binary()),
        }
    )
    found = envelope_prefixes_of([batch] if texts else [], keys=True, tombstone="sluice.tombstone")
    assert found == {"value": expected, "key": expected}


def test_envelopes_laid_out_any_way_decode_alike(spark: SparkSession) -> None:
    """Kafka's compact layout (schemas found from body prefixes), a spaced one and payload first
    (rewritten in Kafka's layout: arrow_envelopes.relaid), with a ``,"payload":`` inside a field's doc
    (escaped in the text, so no prefix is cut there), give the same records in one batch."""
    schema = {"type": "struct", "optional": False, "fields": [
        {"field": "id", "type": "int32", "optional": False},
        {"field": "note", "type": "string", "optional": True, "doc": 'see ,"payload":'},
    ]}  # fmt: skip
    compact = json.dumps({"schema": schema, "payload": {"id": 1, "note": "a"}}, separators=(",", ":"))
    spaced = json.dumps({"schema": schema, "payload": {"id": 2, "note": "b"}})
    first = json.dumps({"payload": {"id": 3, "note": None}, "schema": schema}, separators=(",", ":"))
    bodies = [compact, spaced, first]
    for only_compact in (True, False):
        rows = [
            ("t", "broker-a:0", 0, i, None, None, {}, BORN, BORN, body.encode())
            for i, body in enumerate(bodies[:1] if only_compact else bodies)
        ]
        out = records_of(JsonConverter(schemas_enable=True), spark.createDataFrame(rows, READ_SCHEMA))
        expected = [{"id": 1, "note": "a"}, {"id": 2, "note": "b"}, {"id": 3, "note": None}]
        assert out.column("value").to_pylist() == expected[: len(rows)]
        assert out.column(ERROR_COLUMN).to_pylist() == [None] * len(rows)


V1 = [("id", "int32")]
V2 = [("id", "int32"), ("note", "string")]


def _compact(fields: list[tuple[str, str]], payload: dict[str, object]) -> bytes:
    """Laid out as Kafka's JsonConverter writes it (the spaced ``_envelope`` is parsed)."""
    return json.dumps(json.loads(_envelope(fields, payload)), separators=(",", ":")).encode()


def _batch(
    spark: SparkSession,
    start: int,
    versions: list[list[tuple[str, str]]],
    spaced: bool = False,
    topic: str = "t",
) -> DataFrame:
    """Messages ``start``, ``start + 1`` … of ``topic``, the i-th value of schema ``versions[i]``
    (``note`` set when it has one), each keyed by an ``{"id": …}`` envelope."""
    rows = []
    for i, fields in enumerate(versions, start=start):
        payload = {"id": i, **({"note": f"n{i}"} if len(fields) > 1 else {})}
        key = _compact([("id", "int32")], {"id": i}).decode()
        body = (_envelope if spaced else _compact)(fields, payload)
        rows.append(("t", "broker-a:0", 0, i, key, None, {}, BORN, BORN, body))
    return spark.createDataFrame(rows, READ_SCHEMA)


def _envelope_converter() -> JsonConverter:
    """A sink task's converter for keys and values in Connect envelopes (Kafka's default)."""
    from sluice.connectors.converters import converter_for

    converter = converter_for(
        {
            "value.converter": "json",
            "value.converter.schemas.enable": "true",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        }
    )
    assert isinstance(converter, JsonConverter)
    return converter


def test_one_task_s_converter_decodes_each_batch_with_its_own_schemas(spark: SparkSession) -> None:
    """A sink task keeps its converter: schemas met in a batch are remembered for the next
    (envelopes.SeenPrefixes), and each batch decodes right with them — a column added in the
    middle of the stream lands."""
    converter = _envelope_converter()
    v1, v2 = V1, V2

    def batch(start: int, versions: list[list[tuple[str, str]]], spaced: bool = False) -> DataFrame:
        return _batch(spark, start, versions, spaced)

    batches = [(0, [v1, v1], False), (2, [v1, v2, v2], False), (5, [v2], False), (6, [v2, v1], True)]
    expected = [
        [{"id": 0}, {"id": 1}],
        [{"id": 2, "note": None}, {"id": 3, "note": "n3"}, {"id": 4, "note": "n4"}],
        [{"id": 5, "note": "n5"}],
        [{"id": 6, "note": "n6"}, {"id": 7, "note": None}],
    ]
    for (start, versions, spaced), want in zip(batches, expected, strict=True):
        out = records_of(converter, batch(start, versions, spaced))
        assert out.column("value").to_pylist() == want
        assert out.column("key").to_pylist() == [{"id": w["id"]} for w in want]
        assert out.column(ERROR_COLUMN).to_pylist() == [None] * len(want)
    # The two schemas are remembered, once each: the spaced bodies are read in Kafka's layout
    # (arrow_envelopes.relaid), their prefixes those of the compact ones.
    assert len(converter.seen_prefixes.known("value")) == 2
    assert len(converter.seen_prefixes.known("key")) == 1

    # What a batch decodes is the same with the memory as without it.
    mixed = batch(0, [v1, v2])
    assert records_of(converter, mixed).equals(records_of(_envelope_converter(), mixed))


def _change(table_fields: list[tuple[str, str]], after: dict[str, object]) -> bytes:
    """A Debezium change envelope (``before``, ``after``, ``op``) of a row with ``table_fields``."""
    row = {"type": "struct", "optional": True, "fields": [{"type": t, "optional": True, "field": n}
                                                          for n, t in table_fields]}  # fmt: skip
    schema = {"type": "struct", "optional": False, "fields": [
        {**row, "field": "before"}, {**row, "field": "after"},
        {"type": "string", "optional": False, "field": "op"},
    ]}  # fmt: skip
    return json.dumps({"schema": schema, "payload": {"before": None, "after": after, "op": "c"}}).encode()


def test_a_task_s_stages_learn_the_schemas_of_a_batch_they_have_not_met(spark: SparkSession) -> None:
    """A sink's stages decode a batch with the schemas its converter met before
    (connectors.sink_stages); a batch bringing one not met is ``Unmet``, with the batch's schema
    prefixes, and decodes once the converter remembers them, per topic. Envelopes laid out
    otherwise than Kafka writes them change nothing: they are read in Kafka's layout."""
    converter = _envelope_converter()

    def run(messages: DataFrame) -> Outcome:
        stages = SinkStages(
            converter.arrow_records(), (), barriers_once=False, connector="c", key_envelopes=True
        )
        return stages.run(messages.toArrow().to_batches())

    def made(outcome: Outcome) -> list[tuple[object, ...]]:
        assert isinstance(outcome, Made) and outcome.records is not None
        return [(r["offset"], r["key"], r["value"]) for r in outcome.records.sort_by("offset").to_pylist()]

    assert not converter.knows_schemas(["t"])  # nothing met yet
    first = _batch(spark, 0, [V1, V2])
    unmet = run(first)
    assert isinstance(unmet, Unmet)
    assert [len(unmet.found[name]) for name in ("value", "key")] == [2, 1]
    converter.seen_prefixes.remember(unmet.found)
    assert converter.knows_schemas(["t"]) and not converter.knows_schemas(["t", "u"])
    assert made(run(first)) == [
        (0, {"id": 0}, {"id": 0, "note": None}),
        (1, {"id": 1}, {"id": 1, "note": "n1"}),
    ]

    # spaced: nothing new to learn
    assert made(run(_batch(spark, 8, [V2], spaced=True))) == [(8, {"id": 8}, {"id": 8, "note": "n8"})]
    assert converter.knows_schemas(["t"])

    grown = _batch(spark, 5, [V2, [*V2, ("extra", "int64")]])
    unmet = run(grown)
    assert isinstance(unmet, Unmet)
    converter.seen_prefixes.remember(unmet.found)
    assert converter.knows_schemas(["t"]) and len(converter.seen_prefixes.known("value")) == 3
    assert made(run(grown)) == [
        (5, {"id": 5}, {"id": 5, "note": "n5", "extra": None}),
        (6, {"id": 6}, {"id": 6, "note": "n6", "extra": None}),
    ]
