"""The Arrow decode of envelopes whose schemas a sink met (connectors.arrow_envelopes) gives exactly
the records Spark's decode gives, schema and values, and flags a record it cannot read, naming
why; the sink's stages (connectors.sink_stages) turn each of those into a typed outcome.

Each case encodes records with the json converter (schemas on, as a source sends them), lets a
converter meet their schemas in a searched batch, then decodes the same messages both ways: Spark's
searched ``to_records``, and the sink's stages over the reader's Arrow batches, as the sink runs
them in its process or in a Spark task.
"""

from __future__ import annotations

import base64
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pytest

from sluice.activities.spark_binding import chain_frame
from sluice.connectors.arrow_envelopes import UnmetSchemaError
from sluice.connectors.connect_schemas import PAYLOAD_KEY
from sluice.connectors.converters import JsonConverter
from sluice.connectors.records import ERROR_COLUMN, Record, make_records
from sluice.connectors.sink_stages import Bad, Made, SinkStages, Unmet
from sluice.connectors.transforms import build_chain, value_read
from tests.connectors.test_converters import as_messages
from tests.connectors.test_extract_new_record_state import _records as change_events

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

VALUE_DDL = (
    "id bigint, tiny tinyint, small smallint, n int, f float, d double, flag boolean, name string, "
    "raw binary, amount decimal(12,2), wide decimal(30,5), day date, at timestamp, local timestamp_ntz, "
    "tags array<string>, points array<struct<x: int, label: string>>, addr struct<city: string, zip: bigint>"
)


def _value(i: int) -> dict[str, Any]:
    return {
        "id": i, "tiny": -(i % 128), "small": 300 * i, "n": -70000 * i, "f": 1.5 / (i + 1),
        "d": 1e300 / (i + 3), "flag": i % 2 == 0, "name": f'Grüße "{i}"\\ 東京\n\t\u0001 ✓',
        "raw": bytes([i % 256, 0, 255]),
        "amount": Decimal(f"-{i}.25") if i % 2 else Decimal(f"{i * 1000}.05"),
        "wide": Decimal(f"123456789012345678901234.{i:05d}"), "day": date(1969 + i, 12, 31),
        "at": datetime(2024, 5, 1, 12, 0, i, 123456, tzinfo=UTC), "local": datetime(1999, 12, 31, 23, 59, i),
        "tags": ["a", None, f"t{i}"] if i % 3 else [],
        "points": [{"x": i, "label": None}, {"x": -i, "label": "p"}],
        "addr": None if i % 4 == 1 else {"city": "Oslo", "zip": None if i % 2 else 150 + i},
    }  # fmt: skip


def _typed_records(spark: SparkSession, count: int) -> DataFrame:
    from pyspark.sql.types import StructType

    nulls = {k: None for k in _value(0)}
    values: list[Any] = [_value(i) for i in range(count)]
    values[2] = {**nulls, "id": 2}  # every field null but the key
    values[3] = None  # a tombstone
    records = [Record("p", i, v, topic="t", key=f'{{"id":{i}}}') for i, v in enumerate(values)]
    return make_records(spark, records, StructType.fromDDL(VALUE_DDL))


def _messages(spark: SparkSession, records: DataFrame) -> DataFrame:
    return as_messages(spark, JsonConverter(schemas_enable=True).to_messages(records))


def _met(messages: DataFrame) -> JsonConverter:
    converter = JsonConverter(schemas_enable=True)
    converter.to_records(messages).collect()  # a searched batch: the schemas are met
    assert converter.knows_schemas(["t"])
    return converter


def _stages(
    converter: JsonConverter, chain: list[Any] | None = None, *, tolerates: bool = False
) -> SinkStages:
    """The sink's stages for the schemas ``converter`` met (as ``SinkRunner._stages`` plans them)."""
    chain = chain or []
    records = converter.arrow_records(value_read(chain))
    assert records is not None
    return SinkStages(records, tuple(chain), False, "test", converter.key_envelopes, tolerates=tolerates)


def _arrow_decoded(converter: JsonConverter, messages: DataFrame, chain: list[Any]) -> pa.Table:
    outcome = _stages(converter, chain).run(messages.toArrow().to_batches(max_chunksize=3))
    assert isinstance(outcome, Made) and outcome.records is not None, outcome
    return outcome.records.sort_by("offset")


def _table(df: DataFrame) -> pa.Table:
    """The records in offset order; Spark's decode adds an error column, null here, that the Arrow
    decode has no use for (it declines instead of flagging; the sink drops the column)."""
    table = df.toArrow().sort_by("offset")
    if ERROR_COLUMN in table.column_names:
        assert table.column(ERROR_COLUMN).null_count == table.num_rows
        table = table.drop_columns([ERROR_COLUMN])
    return table


def _decoded_both_ways(spark: SparkSession, messages: DataFrame, chain: list[Any] | None = None) -> pa.Table:
    """The records of ``messages`` (through ``chain``) decoded by Spark and in Arrow, by a converter
    that met their schemas in a searched batch; checked equal, schema and values, and returned."""
    chain = chain or []
    narrow = value_read(chain)
    converter = JsonConverter(schemas_enable=True)
    by_spark = _table(chain_frame(chain, converter.to_records(messages, narrow)))  # meets the schemas
    by_arrow = _arrow_decoded(converter, messages, chain)
    assert by_arrow.schema.equals(by_spark.schema, check_metadata=True)
    assert by_arrow.to_pylist() == by_spark.to_pylist()
    return by_arrow


def test_the_arrow_decode_equals_sparks_for_every_type_it_reads(spark: SparkSession) -> None:
    values = _decoded_both_ways(spark, _messages(spark, _typed_records(spark, 9))).column("value").to_pylist()
    assert values[3] is None and values[2] == {**dict.fromkeys(values[2]), "id": 2}
    assert values[5]["amount"] == Decimal("-5.25")
    assert values[5]["at"] == datetime(2024, 5, 1, 12, 0, 5, 123456, tzinfo=UTC)


def test_a_topic_whose_schema_grew_decodes_as_spark_does(spark: SparkSession) -> None:
    """A column added mid-stream: two schemas met for one topic, merged; each record is decoded
    against its own prefix and put back in its place."""
    from pyspark.sql import functions as F

    old = _typed_records(spark, 6).drop("raw")
    grown = old.withColumn("value", F.struct("value.*", F.lit(7).alias("added")))
    grown = grown.withColumn("offset", F.col("offset") + 100)
    converter = JsonConverter(schemas_enable=True)
    messages = as_messages(spark, converter.to_messages(grown).unionByName(converter.to_messages(old)))
    values = _decoded_both_ways(spark, messages).column("value").to_pylist()
    added = [None if v is None else v["added"] for v in values]
    assert added == [None] * 6 + [7] * 6  # the old schema's records have no such field


def test_topics_of_different_types_decode_as_spark_does_each_record_with_its_own_type(
    spark: SparkSession,
) -> None:
    """One batch over two tables' topics (a CDC sink of a database): the merged type, and each
    record's own topic type in the header column a sink writes each table by."""
    from pyspark.sql import functions as F

    from sluice.connectors.converters import VALUE_SCHEMA_HEADER

    rows = _typed_records(spark, 6)
    other = rows.withColumn("topic", F.lit("u")).withColumn("offset", F.col("offset") + 100)
    other = other.withColumn("value", F.struct("value.id", "value.name", F.lit(1.5).alias("ratio")))
    converter = JsonConverter(schemas_enable=True)
    messages = as_messages(spark, converter.to_messages(rows).unionByName(converter.to_messages(other)))
    records = _decoded_both_ways(spark, messages).to_pylist()
    own = [dict(r["headers"]).get(VALUE_SCHEMA_HEADER) for r in records]
    assert len(set(own)) == 2 and None not in own  # the case under test: records of their own types


def test_a_narrowed_decode_of_change_events_gives_the_transform_what_spark_gives(spark: SparkSession) -> None:
    unwrap = "io.debezium.transforms.ExtractNewRecordState"
    chain = build_chain({"transforms": "u", "transforms.u.type": unwrap})
    assert _decoded_both_ways(spark, _messages(spark, change_events(spark)), chain).num_rows == 2


def _payload(body: bytes, old: bytes, new: bytes) -> bytes:
    """``body`` with the first ``old`` of its payload replaced (its schema left as it was)."""
    head, payload = body.split(PAYLOAD_KEY.encode(), 1)
    assert old in payload, (old, payload)
    return head + PAYLOAD_KEY.encode() + payload.replace(old, new, 1)


def _grown_schema(body: bytes) -> bytes:
    added = b'"field":"name"},{"type":"int8","optional":true,"field":"x"}'
    return body.replace(b'"field":"name"}', added, 1)


def _edited(spark: SparkSession, edit: Any) -> tuple[JsonConverter, pa.RecordBatch]:
    """A converter that met a batch's schemas, and the batch with the body of its record at queue
    offset 104 edited by ``edit``."""
    import pyarrow as pa

    messages = _messages(spark, _typed_records(spark, 6))
    converter = _met(messages)
    table = messages.toArrow()
    bodies = table.column("body").to_pylist()
    bodies[4] = edit(bodies[4])
    table = table.set_column(table.schema.get_field_index("body"), "body", pa.array(bodies, pa.binary()))
    return converter, table.combine_chunks().to_batches()[0]


def _decode_edited(spark: SparkSession, edit: Any) -> pa.RecordBatch:
    """Decode in Arrow a batch whose record at queue offset 104 has its body edited by ``edit``."""
    converter, batch = _edited(spark, edit)
    records = converter.arrow_records()
    assert records is not None
    return records.value.decode(batch)


VALUE_TYPE = "struct<id:bigint,tiny:tinyint"


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda b: b[:-40] + b"\xff" + b[-39:], "json converter: body is not UTF-8"),
        (
            lambda b: _payload(b, b'"name":"', b'"name":7,"x":"'),
            f"json converter: body envelope does not parse as {VALUE_TYPE}",
        ),
        (
            lambda b: _payload(b, b'"amount":"', b'"amount":"!'),
            "json converter: body envelope does not parse",
        ),
        (
            lambda b: _payload(b, b'"wide":"', b'"wide":"' + base64.b64encode(b"\x7f" * 16) + b'","x":"'),
            "json converter: body envelope does not parse",
        ),
        (
            lambda b: _payload(b, b'"at":"', b'"at":"May 1, 2024","x":"'),
            "json converter: body envelope does not parse",
        ),
        (lambda b: _payload(b, b"{", b"[{") + b"]", "json converter: body envelope does not parse"),
        (lambda b: b"[" + b + b"]", "json converter: body is not a Connect JSON envelope"),
    ],
)
def test_what_the_arrow_decode_cannot_read_is_flagged_naming_why_and_the_rest_read(
    spark: SparkSession, edit: Any, reason: str
) -> None:
    decoded = _decode_edited(spark, edit)
    errors = decoded.column(ERROR_COLUMN).to_pylist()
    assert errors[4] is not None and errors[4].startswith(reason)
    assert errors[:4] + errors[5:] == [None] * 5
    values = decoded.column("value").to_pylist()
    assert values[4] is None and values[5] is not None and values[5]["id"] == 5
    converter, batch = _edited(spark, edit)  # the sink's stages: a typed outcome naming the record
    outcome = _stages(converter).run([batch])
    assert isinstance(outcome, Bad)
    assert outcome.message.startswith(
        f"connector test: bad record at topic 't' partition 'broker-a:1' offset 104: {reason}"
    )
    tolerated = _stages(converter, tolerates=True).run([batch])  # tolerance: the rest, and a dead letter
    assert isinstance(tolerated, Made) and tolerated.records is not None and tolerated.dead is not None
    assert tolerated.records.column("offset").to_pylist() == [100, 101, 102, 103, 105]
    (letter,) = tolerated.dead.to_pylist()
    properties = dict(letter["properties"])
    assert letter["body"] == batch.column("body")[4].as_py() and properties["sluice.origin.offset"] == "104"
    assert properties["sluice.error"].startswith(reason) and properties["sluice.connector"] == "test"


def test_an_envelope_laid_out_otherwise_is_read_as_kafkas_layout_is(spark: SparkSession) -> None:
    import json

    def relaid(body: bytes) -> bytes:
        envelope = json.loads(body)
        return json.dumps({"payload": envelope["payload"], "schema": envelope["schema"]}, indent=1).encode()

    decoded = _decode_edited(spark, relaid)
    assert decoded.column(ERROR_COLUMN).null_count == decoded.num_rows
    converter, batch = _edited(spark, lambda b: b)
    assert (
        decoded.column("value").to_pylist() == _decode_edited(spark, lambda b: b).column("value").to_pylist()
    )


def test_a_body_of_a_schema_not_met_is_an_outcome_carrying_the_batchs_schemas(spark: SparkSession) -> None:
    """The decoder names the first such record; the stages find the share's schema prefixes (the
    grown one among them) for the runner to remember before running the batch again."""
    where = r"\(first at topic 't' queue 'broker-a:1' offset 104\)"
    with pytest.raises(UnmetSchemaError, match=r"an envelope schema not met in earlier batches " + where):
        _decode_edited(spark, _grown_schema)
    converter, batch = _edited(spark, _grown_schema)
    outcome = _stages(converter).run([batch])
    assert isinstance(outcome, Unmet)
    met = set(converter.seen_prefixes.known("value"))
    grown = {p for p in outcome.found["value"] if p not in met}
    assert len(grown) == 1 and '"field":"x"' in next(iter(grown))[1]
    converter.seen_prefixes.remember(outcome.found)
    again = _stages(converter).run([batch])  # the batch run again with the schemas learnt
    assert isinstance(again, Made) and again.records is not None
    assert [v and v.get("x") for v in again.records.column("value").to_pylist()] == [None] * 6


def test_a_record_a_transform_flags_is_a_bad_outcome_naming_it(spark: SparkSession) -> None:
    messages = _messages(spark, _typed_records(spark, 4))
    cast_type = "org.apache.kafka.connect.transforms.Cast$Value"
    cast = build_chain({"transforms": "c", "transforms.c.type": cast_type, "transforms.c.spec": "name:int32"})
    outcome = _stages(_met(messages), cast).run(messages.toArrow().to_batches())
    assert isinstance(outcome, Bad) and outcome.message.startswith("connector test: bad record at topic 't'")


def test_a_value_with_a_map_is_left_to_sparks_decode(spark: SparkSession) -> None:
    from pyspark.sql.types import MapType, StringType, StructField, StructType

    mapped = StructType(
        [StructField("id", StringType()), StructField("m", MapType(StringType(), StringType()))]
    )
    records = make_records(spark, [Record("p", 0, {"id": "a", "m": {"k": "v"}}, topic="t")], mapped)
    converter = _met(_messages(spark, records))
    assert converter.arrow_records() is None  # a map: Spark's decode only
