"""The Arrow decode of envelopes whose schemas a sink met (connectors.arrow_envelopes) gives back
the records that were sent, schema and values, and flags a record it cannot read, naming why; the
sink's stages (connectors.sink_stages) turn each of those into a typed outcome.

Each case encodes records with the json converter (schemas on, as a source sends them) and decodes
the messages as a sink does (tests.connectors.decoding.records_of: the batch's schemas learnt
first), and by the sink's stages over the reader's Arrow batches in slices, as the sink runs them
in its process or in a Spark task. ``sent_records`` says what each record must decode to.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from sluice.connectors.arrow_envelopes import UnmetSchemaError
from sluice.connectors.barriers import BARRIER_HEADER
from sluice.connectors.connect_schemas import PAYLOAD_KEY
from sluice.connectors.converters import OFFSET_PROPERTY, PARTITION_PROPERTY, TAGS_HEADER, JsonConverter
from sluice.connectors.records import ERROR_COLUMN, VALUE_SCHEMA_HEADER, Record, make_records
from sluice.connectors.sink_stages import SinkStages, Unmet
from sluice.connectors.stage_outcomes import Bad, Made
from sluice.connectors.transforms import build_chain, value_read
from tests.connectors.decoding import records_of
from tests.connectors.encoding import messages_of
from tests.connectors.test_converters import BORN, as_messages
from tests.connectors.test_extract_new_record_state import _records as change_events

if TYPE_CHECKING:
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
    return as_messages(spark, messages_of(JsonConverter(schemas_enable=True), records))


def arrow_type(ddl: str) -> pa.DataType:
    """The Arrow type of the Spark DDL type ``ddl``: a decoded value's, every field nullable."""
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import StructType

    return to_arrow_type(StructType.fromDDL(ddl))


def record_schema(value: pa.DataType, key: pa.DataType | None = None) -> pa.Schema:
    """The Arrow schema of a sink's decoded records (connectors.arrow_records), the error column
    dropped; keys are text unless they are envelopes of another type."""
    return pa.schema(
        [
            pa.field("topic", pa.string()),
            pa.field("partition", pa.string()),
            pa.field("offset", pa.int64()),
            pa.field("key", key or pa.string()),
            pa.field("value", value),
            pa.field("headers", pa.map_(pa.string(), pa.string()), nullable=False),
            pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        ]
    )


def sent_records(*frames: DataFrame, own_types: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """What a sink's decode must make of the records of ``frames`` sent by a converter's Arrow
    encoder (tests.connectors.encoding.messages_of) and read back by ``as_messages``, in queue
    order (the records' partition and offset): each record's topic, key and value as they were
    sent; its queue's partition ``broker-a:1``, offsets from 100 and ``BORN``; as headers
    (``decoded_rows``' dicts) the record's own that travel (Sluice's and ``rocketmq.tags`` do
    not, but a barrier label), its position (``sluice.partition``, ``sluice.offset``), its tags,
    and where topics differ in type, its topic's own type from ``own_types``
    (records.VALUE_SCHEMA_HEADER)."""
    rows = sorted(
        (row for frame in frames for row in frame.toArrow().to_pylist()),
        key=lambda r: (r["partition"], r["offset"]),
    )
    made = []
    for i, row in enumerate(rows):
        sent = dict(row["headers"] or [])
        headers = {
            k: v
            for k, v in sent.items()
            if v is not None and (not k.startswith("sluice.") or k == BARRIER_HEADER) and k != TAGS_HEADER
        }
        headers |= {PARTITION_PROPERTY: row["partition"], OFFSET_PROPERTY: str(row["offset"])}
        if sent.get(TAGS_HEADER):
            headers[TAGS_HEADER] = sent[TAGS_HEADER]
        if own_types is not None:
            headers[VALUE_SCHEMA_HEADER] = own_types[row["topic"]]
        made.append(
            {
                "topic": row["topic"],
                "partition": "broker-a:1",
                "offset": 100 + i,
                "key": row["key"],
                "value": row["value"],
                "headers": headers,
                "timestamp": BORN.replace(tzinfo=UTC),
            }
        )
    return made


def decoded_rows(records: pa.Table) -> list[dict[str, Any]]:
    """``records``' rows, headers as a dict (each name once: a map's keys are unique)."""
    rows = records.to_pylist()
    for row in rows:
        headers = row["headers"]
        assert len({name for name, _ in headers}) == len(headers), headers
        row["headers"] = dict(headers)
    return rows


def _stages(
    converter: JsonConverter, chain: list[Any] | None = None, *, tolerates: bool = False
) -> SinkStages:
    """The sink's stages for the schemas ``converter`` met (as ``SinkRunner._stages`` plans them)."""
    chain = chain or []
    records = converter.arrow_records(value_read(chain))
    return SinkStages(records, tuple(chain), False, "test", converter.key_envelopes, tolerates=tolerates)


def _met(messages: DataFrame) -> JsonConverter:
    """A converter that met the schemas of ``messages``, as a sink does before decoding a batch."""
    converter = JsonConverter(schemas_enable=True)
    records_of(converter, messages)
    assert converter.knows_schemas(["t"])
    return converter


def _decoded(messages: DataFrame, chain: list[Any] | None = None) -> pa.Table:
    """The records of ``messages`` (through ``chain``) a sink decodes, in offset order, none
    flagged (the error column dropped); the sink's stages over the reader's batches in slices of 3
    make the same."""
    chain = chain or []
    converter = JsonConverter(schemas_enable=True)
    records = records_of(converter, messages, chain).sort_by("offset")
    if ERROR_COLUMN in records.column_names:
        assert records.column(ERROR_COLUMN).null_count == records.num_rows
        records = records.drop_columns([ERROR_COLUMN])
    staged = _stages(converter, chain).run(messages.toArrow().to_batches(max_chunksize=3))
    assert isinstance(staged, Made) and staged.records is not None, staged
    assert staged.records.sort_by("offset").equals(records, check_metadata=True)
    return records


def test_records_of_every_type_decode_as_they_were_sent(spark: SparkSession) -> None:
    records = _typed_records(spark, 9)
    decoded = _decoded(_messages(spark, records))
    assert decoded.schema.equals(record_schema(arrow_type(VALUE_DDL)), check_metadata=True)
    assert decoded_rows(decoded) == sent_records(records)
    values = decoded.column("value").to_pylist()
    assert values[3] is None and values[2] == {**dict.fromkeys(values[2]), "id": 2}
    assert values[5]["amount"] == Decimal("-5.25") and values[5]["f"] == 0.25
    assert values[5]["at"] == datetime(2024, 5, 1, 12, 0, 5, 123456, tzinfo=UTC)
    assert values[5]["wide"] == Decimal("123456789012345678901234.00005")


def test_a_topic_whose_schema_grew_decodes_each_record_as_it_was_sent(spark: SparkSession) -> None:
    """A column added mid-stream: two schemas met for one topic, merged; each record is decoded
    against its own prefix and put back in its place."""
    from pyspark.sql import functions as F

    old = _typed_records(spark, 6)
    grown = old.withColumn("value", F.struct("value.*", F.lit(7).alias("added")))
    grown = grown.withColumn("offset", F.col("offset") + 100)
    converter = JsonConverter(schemas_enable=True)
    messages = as_messages(spark, messages_of(converter, grown, old))
    decoded = _decoded(messages)
    assert decoded.schema.equals(record_schema(arrow_type(VALUE_DDL + ", added int")), check_metadata=True)
    expected = sent_records(old, grown)
    for row in expected[:6]:  # the old schema's records have no such field: null in the merged type
        row["value"] = None if row["value"] is None else {**row["value"], "added": None}
    assert decoded_rows(decoded) == expected
    added = [None if v is None else v["added"] for v in decoded.column("value").to_pylist()]
    assert added == [None] * 6 + [7] * 6


def test_topics_of_different_types_decode_each_record_naming_its_own_type(spark: SparkSession) -> None:
    """One batch over two tables' topics (a CDC sink of a database): the merged type, and each
    record's own topic type, the one it was sent with, in the header a sink writes each table by."""
    from pyspark.sql import functions as F

    rows = _typed_records(spark, 6)
    other = rows.withColumn("topic", F.lit("u")).withColumn("offset", F.col("offset") + 100)
    other = other.withColumn("value", F.struct("value.id", "value.name", F.lit(1.5).alias("ratio")))
    converter = JsonConverter(schemas_enable=True)
    messages = as_messages(spark, messages_of(converter, rows, other))
    decoded = _decoded(messages)
    assert decoded.schema.equals(record_schema(arrow_type(VALUE_DDL + ", ratio double")), check_metadata=True)
    own = {"t": rows.schema["value"].dataType.json(), "u": other.schema["value"].dataType.json()}
    assert '"ratio","nullable":false' in own["u"]  # the type as sent: a literal is never null
    expected = sent_records(rows, other, own_types=own)
    merged = dict.fromkeys(arrow_type(VALUE_DDL + ", ratio double").names)
    for row in expected:
        row["value"] = None if row["value"] is None else {**merged, **row["value"]}
    assert decoded_rows(decoded) == expected


def test_a_narrowed_decode_of_change_events_gives_the_transform_the_events_sent(spark: SparkSession) -> None:
    """The unwrap reads the events' ``op`` and ``after`` only (transforms.value_read): what it makes
    of them is the rows created and updated."""
    unwrap = "io.debezium.transforms.ExtractNewRecordState"
    chain = build_chain({"transforms": "u", "transforms.u.type": unwrap})
    decoded = _decoded(_messages(spark, change_events(spark)), chain)
    assert decoded.schema.equals(record_schema(pa.struct([("id", pa.int32()), ("name", pa.string())])))
    assert decoded_rows(decoded) == [
        {
            "topic": "p_public_t",
            "partition": "broker-a:1",
            "offset": 100 + i,
            "key": '{"id":1}',
            "value": {"id": 1, "name": name},
            "headers": {PARTITION_PROPERTY: "public.t", OFFSET_PROPERTY: str(i)},
            "timestamp": BORN.replace(tzinfo=UTC),
        }
        for i, name in enumerate(["a", "b"])
    ]


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
    return converter.arrow_records().value.decode(batch)


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
    sent = [record["value"] for record in sent_records(_typed_records(spark, 6))]
    assert decoded.column("value").to_pylist() == sent


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda b: _payload(b, b'{"id"', b'\n  {"id"'), "as sent"),  # a line break in the payload
        (lambda b: b[: b.index(b',"payload":') + 11] + b"null}", None),  # a null value of an optional schema
    ],
    ids=["line-break", "null-payload"],
)
def test_a_payload_written_otherwise_after_a_schema_met_is_read(
    spark: SparkSession, edit: Any, expected: str | None
) -> None:
    decoded = _decode_edited(spark, edit)
    assert decoded.column(ERROR_COLUMN).null_count == decoded.num_rows
    sent = [record["value"] for record in sent_records(_typed_records(spark, 6))]
    values = decoded.column("value").to_pylist()
    assert values[:4] + values[5:] == sent[:4] + sent[5:]
    assert values[4] == (sent[4] if expected == "as sent" else None)


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


def test_a_value_with_maps_decodes_as_it_was_sent(spark: SparkSession) -> None:
    """Arrow's JSON reader has no map type: a payload holding one is parsed one by one."""
    ddl = "id string, m map<string,string>, counts array<map<string,bigint>>"
    from pyspark.sql.types import StructType

    values = [
        {"id": "a", "m": {"k": "v", "n": None}, "counts": [{"x": 1}, {}]},
        {"id": "b", "m": None, "counts": None},
        None,
    ]
    records = make_records(
        spark, [Record("p", i, v, topic="t") for i, v in enumerate(values)], StructType.fromDDL(ddl)
    )
    decoded = _decoded(_messages(spark, records))
    assert decoded.schema.equals(record_schema(arrow_type(ddl)), check_metadata=True)
    assert decoded_rows(decoded) == sent_records(records)
    got = decoded.column("value").to_pylist()
    assert dict(got[0]["m"]) == {"k": "v", "n": None} and got[0]["counts"] == [[("x", 1)], []]
    assert got[1] == {"id": "b", "m": None, "counts": None} and got[2] is None


@pytest.mark.parametrize(
    "ddl",
    [
        "id bigint, m array<struct<k: string, n: bigint>>",
        "id bigint, m map<string,bigint>",  # a map: parsed payload by payload, checked as the reader checks
    ],
)
def test_a_fraction_for_an_integer_does_not_fit_its_type(spark: SparkSession, ddl: str) -> None:
    """A payload whose integer field (or map value) holds a fraction does not fit its type: the
    record is flagged, never read with its number cut to an integer, whether its type holds a map
    (parsed payload by payload) or not (read by Arrow's JSON reader)."""
    from pyspark.sql.types import StructType

    maps = "map" in ddl
    values = [{"id": i, "m": {"k": i} if maps else [{"k": "k", "n": i}]} for i in range(3)]
    records = make_records(
        spark, [Record("p", i, v, topic="t") for i, v in enumerate(values)], StructType.fromDDL(ddl)
    )
    messages = _messages(spark, records).toArrow()
    bodies = messages.column("body").to_pylist()
    bodies[1] = _payload(bodies[1], b'"id":1', b'"id":1.5')
    bodies[2] = _payload(bodies[2], b'"k":2' if maps else b'"n":2', b'"k":2.5' if maps else b'"n":2.5')
    edited = messages.set_column(
        messages.schema.get_field_index("body"), "body", pa.array(bodies, pa.binary())
    )
    decoded = records_of(JsonConverter(schemas_enable=True), edited)
    problem = "json converter: body envelope does not parse as " + StructType.fromDDL(ddl).simpleString()
    assert decoded.column(ERROR_COLUMN).to_pylist() == [None, problem, problem]
    assert decoded.column("value").to_pylist() == [sent_records(records)[0]["value"], None, None]
