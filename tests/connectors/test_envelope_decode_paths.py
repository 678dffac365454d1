"""Reading Connect envelopes: the json converter's shortcuts give what the full parse gives, and
a filtering transform never loses a record that did not decode.

- Schema prefixes are found in the raw bytes and remembered between batches (``SeenPrefixes``):
  an envelope laid out as Kafka writes it decodes as one laid out otherwise, in the same batch.
- A chain whose first transform reads only part of the value (``PrunesValue``: Debezium's
  ``ExtractNewRecordState``) has only that part decoded (``Converter.arrow_records(narrow)``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from sluice.connectors.converters import JsonConverter
from sluice.connectors.records import ERROR_COLUMN, Record, make_records
from sluice.connectors.transforms import apply_chain, build_chain, value_read
from tests.connectors.decoding import records_of
from tests.connectors.encoding import messages_of
from tests.connectors.test_converters import KAFKA_ENVELOPE, as_messages, raw_messages
from tests.connectors.test_extract_new_record_state import _records

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from sluice.connectors.envelopes import Narrow

UNWRAP = {"transforms": "u", "transforms.u.type": "io.debezium.transforms.ExtractNewRecordState"}
#: How the json converter flags KAFKA_ENVELOPE's schema with a payload that does not fit it.
NOT_ITS_TYPE = (
    "json converter: body envelope does not parse as "
    "struct<id:int,name:string,tags:array<string>,addr:struct<city:string,zip:bigint>,created_at:timestamp>"
)


def _rows(records: pa.Table) -> list[tuple[Any, ...]]:
    out = records.sort_by([("topic", "ascending"), ("offset", "ascending")]).to_pylist()
    return [(r["topic"], r["offset"], r["key"], r["value"]) for r in out]


def _converter(*, key_envelopes: bool = False) -> JsonConverter:
    converter = JsonConverter(schemas_enable=True)
    converter.key_envelopes = key_envelopes
    return converter


def _envelope_messages(spark: SparkSession, records: DataFrame) -> DataFrame:
    return as_messages(spark, messages_of(_converter(key_envelopes=True), records))


def _decoded(converter: JsonConverter, messages: DataFrame, narrow: Narrow | None) -> pa.Table:
    """What the chain is handed: ``messages`` decoded reading only ``narrow`` of the value (all of it:
    None), the batch's envelope schemas learnt first (as ``records_of`` does before its decode)."""
    records_of(converter, messages)  # learns the batch's envelope schemas
    made = converter.arrow_records(narrow).records(messages.toArrow().to_batches(), barriers_once=False)
    assert made is not None
    return made


def _value_fields(records: pa.Table) -> list[str]:
    return [field.name for field in records.schema.field("value").type]


@pytest.mark.parametrize(
    "options",
    [
        {},  # what is read depends only on the delete mode and add.fields
        {"delete.handling.mode": "rewrite", "add.fields": "op,ts_ms,source.lsn,table"},
        {"delete.tombstone.handling.mode": "rewrite-with-tombstone", "add.fields": "source.ts_ms"},
    ],
)
def test_a_narrowed_decode_gives_the_transform_what_the_whole_decode_gives(
    spark: SparkSession, options: dict[str, str]
) -> None:
    chain = build_chain({**UNWRAP, **{f"transforms.u.{k}": v for k, v in options.items()}})
    messages = _envelope_messages(spark, _records(spark))
    whole = apply_chain(chain, records_of(_converter(key_envelopes=True), messages))  # decoded whole
    narrowed = records_of(_converter(key_envelopes=True), messages, chain)  # decodes value_read(chain)
    assert _rows(narrowed) == _rows(whole)
    assert _rows(narrowed)  # records reached the chain's output
    read = set(_value_fields(_decoded(_converter(key_envelopes=True), messages, value_read(chain))))
    rewrites = "rewrite" in options.get("delete.handling.mode", "") + options.get(
        "delete.tombstone.handling.mode", ""
    )
    added = [f for f in options.get("add.fields", "").split(",") if f]
    assert ("before" in read) == rewrites
    assert ("source" in read) == any(f not in ("op", "ts_ms") for f in added)


def test_a_value_that_is_not_an_envelope_is_decoded_whole_beside_one_that_is(spark: SparkSession) -> None:
    """One sink batch over two topics: change events, and plain rows that share no field with them."""
    from pyspark.sql import functions as F

    events = _records(spark).withColumn("key", F.lit(None).cast("string"))
    plain = make_records(spark, [Record("other", 0, "x", topic="plain")])
    plain = plain.withColumn("value", F.struct(F.lit(7).alias("n"), F.lit("seven").alias("word")))
    converter = _converter()
    messages = as_messages(spark, messages_of(converter, events, plain))
    chain = build_chain(UNWRAP)
    whole = records_of(_converter(), messages)
    narrowed = _decoded(_converter(), messages, value_read(chain))
    plain_value = {r["topic"]: r["value"] for r in narrowed.to_pylist() if r["value"]}["plain"]
    assert {k: v for k, v in plain_value.items() if v is not None} == {"n": 7, "word": "seven"}
    assert "before" not in _value_fields(narrowed) and "before" in _value_fields(whole)
    chained = records_of(_converter(), messages, chain)  # the narrowed decode, then the chain
    assert _rows(chained) == _rows(apply_chain(chain, whole))
    # Debezium's transform would pass the plain record on; one value type per batch cannot, so it
    # is a bad record naming the transform, never dropped without a word
    flagged = {r["topic"]: r[ERROR_COLUMN] for r in chained.to_pylist()}
    assert flagged["p_public_t"] is None
    assert "transform 'u'" in flagged["plain"] and "is not a change event" in flagged["plain"]


def test_an_envelope_with_a_known_schema_decodes_as_one_laid_out_otherwise(spark: SparkSession) -> None:
    """The first body is laid out as Kafka writes it (its schema found from its prefix), the second
    has the same content with spaces (rewritten in Kafka's layout: arrow_envelopes.relaid), the
    third the first's schema and a payload that does not fit it."""
    spaced = json.dumps(json.loads(KAFKA_ENVELOPE))
    broken = KAFKA_ENVELOPE[: KAFKA_ENVELOPE.index('"payload":')] + '"payload":{"id":"not a number"}}'
    converter = _converter()
    bodies = [KAFKA_ENVELOPE.encode(), spaced.encode(), broken.encode()]
    rows = records_of(converter, raw_messages(spark, bodies)).to_pylist()
    assert rows[0]["value"] == rows[1]["value"]
    assert rows[0]["value"]["name"] == "ann"
    assert rows[0][ERROR_COLUMN] is None and rows[1][ERROR_COLUMN] is None
    assert (rows[2]["value"], rows[2][ERROR_COLUMN]) == (None, NOT_ITS_TYPE)
    # a second batch meets the schema as one seen before: the same values again
    again = records_of(converter, raw_messages(spark, [KAFKA_ENVELOPE.encode(), broken.encode()])).to_pylist()
    assert again[0]["value"] == rows[0]["value"] and again[0][ERROR_COLUMN] is None
    assert (again[1]["value"], again[1][ERROR_COLUMN]) == (None, NOT_ITS_TYPE)


def test_a_schema_that_is_not_a_connect_schema_is_named_when_every_envelope_is_laid_out_as_kafka_writes_it(
    spark: SparkSession,
) -> None:
    """Every prefix is found cheaply here; one schema is refused, and its records are flagged."""
    good = b'{"schema":{"type":"int32","optional":false},"payload":5}'
    not_connect = b'{"schema":{"type":"decimal"},"payload":1}'
    rows = records_of(_converter(), raw_messages(spark, [good, not_connect]))
    got = [(r["value"], r[ERROR_COLUMN]) for r in rows.to_pylist()]
    assert got[0] == (5, None)
    assert "an envelope's schema is not a Connect schema" in got[1][1] and "decimal" in got[1][1]


@pytest.mark.parametrize(
    "transforms",
    [
        UNWRAP,  # drops tombstones by default: a body that did not parse has no value either
        {
            "transforms": "f",
            "transforms.f.type": "Filter",
            "transforms.f.predicate": "p",
            "predicates": "p",
            "predicates.p.type": "RecordIsTombstone",
        },  # fmt: skip
    ],
)
def test_a_filtering_transform_never_drops_a_record_that_did_not_decode(
    spark: SparkSession, transforms: dict[str, str]
) -> None:
    good = KAFKA_ENVELOPE.encode()
    out = records_of(_converter(), raw_messages(spark, [good, b"not json at all"]), build_chain(transforms))
    rows = {r["offset"]: r[ERROR_COLUMN] for r in out.to_pylist()}
    assert rows[0] is None
    assert "body is not a Connect JSON envelope" in rows[1]
