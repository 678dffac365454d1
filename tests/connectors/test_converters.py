"""Converters: record <-> message round trips; the Connect JSON envelope as Kafka Connect writes it."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

import pytest

from sluice.connectors.connect_json import connect_schema, spark_type
from sluice.connectors.converters import (
    TOMBSTONE_PROPERTY,
    BytesConverter,
    JsonConverter,
    StringConverter,
    converter_for,
)
from sluice.connectors.records import ERROR_COLUMN, Record, RecordError, good_arrow_records, make_records
from tests.connectors.decoding import records_of
from tests.connectors.encoding import messages_of

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

READ_SCHEMA = (
    "topic string, partition string, queue_id int, queue_offset long, keys string, tags string, "
    "properties map<string,string>, born_timestamp timestamp, store_timestamp timestamp, body binary"
)
BORN = datetime(2024, 5, 1, 12, 0, 0)
#: ``BORN`` as the decoded records carry it: Spark's session zone is UTC, Arrow's timestamps say so.
BORN_UTC = BORN.replace(tzinfo=UTC)

# What Kafka's / RocketMQ Connect's JsonConverter writes for this Connect schema and value (key order and
# compact separators included): a struct with a required int32, an optional string, an optional array of
# strings, an optional nested struct, and a Timestamp logical type.
KAFKA_ENVELOPE = (
    '{"schema":{"type":"struct","fields":['
    '{"type":"int32","optional":false,"field":"id"},'
    '{"type":"string","optional":true,"field":"name"},'
    '{"type":"array","items":{"type":"string","optional":false},"optional":true,"field":"tags"},'
    '{"type":"struct","fields":[{"type":"string","optional":false,"field":"city"},'
    '{"type":"int64","optional":true,"field":"zip"}],"optional":true,"field":"addr"},'
    '{"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","version":1,'
    '"field":"created_at"}'
    '],"optional":false},'
    '"payload":{"id":1,"name":"ann","tags":["a","b"],"addr":{"city":"Oslo","zip":null},'
    '"created_at":1714564800000}}'
)
# What Sluice's converter writes for the same record: Kafka's envelope byte for byte, except the
# instant. Kafka's Timestamp keeps milliseconds, so Sluice writes Debezium's ZonedTimestamp (ISO-8601,
# microseconds); a sink reads both.
SLUICE_ENVELOPE = KAFKA_ENVELOPE.replace(
    '{"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp"',
    '{"type":"string","optional":true,"name":"io.debezium.time.ZonedTimestamp"',
).replace('"created_at":1714564800000', '"created_at":"2024-05-01T12:00:00.000000Z"')


def value_type() -> Any:
    from pyspark.sql.types import (
        ArrayType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    return StructType(
        [
            StructField("id", IntegerType(), False),
            StructField("name", StringType(), True),
            StructField("tags", ArrayType(StringType(), False), True),
            StructField(
                "addr",
                StructType([StructField("city", StringType(), False), StructField("zip", LongType(), True)]),
                True,
            ),
            StructField("created_at", TimestampType(), True),
        ]
    )


def as_messages(spark: SparkSession, messages: pa.Table, queue_offset_base: int = 100) -> DataFrame:
    """What the RocketMQ reader would give back for messages the writer sent (round trip without a
    broker), in source order (partition, offset)."""
    rows = messages.sort_by([("partition", "ascending"), ("offset", "ascending")]).to_pylist()
    return spark.createDataFrame(
        [
            (
                r["topic"],
                "broker-a:1",
                1,
                queue_offset_base + i,
                r["keys"],
                r["tags"],
                dict(r["properties"]),
                BORN,
                BORN,
                r["body"],
            )
            for i, r in enumerate(rows)
        ],
        READ_SCHEMA,
    )


def raw_messages(spark: SparkSession, bodies: list[bytes | None]) -> DataFrame:
    return spark.createDataFrame(
        [("t", "broker-a:0", 0, i, None, None, {}, BORN, BORN, b) for i, b in enumerate(bodies)], READ_SCHEMA
    )


def test_string_round_trip_carries_key_headers_tags_and_position(spark: SparkSession) -> None:
    records = make_records(
        spark,
        [
            Record("f.txt", 0, "héllo", topic="t", key="k1", headers={"trace": "9", "rocketmq.tags": "TagA"}),
            Record("f.txt", 6, "world", topic="t", headers={"sluice.offset": "spoofed"}),
        ],
    )
    msgs = messages_of(StringConverter(), records)
    got = [(r["body"], r["keys"], r["tags"], dict(r["properties"])) for r in msgs.to_pylist()]
    assert got == [
        ("héllo".encode(), "k1", "TagA", {"trace": "9", "sluice.partition": "f.txt", "sluice.offset": "0"}),
        (b"world", None, None, {"sluice.partition": "f.txt", "sluice.offset": "6"}),
    ]
    back = records_of(StringConverter(), as_messages(spark, msgs)).to_pylist()
    assert [{**r, "headers": dict(r["headers"])} for r in back] == [
        {
            "topic": "t",
            "partition": "broker-a:1",
            "offset": 100,
            "key": "k1",
            "value": "héllo",
            "headers": {
                "trace": "9",
                "sluice.partition": "f.txt",
                "sluice.offset": "0",
                "rocketmq.tags": "TagA",
            },
            "timestamp": BORN_UTC,
            ERROR_COLUMN: None,
        },
        {
            "topic": "t",
            "partition": "broker-a:1",
            "offset": 101,
            "key": None,
            "value": "world",
            "headers": {"sluice.partition": "f.txt", "sluice.offset": "6"},
            "timestamp": BORN_UTC,
            ERROR_COLUMN: None,
        },
    ]


def test_string_decode_flags_invalid_utf8(spark: SparkSession) -> None:
    out = records_of(StringConverter(), raw_messages(spark, [b"ok", b"\xff\xfe"]))
    assert out.column("value").to_pylist() == ["ok", None]
    assert out.column(ERROR_COLUMN).to_pylist() == [None, "string converter: body is not UTF-8"]
    with pytest.raises(
        RecordError, match="topic 't' partition 'broker-a:0' offset 1: string converter: body is not UTF-8"
    ):
        good_arrow_records(out, "connector 'c'")


def test_bad_records_fail_the_batch_naming_the_first(spark: SparkSession) -> None:
    """The sink's check (connectors.sink_stages): a batch with bad records fails naming the first in
    record order; a good batch passes without the error column."""
    out = records_of(StringConverter(), raw_messages(spark, [b"ok", b"\xff\xfe", b"fine", b"\xfe"]))
    with pytest.raises(RecordError) as info:
        good_arrow_records(out, "connector 'c'")
    assert str(info.value) == (
        "connector 'c': bad record at topic 't' partition 'broker-a:0' offset 1: "
        "string converter: body is not UTF-8"
    )
    good = good_arrow_records(records_of(StringConverter(), raw_messages(spark, [b"a", b"b"])), "c")
    assert ERROR_COLUMN not in good.column_names
    assert good.column("value").to_pylist() == ["a", "b"]


def test_bytes_round_trip(spark: SparkSession) -> None:
    from pyspark.sql.types import BinaryType

    records = make_records(spark, [Record("p", 0, bytearray(b"\x00\x01\xff"), topic="t")], BinaryType())
    back = records_of(BytesConverter(), as_messages(spark, messages_of(BytesConverter(), records)))
    assert back.column("value").to_pylist() == [b"\x00\x01\xff"]


def test_json_envelope_written_like_kafka(spark: SparkSession) -> None:
    from pyspark.sql.types import StructField, StructType

    records = make_records(
        spark,
        [
            Record(
                "p",
                0,
                {
                    "id": 1,
                    "name": "ann",
                    "tags": ["a", "b"],
                    "addr": {"city": "Oslo", "zip": None},
                    "created_at": datetime(2024, 5, 1, 12, 0),
                },
                topic="t",
            )
        ],
        value_type(),
    )
    # The top-level value of a Connect record is required unless declared optional: mirror that.
    required = StructType(
        [f if f.name != "value" else StructField("value", value_type(), False) for f in records.schema.fields]
    )
    records = spark.createDataFrame(records.rdd, required)
    body = messages_of(JsonConverter(schemas_enable=True), records).column("body")[0].as_py()
    # Kafka's envelope byte for byte, except the instant (SLUICE_ENVELOPE says why).
    assert body.decode() == SLUICE_ENVELOPE


@pytest.mark.parametrize(
    "envelope",
    [
        pytest.param(KAFKA_ENVELOPE, id="kafka-epoch-millis"),
        pytest.param(SLUICE_ENVELOPE, id="sluice-iso-instant"),
    ],
)
def test_json_envelope_read_from_kafka_literal(spark: SparkSession, envelope: str) -> None:
    other = json.loads(envelope)
    other["payload"] = {"id": 2, "name": None, "tags": None, "addr": None, "created_at": None}
    out = records_of(
        JsonConverter(schemas_enable=True),
        raw_messages(spark, [envelope.encode(), json.dumps(other).encode()]),
    )
    assert str(out.schema.field("value").type) == (
        "struct<id: int32, name: string, tags: list<element: string>, "
        "addr: struct<city: string, zip: int64>, created_at: timestamp[us, tz=UTC]>"
    )
    assert out.column(ERROR_COLUMN).to_pylist() == [None, None]
    assert out.column("value").to_pylist() == [
        {
            "id": 1,
            "name": "ann",
            "tags": ["a", "b"],
            "addr": {"city": "Oslo", "zip": None},
            "created_at": datetime(2024, 5, 1, 12, 0, tzinfo=UTC),
        },
        {"id": 2, "name": None, "tags": None, "addr": None, "created_at": None},
    ]
    assert good_arrow_records(out, "c").column_names == [
        "topic",
        "partition",
        "offset",
        "key",
        "value",
        "headers",
        "timestamp",
    ]


def test_json_round_trip_all_types(spark: SparkSession) -> None:
    from pyspark.sql.types import _parse_datatype_string

    ddl = (
        "struct<b:tinyint,s:smallint,i:int,l:bigint,f:float,d:double,ok:boolean,txt:string,raw:binary,"
        "day:date,at:timestamp,local:timestamp_ntz,xs:array<struct<n:int>>,m:map<string,double>,"
        "opt:struct<x:string>>"
    )
    value = {
        "b": 1,
        "s": 2,
        "i": 3,
        "l": 2**40,
        "f": 1.5,
        "d": 2.25,
        "ok": True,
        "txt": 'ü"q',
        "raw": bytearray(b"\x00z"),
        "day": date(2024, 2, 29),
        "at": datetime(2024, 5, 1, 1, 2, 3, 4567),  # microseconds survive
        "local": datetime(1969, 12, 31, 23, 59, 59, 999_999),
        "xs": [{"n": 1}, {"n": None}],
        "m": {"k": 0.5},
        "opt": None,
    }
    # as Arrow gives them back: an instant in UTC, a map as its entries
    expected = {**value, "at": value["at"].replace(tzinfo=UTC), "m": [("k", 0.5)]}
    records = make_records(spark, [Record("p", 0, value, topic="t")], _parse_datatype_string(ddl))
    envelopes = JsonConverter(schemas_enable=True)
    (row,) = records_of(envelopes, as_messages(spark, messages_of(envelopes, records))).to_pylist()
    assert row[ERROR_COLUMN] is None
    assert row["value"] == expected
    # A declared schema is read in Arrow, which reads no map from a bare body: refused, naming why.
    declared = JsonConverter(schemas_enable=False, value_schema=ddl)
    with pytest.raises(ValueError, match=r"holds a type read only from Connect envelopes \(a map\)"):
        records_of(declared, as_messages(spark, messages_of(declared, records)))
    ddl = ddl.replace("m:map<string,double>,", "")
    del value["m"], expected["m"]
    records = make_records(spark, [Record("p", 0, value, topic="t")], _parse_datatype_string(ddl))
    for converter in (
        JsonConverter(schemas_enable=False, value_schema=ddl),
        JsonConverter(schemas_enable=True, value_schema=ddl),
    ):
        (row,) = records_of(converter, as_messages(spark, messages_of(converter, records))).to_pylist()
        assert row[ERROR_COLUMN] is None
        assert row["value"] == expected


def test_json_schemaless_keeps_text_or_parses_declared_schema(spark: SparkSession) -> None:
    bodies = [b'{"a": 1, "b": "x"}', b'{"a": "not-a-number"}', b"{broken", None]
    plain = records_of(JsonConverter(), raw_messages(spark, bodies)).to_pylist()
    assert [(r["value"], r[ERROR_COLUMN]) for r in plain] == [
        ('{"a": 1, "b": "x"}', None),
        ('{"a": "not-a-number"}', None),
        ("{broken", "json converter: body is not valid JSON"),  # never passed on silently
        (None, None),
    ]
    typed = records_of(JsonConverter(value_schema="a int, b string"), raw_messages(spark, bodies))
    assert typed.column("value").to_pylist() == [{"a": 1, "b": "x"}, None, None, None]  # flagged: null
    assert typed.column(ERROR_COLUMN).to_pylist() == [
        None,
        "json converter: body does not parse as struct<a:int,b:string>",
        "json converter: body does not parse as struct<a:int,b:string>",
        None,
    ]
    with pytest.raises(RecordError) as info:
        good_arrow_records(typed, "connector 'orders-sink'")
    assert str(info.value) == (
        "connector 'orders-sink': bad record at topic 't' partition 'broker-a:0' offset 1: "
        "json converter: body does not parse as struct<a:int,b:string>"
    )


def test_json_string_values_with_declared_schema_are_checked_on_write(spark: SparkSession) -> None:
    records = make_records(spark, [Record("f", 0, '{"a": 5}', topic="t"), Record("f", 9, "oops", topic="t")])
    msgs = messages_of(JsonConverter(schemas_enable=True, value_schema="a int"), records)
    rows = msgs.to_pylist()
    assert json.loads(rows[0]["body"]) == {
        "schema": {
            "type": "struct",
            "fields": [{"type": "int32", "optional": True, "field": "a"}],
            "optional": True,
        },
        "payload": {"a": 5},
    }
    with pytest.raises(
        RecordError, match="topic 't' partition 'f' offset 9: json converter: value does not parse"
    ):
        good_arrow_records(msgs, "connector 'x'")


@pytest.mark.parametrize(
    ("schema", "ddl"),
    [
        ({"type": "int8", "optional": False}, "tinyint"),
        ({"type": "float64", "optional": True}, "double"),
        ({"type": "bytes", "optional": True}, "binary"),
        (
            {"type": "int32", "optional": True, "name": "org.apache.kafka.connect.data.Date", "version": 1},
            "date",
        ),
        (
            {
                "type": "map",
                "keys": {"type": "string", "optional": False},
                "values": {"type": "int64", "optional": True},
                "optional": True,
            },
            "map<string,bigint>",
        ),
        (
            {"type": "array", "items": {"type": "boolean", "optional": True}, "optional": False},
            "array<boolean>",
        ),
    ],
)
def test_connect_schema_mapping_both_ways(schema: dict[str, Any], ddl: str) -> None:
    data_type = spark_type(schema)
    assert data_type.simpleString() == ddl
    assert connect_schema(data_type, schema["optional"]) == schema


def test_unsupported_connect_schema_is_named() -> None:
    with pytest.raises(ValueError, match=r"schema.m.values: unsupported Connect schema type 'decimal'"):
        spark_type(
            {
                "type": "struct",
                "fields": [
                    {"field": "m", "type": "map", "keys": {"type": "string"}, "values": {"type": "decimal"}}
                ],
            }
        )


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, StringConverter),
        ({"value.converter": "bytes"}, BytesConverter),
        ({"value.converter": "org.apache.kafka.connect.json.JsonConverter"}, JsonConverter),
    ],
)
def test_converter_for(config: dict[str, str], expected: type) -> None:
    assert type(converter_for(config)) is expected


def test_converter_for_json_options_and_unknown() -> None:
    converter = converter_for(
        {
            "value.converter": "json",
            "value.converter.schemas.enable": "true",
            "value.converter.schema": "a int",
        }
    )
    assert isinstance(converter, JsonConverter)
    assert (converter.schemas_enable, converter.value_schema) == (True, "a int")
    with pytest.raises(ValueError, match="config field 'value.converter': unknown converter 'avro'"):
        converter_for({"value.converter": "avro"})


def test_json_schemaless_read_flags_bodies_that_are_not_json(spark: SparkSession) -> None:
    bodies = [b'{"a":1}', b'"s"', b"12", b"null", b"[1, 2]", b"plain text", b"", b"1, 2", b"\xff{}", None]
    out = records_of(JsonConverter(), raw_messages(spark, bodies))
    not_json = "json converter: body is not valid JSON"
    assert out.column(ERROR_COLUMN).to_pylist() == [
        *[None] * 5,
        not_json,
        not_json,
        not_json,
        "json converter: body is not UTF-8",
        None,
    ]
    # schemaless, a body that is not JSON keeps its text; one that is not text has none
    texts = [None if b is None or b.startswith(b"\xff") else b.decode() for b in bodies]
    assert out.column("value").to_pylist() == texts


def test_json_schemaless_write_flags_string_values_that_are_not_json(spark: SparkSession) -> None:
    records = make_records(
        spark,
        [Record("f", 0, '{"id": 1}', topic="t"), Record("f", 4, "id=1", topic="t"), Record("f", 9, None)],
    )
    messages = messages_of(JsonConverter(), records)
    got = [
        (r["body"], r[ERROR_COLUMN], dict(r["properties"]).get(TOMBSTONE_PROPERTY))
        for r in messages.to_pylist()
    ]
    assert got == [
        (b'{"id": 1}', None, None),
        (b"id=1", "json converter: value is not valid JSON", None),
        (b"", None, "true"),  # a null value is a tombstone: an empty body, marked
    ]
    with pytest.raises(RecordError) as info:
        good_arrow_records(messages, "connector 'src'")
    assert str(info.value) == (
        "connector 'src': bad record at topic 't' partition 'f' offset 4: "
        "json converter: value is not valid JSON"
    )


def test_messages_over_the_broker_limit_are_flagged_per_record(spark: SparkSession) -> None:
    from sluice.connectors.rocketmq.codec import STORED_OVERHEAD
    from sluice.connectors.rocketmq.limits import MAX_MESSAGE_BYTES, unsendable

    big = "x" * MAX_MESSAGE_BYTES
    records = make_records(
        spark, [Record("f", 0, "small", topic="t"), Record("f", 6, big, topic="t"), Record("f", 99, "ok")]
    )
    problems = unsendable(messages_of(StringConverter(), records))
    assert problems is not None
    reasons = problems.to_pylist()
    assert [r is None for r in reasons] == [True, False, True]
    # body, 2 bytes of its length, the properties (KEYS none; sluice.partition, sluice.offset,
    # UNIQ_KEY and WAIT), the stored frame's own bytes and the topic
    properties = len("sluice.partition") + 3 + len("sluice.offset") + 3 + (8 + 2 + 32) + (4 + 2 + 4)
    stored = MAX_MESSAGE_BYTES + 2 + properties + STORED_OVERHEAD + len("t")
    assert reasons[1] == (
        f"message of {stored} bytes (body {MAX_MESSAGE_BYTES} bytes) is over RocketMQ's maximum "
        f"message size of {MAX_MESSAGE_BYTES} bytes"
    )


@pytest.mark.parametrize("stamped", [False, True], ids=["batch-property-mapped", "batch-property-stamped"])
def test_the_size_check_draws_the_line_where_the_encoder_does(stamped: bool) -> None:
    """The size check (limits.unsendable) counts each message as the writer encodes it and the
    broker stores it: a body that makes the stored message exactly the broker's limit passes, one
    byte more is flagged, naming the size the writer would have sent."""
    import pyarrow as pa

    from sluice.connectors.rocketmq.arrow_encode import encode_rows, stamp_text
    from sluice.connectors.rocketmq.codec import stored_size
    from sluice.connectors.rocketmq.limits import MAX_MESSAGE_BYTES, stamped_size, unsendable
    from sluice.connectors.source_reads import records_table

    records = records_table(
        [
            Record("f", 0, "héllo", topic="orders", key="k1", headers={"trace": "ü9", "rocketmq.tags": "A"}),
            Record("g.txt", 123456, "x" * 1000, topic="orders"),
        ]
    )
    stamp = {"sluice.batch": "c/0/7"}
    extra, stamped_bytes = (None, stamped_size(stamp)) if stamped else (stamp, 0)
    messages = messages_of(StringConverter(), records, extra=extra)

    def stored(table: pa.Table) -> list[int]:
        batch = table.select(["body", "keys", "tags", "properties"]).to_batches()[0]
        made = stamp_text(stamp, "test") if stamped else ""
        encoded = encode_rows(batch, ["0" * 32] * batch.num_rows, "test", stamped=made)
        return [stored_size(size, "orders") for size in encoded.entry_sizes()]

    def padded(table: pa.Table, extra_bytes: list[int]) -> pa.Table:
        bodies = [b + b"p" * n for b, n in zip(table.column("body").to_pylist(), extra_bytes, strict=True)]
        return table.set_column(table.schema.get_field_index("body"), "body", pa.array(bodies, pa.binary()))

    assert unsendable(messages, stamped_bytes) is None
    at_limit = padded(messages, [MAX_MESSAGE_BYTES - size for size in stored(messages)])
    assert stored(at_limit) == [MAX_MESSAGE_BYTES, MAX_MESSAGE_BYTES]
    assert unsendable(at_limit, stamped_bytes) is None
    over = padded(messages, [MAX_MESSAGE_BYTES - size + 1 for size in stored(messages)])
    problems = unsendable(over, stamped_bytes)
    assert problems is not None
    bodies = [len(b) for b in over.column("body").to_pylist()]
    assert problems.to_pylist() == [
        f"message of {MAX_MESSAGE_BYTES + 1} bytes (body {body} bytes) is over RocketMQ's maximum "
        f"message size of {MAX_MESSAGE_BYTES} bytes"
        for body in bodies
    ]
    one_over = pa.concat_tables([at_limit.slice(0, 1), over.slice(1, 1), at_limit.slice(1, 1)])
    problems = unsendable(one_over, stamped_bytes)
    assert problems is not None and [p is None for p in problems.to_pylist()] == [True, False, True]


def test_the_size_check_counts_the_stamped_properties(spark: SparkSession) -> None:
    """A message that fits only without the properties the writer stamps is flagged, by name."""
    from sluice.connectors.rocketmq.codec import MAX_PROPERTIES_BYTES
    from sluice.connectors.rocketmq.limits import unsendable

    header = "h" * (MAX_PROPERTIES_BYTES - 300)
    records = make_records(spark, [Record("p", 0, "v", topic="t", headers={"big": header})])
    messages = messages_of(StringConverter(), records)
    assert unsendable(messages) is None
    problems = unsendable(messages, stamped_bytes=400)
    assert problems is not None
    properties = (3 + 2 + len(header)) + (16 + 2 + 1) + (13 + 2 + 1) + (8 + 2 + 32) + (4 + 2 + 4) + 400
    assert problems.to_pylist() == [
        f"message properties take {properties} bytes, over RocketMQ's limit of {MAX_PROPERTIES_BYTES}"
    ]
