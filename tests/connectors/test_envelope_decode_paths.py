"""Reading Connect envelopes: the json converter's shortcuts give what the full parse gives, and
a filtering transform never loses a record that did not decode.

- Schema prefixes are found in the raw bytes and remembered between batches (``SeenPrefixes``):
  an envelope laid out as Kafka writes it decodes as one laid out otherwise, in the same batch.
- A chain whose first transform reads only part of the value (``PrunesValue``: Debezium's
  ``ExtractNewRecordState``) has only that part decoded (``to_records(narrow=...)``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from sluice.activities.spark_binding import chain_frame
from sluice.connectors.converters import JsonConverter
from sluice.connectors.records import ERROR_COLUMN, Record, make_records
from sluice.connectors.transforms import build_chain, value_read
from tests.connectors.test_converters import KAFKA_ENVELOPE, as_messages, raw_messages
from tests.connectors.test_extract_new_record_state import _records

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

UNWRAP = {"transforms": "u", "transforms.u.type": "io.debezium.transforms.ExtractNewRecordState"}


def _rows(df: DataFrame) -> list[tuple[Any, ...]]:
    out = df.orderBy("topic", "offset").collect()
    return [(r["topic"], r["offset"], r["key"], None if r["value"] is None else r["value"].asDict(True))
            for r in out]  # fmt: skip


def _envelope_messages(spark: SparkSession, records: DataFrame) -> DataFrame:
    converter = JsonConverter(schemas_enable=True)
    converter.key_envelopes = True
    return as_messages(spark, converter.to_messages(records))


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

    def decoded(narrow: Any) -> DataFrame:
        converter = JsonConverter(schemas_enable=True)
        converter.key_envelopes = True
        return converter.to_records(messages, narrow)

    narrowed = decoded(value_read(chain))
    assert _rows(chain_frame(chain, narrowed)) == _rows(chain_frame(chain, decoded(None)))
    read = set(narrowed.schema["value"].dataType.fieldNames())
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
    converter = JsonConverter(schemas_enable=True)
    messages = as_messages(spark, converter.to_messages(events).unionByName(converter.to_messages(plain)))
    chain = build_chain(UNWRAP)
    whole = JsonConverter(schemas_enable=True).to_records(messages)
    narrowed = JsonConverter(schemas_enable=True).to_records(messages, value_read(chain))
    plain_value = {r["topic"]: r["value"].asDict(True) for r in narrowed.collect() if r["value"]}["plain"]
    assert {k: v for k, v in plain_value.items() if v is not None} == {"n": 7, "word": "seven"}
    assert "before" not in narrowed.schema["value"].dataType.fieldNames()
    assert _rows(chain_frame(chain, narrowed)) == _rows(chain_frame(chain, whole))
    # Debezium's transform would pass the plain record on; one value type per batch cannot, so it
    # is a bad record naming the transform, never dropped without a word
    flagged = {r["topic"]: r[ERROR_COLUMN] for r in chain_frame(chain, narrowed).collect()}
    assert flagged["p_public_t"] is None
    assert "transform 'u'" in flagged["plain"] and "is not a change event" in flagged["plain"]


def test_an_envelope_with_a_known_schema_decodes_as_one_laid_out_otherwise(spark: SparkSession) -> None:
    """The first body is laid out as Kafka writes it (its schema found from its prefix), the second
    has the same content with spaces (found by a JSON query), the third the first's schema and a
    payload that does not fit it."""
    spaced = json.dumps(json.loads(KAFKA_ENVELOPE))
    broken = KAFKA_ENVELOPE[: KAFKA_ENVELOPE.index('"payload":')] + '"payload":{"id":"not a number"}}'
    converter = JsonConverter(schemas_enable=True)
    bodies = [KAFKA_ENVELOPE.encode(), spaced.encode(), broken.encode()]
    out = converter.to_records(raw_messages(spark, bodies))
    rows = out.orderBy("offset").collect()
    assert rows[0]["value"] == rows[1]["value"]
    assert rows[0]["value"]["name"] == "ann"
    assert rows[0][ERROR_COLUMN] is None and rows[1][ERROR_COLUMN] is None
    assert "body envelope does not parse" in rows[2][ERROR_COLUMN]
    # a second batch meets the schema as one seen before: the same values again
    again = converter.to_records(raw_messages(spark, [KAFKA_ENVELOPE.encode(), broken.encode()]))
    rows_again = again.orderBy("offset").collect()
    assert rows_again[0]["value"] == rows[0]["value"]
    assert "body envelope does not parse" in rows_again[1][ERROR_COLUMN]


def test_a_schema_that_is_not_a_connect_schema_is_named_when_every_envelope_is_laid_out_as_kafka_writes_it(
    spark: SparkSession,
) -> None:
    """Every prefix is found cheaply here; one schema is refused, and its records are flagged."""
    good = b'{"schema":{"type":"int32","optional":false},"payload":5}'
    not_connect = b'{"schema":{"type":"decimal"},"payload":1}'
    rows = JsonConverter(schemas_enable=True).to_records(raw_messages(spark, [good, not_connect]))
    got = [(r["value"], r[ERROR_COLUMN]) for r in rows.orderBy("offset").collect()]
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
    out = chain_frame(
        build_chain(transforms),
        JsonConverter(schemas_enable=True).to_records(raw_messages(spark, [good, b"not json at all"])),
    )
    rows = {r["offset"]: r[ERROR_COLUMN] for r in out.collect()}
    assert rows[0] is None
    assert "body is not a Connect JSON envelope" in rows[1]


def test_a_sink_chain_s_filter_is_never_pushed_below_the_parse(spark: SparkSession) -> None:
    """``ExtractNewRecordState`` filters in the chain's ``mapInArrow`` (spark_binding.chain_frame),
    which Spark cannot push below the converter's parse: each message is parsed once (a filter
    pushed below it would parse each message again for every use of the value in the filter)."""
    chain = build_chain(UNWRAP)
    messages = _envelope_messages(spark, _records(spark))
    converter = JsonConverter(schemas_enable=True)
    converter.key_envelopes = True
    chained = chain_frame(chain, converter.to_records(messages, value_read(chain)))
    plan = chained._jdf.queryExecution().optimizedPlan().toString().splitlines()
    filters = [line for line in plan if line.lstrip(" :+-").startswith("Filter ")]
    assert not any("from_json" in f for f in filters)
    assert any("from_json" in line for line in plan)  # the parse is there, once, under the chain
