"""The Arrow decode of schemaless and declared-schema JSON bodies (connectors.arrow_json_bodies)
flags and reads each record as Spark's decode does (``JsonConverter.to_records``), but for the
differences its module docstring lists, which are checked here one by one.

Each table is one batch of reader messages, decoded both ways: Spark's ``to_records`` over a
DataFrame, and the decoder over the same messages' Arrow batches (in slices, as a reader hands
them over). Flags must be equal, and values where no flag is.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeAlias

import pyarrow as pa
import pytest

from sluice.connectors import arrow_json_bodies
from sluice.connectors.arrow_json_bodies import NOT_JSON, NOT_UTF8, DeclaredJsonDecoder, JsonTextDecoder
from sluice.connectors.converters import TOMBSTONE_PROPERTY, JsonConverter
from sluice.connectors.records import ERROR_COLUMN, MAX_RECORD_ERROR_CHARS
from tests.connectors.test_converters import BORN, READ_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Decoder: TypeAlias = JsonTextDecoder | DeclaredJsonDecoder
TOMBSTONE: Any = object()  # a case's body: an empty body marked as a tombstone
MAP = pa.map_(pa.string(), pa.string())


def _messages(spark: SparkSession, bodies: list[Any]) -> DataFrame:
    rows = []
    for i, body in enumerate(bodies):
        props = {TOMBSTONE_PROPERTY: "true"} if body is TOMBSTONE else {"h": "x"}
        rows.append(
            ("t", "broker-a:0", 0, i, None, None, props, BORN, BORN, b"" if body is TOMBSTONE else body)
        )
    return spark.createDataFrame(rows, READ_SCHEMA)


def _arrow_batch(bodies: list[Any]) -> pa.RecordBatch:
    """Reader messages without Spark (the columns the decoders read, and one they pass on)."""
    return pa.RecordBatch.from_pydict(
        schema=pa.schema(
            [
                ("topic", pa.string()),
                ("partition", pa.string()),
                ("queue_offset", pa.int64()),
                ("properties", MAP),
                ("body", pa.binary()),
            ]
        ),
        mapping={
            "topic": ["t"] * len(bodies),
            "partition": ["broker-a:0"] * len(bodies),
            "queue_offset": list(range(len(bodies))),
            "properties": pa.array(
                [[(TOMBSTONE_PROPERTY, "true")] if b is TOMBSTONE else [] for b in bodies], MAP
            ),
            "body": pa.array([b"" if b is TOMBSTONE else b for b in bodies], pa.binary()),
        },
    )


def _by_arrow(decoder: Decoder, messages: pa.Table | pa.RecordBatch, chunk: int = 7) -> pa.Table:
    table = messages if isinstance(messages, pa.Table) else pa.Table.from_batches([messages])
    batches = [decoder.decode(b) for b in table.to_batches(max_chunksize=chunk)]
    assert all(b.schema == batches[0].schema for b in batches)  # the schema does not depend on data
    return pa.Table.from_batches(batches).sort_by("queue_offset")


def _both_ways(
    spark: SparkSession, converter: JsonConverter, decoder: Decoder, bodies: list[Any], chunk: int = 7
) -> tuple[list[tuple[Any, str | None]], list[tuple[Any, str | None]]]:
    """Each body's (value, flag) from Spark's decode and from the Arrow decode (a flagged record's
    value is left out: the runtime reports or dead-letters the record, never writes its value)."""
    messages = _messages(spark, bodies)
    by_spark = converter.to_records(messages).toArrow().sort_by("offset")
    by_arrow = _by_arrow(decoder, messages.toArrow(), chunk)
    assert by_arrow.schema.field("value").type == by_spark.schema.field("value").type
    assert by_arrow.schema.field(ERROR_COLUMN).type == pa.string()

    def pairs(table: pa.Table) -> list[tuple[Any, str | None]]:
        flags = (
            table.column(ERROR_COLUMN).to_pylist()
            if ERROR_COLUMN in table.column_names
            else [None] * len(table)
        )
        return [(None if f else v, f) for v, f in zip(table.column("value").to_pylist(), flags, strict=True)]

    return pairs(by_spark), pairs(by_arrow)


def _assert_same(bodies: list[Any], by_spark: list[Any], by_arrow: list[Any]) -> None:
    differ = [(b, s, a) for b, s, a in zip(bodies, by_spark, by_arrow, strict=True) if repr(s) != repr(a)]
    assert not differ, "\n".join(f"{b!r}: spark {s!r}, arrow {a!r}" for b, s, a in differ)


# (body, True where Spark's decode and the Arrow decode find it JSON, else the flag both set)
TEXT_CASES: list[tuple[Any, bool | str]] = [
    (b'{"id":1,"name":"ann","tags":["a","b"],"addr":{"city":"Oslo","zip":null}}', True),
    (b'{"deep":{"er":{"still":[{"x":[1,2,{"y":null}]}]}}}', True),
    (b"[1,2.5,-3e5,true,false,null]", True),
    (b'"just a string"', True),
    (b"42", True),
    (b"-0", True),
    (b"1e400", True),  # a double out of range: JSON still
    (b"123456789012345678901234567890123456789012", True),
    (b"null", True),
    (b"true", True),
    (b"true,", True),  # Jackson: a literal may be followed by a non-name character
    (b'{\n  "pretty": [\n    1,\n    2\n  ],\n  "printed": {"a": "b"}\r\n}\n', True),
    (b'  {"a":1}  \n', True),
    ('{"text":"Grüße 東京 ✓ \\n\\t\\u0001 \\ud83d\\ude00"}'.encode(), True),
    (b'{"lone":"\\ud800"}', True),  # an unpaired escaped surrogate: Jackson reads it
    (b'{"a":1} trailing', True),  # Jackson reads the first value and no further
    (b'{"a":1}{"b":2}', True),
    (b"[1] [2]", True),
    (b"1 2", True),
    (b'"s"x', True),
    (b"[" * 500 + b"]" * 500, True),
    (b"", NOT_JSON),
    (b"   ", NOT_JSON),
    (b'{"a":', NOT_JSON),
    (b'{"a":1,}', NOT_JSON),
    (b"[1,]", NOT_JSON),
    (b"{'a':1}", NOT_JSON),
    (b"nul", NOT_JSON),
    (b"truex", NOT_JSON),
    (b"01", NOT_JSON),
    (b"1.", NOT_JSON),
    (b".5", NOT_JSON),
    (b"1x", NOT_JSON),  # a root number must end in whitespace
    (b'1,"w":2', NOT_JSON),  # ... which in {"v":…} Arrow would read as a second field
    (b"NaN", NOT_JSON),
    (b'{"a":NaN}', NOT_JSON),
    (b'{"a":-Infinity}', NOT_JSON),
    ('\ufeff{"a":1}'.encode(), NOT_JSON),
    (b'{"a":"x\ny"}', NOT_JSON),  # a raw newline inside a string
    (b'{"a":"x\ty"}', NOT_JSON),
    (b'{"a":"\\x"}', NOT_JSON),
    (b"\xff\xfe{}", NOT_UTF8),
    (b'{"a":"\xc3"}', NOT_UTF8),
    (None, True),  # no body: a null value, no flag
    (TOMBSTONE, True),
]


def test_schemaless_text_is_flagged_as_sparks_decode_flags_it(spark: SparkSession) -> None:
    bodies = [body for body, _ in TEXT_CASES]
    by_spark, by_arrow = _both_ways(spark, JsonConverter(), JsonTextDecoder(TOMBSTONE_PROPERTY), bodies)
    _assert_same(bodies, by_spark, by_arrow)
    for (body, expected), (value, flag) in zip(TEXT_CASES, by_arrow, strict=True):
        assert flag == (None if expected is True else expected), body
        if expected is True:  # the text unchanged; null for no body and tombstones
            assert value == (None if body is None or body is TOMBSTONE else body.decode("utf-8")), body


def test_schemaless_duplicate_keys_are_json_as_kafka_reads_them(spark: SparkSession) -> None:
    bodies = [b'{"a":1,"a":2}', b'[{"k":1,"k":{"k":2}}]']
    by_spark, by_arrow = _both_ways(spark, JsonConverter(), JsonTextDecoder(TOMBSTONE_PROPERTY), bodies)
    assert [flag for _, flag in by_spark] == [NOT_JSON] * 2  # Spark's variant refuses them
    assert by_arrow == [(b.decode(), None) for b in bodies]


def _declared(ddl: str, envelope: bool) -> tuple[JsonConverter, DeclaredJsonDecoder]:
    """The json converter of a declared ``value.converter.schema`` and the Arrow decoder of it."""
    from pyspark.sql.types import _parse_datatype_string

    decoder = DeclaredJsonDecoder.plan(
        _parse_datatype_string(ddl), envelope=envelope, tombstone=TOMBSTONE_PROPERTY
    )  # the type as the converter parses the setting
    assert decoder is not None
    return JsonConverter(schemas_enable=envelope, value_schema=ddl), decoder


def _good(i: int) -> bytes:
    return json.dumps(
        {"id": i, "name": f"n{i}", "tags": ["a", str(i)], "at": "2024-05-01T12:00:00Z"}
    ).encode()


def test_bad_records_in_a_large_batch_are_found_by_halving(spark: SparkSession, monkeypatch: Any) -> None:
    """A good batch is one read and no record is looked at alone; a few bad records cost a few
    reads each (halving), and every other record keeps its value."""
    reads: list[int] = []
    alone: list[str] = []
    read, value_end = arrow_json_bodies._read, arrow_json_bodies._value_end

    def counted_read(lines: pa.StringArray, schema: pa.Schema) -> pa.Table | None:
        reads.append(len(lines))
        return read(lines, schema)

    def counted_value_end(text: str) -> int | None:
        alone.append(text)
        return value_end(text)

    monkeypatch.setattr(arrow_json_bodies, "_read", counted_read)
    monkeypatch.setattr(arrow_json_bodies, "_value_end", counted_value_end)
    n = 20_000
    good = [_good(i) for i in range(n)]
    text = (JsonConverter(), JsonTextDecoder(TOMBSTONE_PROPERTY))
    declared = _declared("id bigint, name string, tags array<string>, at timestamp", envelope=False)
    for _, decoder in (text, declared):
        out = decoder.decode(_arrow_batch(good))
        assert out.column(ERROR_COLUMN).null_count == n
        assert (reads, alone) == ([n], [])
        reads.clear()

    bad = {0: b'{"id":', n // 2: b'{"id":"not a number"}', n - 1: b"[]"}
    bodies = [bad.get(i, body) for i, body in enumerate(good)]
    flagged = []
    for converter, decoder in (text, declared):
        by_spark, by_arrow = _both_ways(spark, converter, decoder, bodies, chunk=n)
        _assert_same(bodies, by_spark, by_arrow)
        # per bad record and halving (15 for 20,000 rows): the failing half with each wire type tried
        # (two where instants may be millis), its good sibling with one
        wires = len(getattr(decoder, "reads", (None,)))
        assert len(reads) <= 3 * 15 * (wires + 1) and len(alone) <= 3, (len(reads), alone)
        reads.clear()
        alone.clear()
        flagged.append([i for i, (_, flag) in enumerate(by_arrow) if flag])
    assert flagged == [[0], [0, n // 2, n - 1]]  # [] and a string id are JSON


# A declared type of every kind the decoder reads, and bodies of it: plain JSON (decimals as
# numbers), and the same values' payloads in envelopes (decimals as Kafka's base64).
DDL = (
    "id bigint, tiny tinyint, n int, f float, d double, flag boolean, name string, amount decimal(12,2), "
    "wide decimal(30,5), day date, at timestamp, local timestamp_ntz, raw binary, tags array<string>, "
    "points array<struct<x: int, label: string>>, addr struct<city: string, zip: bigint>"
)
AT = int(datetime(2024, 5, 1, 12, 0, tzinfo=UTC).timestamp() * 1000)
LOCAL_MICROS = int(datetime(1999, 12, 31, 23, 59, 1, tzinfo=UTC).timestamp() * 1_000_000)


def _row(i: int, **changes: Any) -> dict[str, Any]:
    row = {
        "id": i, "tiny": -i, "n": -70000 * i, "f": 1.5 / (i + 1), "d": 1e300 / (i + 3), "flag": i % 2 == 0,
        "name": f'Grüße "{i}"\\ 東京\n', "amount": Decimal(f"{i}.25"),
        "wide": Decimal(f"123456789012345678901234.{i:05d}"),
        "day": (date(1969 + i, 12, 31) - date(1970, 1, 1)).days, "at": "2024-05-01T12:00:00.123456Z",
        "local": LOCAL_MICROS, "raw": base64.b64encode(bytes([i, 0, 255])).decode(),
        "tags": ["a", None, f"t{i}"], "points": [{"x": i, "label": None}, {"x": -i, "label": "p"}],
        "addr": {"city": "Oslo", "zip": 150 + i},
    }  # fmt: skip
    return {**row, **changes}


def _unscaled(value: Decimal, scale: int) -> str:
    unscaled = int(value.scaleb(scale))
    return base64.b64encode(unscaled.to_bytes(unscaled.bit_length() // 8 + 1, "big", signed=True)).decode()


def _plain(row: dict[str, Any] | None, indent: int | None = None) -> bytes:
    return json.dumps(row, indent=indent, default=str).replace('"<<', "").replace('>>"', "").encode()


def _number(value: Decimal) -> str:
    return f"<<{value}>>"  # written by _plain as a bare JSON number


def _envelope(row: dict[str, Any] | None) -> bytes:
    payload = None
    if row is not None:
        payload = {**row}
        for name, scale in (("amount", 2), ("wide", 5)):
            if isinstance(row.get(name), Decimal):
                payload[name] = _unscaled(row[name], scale)
    return json.dumps({"schema": {"type": "struct", "fields": []}, "payload": payload}).encode()


def _numbers(row: dict[str, Any]) -> dict[str, Any]:
    return {k: _number(v) if isinstance(v, Decimal) else v for k, v in row.items()}


DECLARED_CASES: list[tuple[str, Any, bool]] = [
    ("every field", _plain(_numbers(_row(1))), True),
    ("negative and more", _plain(_numbers(_row(3, amount=Decimal("-7.05"), tiny=127))), True),
    ("nulls", _plain({k: None for k in _row(0)}), True),
    ("missing fields read null", b'{"id":5}', True),
    ("extra fields are ignored", _plain(_numbers(_row(6, extra={"x": [1]}, more=None))), True),
    ("empty object", b"{}", True),
    ("pretty-printed", _plain(_numbers(_row(7)), indent=2), True),
    ("instant with an offset", _plain({"at": "2024-05-01T14:00:00.5+02:00"}), True),
    ("instant as millis text", _plain({"at": str(AT)}), True),
    ("instant as millis", _plain({"at": AT}), True),
    ("decimal as text", b'{"amount":"12.5"}', True),
    ("float from an int", b'{"f":3,"d":-4}', True),
    ("NaN float", b'{"d":NaN}', True),  # Spark's from_json reads NaN; so does Arrow
    ("trailing content", b'{"id":8} and more', True),
    ("two objects", b'{"id":9}{"id":10}', True),
    ("null body is no struct", b"null", False),
    ("an array", b"[{}]", False),
    ("a number", b"1", False),
    ("not JSON", b'{"id":', False),
    ("empty", b"", False),
    ("int from text", b'{"id":"12"}', False),
    ("int from a fraction", b'{"n":1.5}', False),
    ("int from 1.0", b'{"n":1.0}', False),
    ("tinyint overflow", b'{"tiny":300}', False),
    ("int overflow", b'{"n":3000000000}', False),
    ("decimal over its precision", b'{"amount":12345678901.5}', False),
    ("bool from a number", b'{"flag":1}', False),
    ("struct from a number", b'{"addr":1}', False),
    ("array from an object", b'{"tags":{}}', False),
    ("date from a fraction", b'{"day":1.5}', False),
    ("micros from text", b'{"local":"x"}', False),
    ("BOM", '\ufeff{"id":1}'.encode(), False),
    ("raw newline in a string", b'{"name":"a\nb"}', False),
    ("not UTF-8", b'{"name":"\xff"}', False),
    ("no body", None, True),
    ("tombstone", TOMBSTONE, True),
]


def test_declared_bodies_decode_as_sparks_parse(spark: SparkSession) -> None:
    converter, decoder = _declared(DDL, envelope=False)
    bodies = [body for _, body, _ in DECLARED_CASES]
    by_spark, by_arrow = _both_ways(spark, converter, decoder, bodies)
    _assert_same([name for name, _, _ in DECLARED_CASES], by_spark, by_arrow)
    got = {name: pair for (name, _, _), pair in zip(DECLARED_CASES, by_arrow, strict=True)}
    assert [name for name, (_, flag) in got.items() if flag] == [
        name for name, _, good in DECLARED_CASES if not good
    ]
    assert got["no body"] == got["tombstone"] == (None, None)
    assert got["every field"][0]["amount"] == Decimal("1.25") and got["every field"][0]["day"] == date(
        1970, 12, 31
    )
    assert got["every field"][0]["at"] == datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
    assert got["instant as millis"][0]["at"] == datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert got["not UTF-8"][1] == NOT_UTF8
    assert got["an array"][1] == "json converter: body does not parse as " + _ddl_simple(DDL)


def _ddl_simple(ddl: str) -> str:
    from pyspark.sql.types import _parse_datatype_string

    return str(_parse_datatype_string(ddl).simpleString())


ENVELOPE_CASES: list[tuple[str, Any, bool]] = [
    ("every field", _envelope(_row(1)), True),
    ("negative decimals", _envelope(_row(2, amount=Decimal("-7.05"), wide=Decimal("-1.00001"))), True),
    ("nulls", _envelope({k: None for k in _row(0)}), True),
    ("Kafka's millis", _envelope(_row(4, at=AT)), True),  # a number into the instant's text
    ("schema after payload", b'{"payload":{"id":5},"schema":{}}', True),
    ("no payload reads null", b'{"schema":{}}', True),
    ("null payload", b'{"schema":{},"payload":null}', True),
    ("pretty-printed", json.dumps(json.loads(_envelope(_row(7))), indent=1).encode(), True),
    ("trailing content", b'{"payload":{"id":8}} x', True),
    ("payload not a struct", b'{"payload":[1]}', False),
    ("not an object", b"[1]", False),
    ("null body", b"null", False),
    ("not JSON", b'{"payload":', False),
    ("int from text", b'{"payload":{"id":"1"}}', False),
    ("no body", None, True),
    ("tombstone", TOMBSTONE, True),
]


def test_declared_envelopes_decode_as_sparks_parse(spark: SparkSession) -> None:
    converter, decoder = _declared(DDL, envelope=True)
    bodies = [body for _, body, _ in ENVELOPE_CASES]
    by_spark, by_arrow = _both_ways(spark, converter, decoder, bodies)
    _assert_same([name for name, _, _ in ENVELOPE_CASES], by_spark, by_arrow)
    assert [flag is None for _, flag in by_arrow] == [good for _, _, good in ENVELOPE_CASES]
    assert by_arrow[1][0]["wide"] == Decimal("-1.00001")
    assert by_arrow[3][0]["at"] == datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert by_arrow[5][0] is None and by_arrow[6][0] is None
    assert by_arrow[9][1] == "json converter: body envelope does not parse as " + _ddl_simple(DDL)


@pytest.mark.parametrize(
    ("ddl", "bodies"),
    [
        ("array<int>", [b"[1,2]", b"[]", b"null", b'[1,"x"]', b"[1] x", b'{"a":1}', b'1,"w":2']),
        ("bigint", [b"1", b"-9", b"null", b"1 x", b'"1"', b"1.5"]),
        ("array<struct<d: decimal(5,1)>>", [b'[{"d":1.5},null,{"d":"2"}]', b'[{"d":12345.6}]']),
    ],
)
def test_declared_types_that_are_no_struct_are_read_inside_a_payload(
    spark: SparkSession, ddl: str, bodies: list[bytes]
) -> None:
    converter, decoder = _declared(ddl, envelope=False)
    by_spark, by_arrow = _both_ways(spark, converter, decoder, bodies)
    _assert_same(bodies, by_spark, by_arrow)


# Records Spark's from_json reads by coercion (or reads as null), which are flagged here.
DIFFERENCES: list[tuple[str, bytes, bool]] = [
    ("a number into a string", b'{"name":1}', False),
    ("an object into a string", b'{"name":{"a":1}}', False),
    ("more fraction digits than the scale", b'{"amount":1.234}', False),
    ("NaN as text", b'{"d":"NaN"}', False),
    ("duplicate keys", b'{"id":1,"id":2}', False),
    ("an instant without a zone", b'{"at":"2024-05-01 12:00:00"}', False),
    ("an instant as a date", b'{"at":"2024-05-01"}', False),
    ("bytes that are not base64", b'{"raw":"%%%"}', False),
    ("bytes without padding", b'{"raw":"AAE"}', False),
    ("a decimal that is not base64", b'{"payload":{"amount":"%%"}}', True),
    ("a decimal as a number", b'{"payload":{"amount":1.5}}', True),
]


@pytest.mark.parametrize(("name", "body", "envelope"), DIFFERENCES, ids=[d[0] for d in DIFFERENCES])
def test_what_spark_coerces_is_flagged(spark: SparkSession, name: str, body: bytes, envelope: bool) -> None:
    converter, decoder = _declared(DDL, envelope)
    (spark_value, spark_flag), (value, flag) = (
        sides[0] for sides in _both_ways(spark, converter, decoder, [body])
    )
    assert spark_flag is None
    assert value is None and flag is not None and flag.endswith("does not parse as " + _ddl_simple(DDL))


def test_plan_refuses_what_arrow_does_not_read() -> None:
    from pyspark.sql import types as T

    kinds = T.MapType(T.StringType(), T.IntegerType())
    assert (
        DeclaredJsonDecoder.plan(T.StructType([T.StructField("m", kinds)]), envelope=False, tombstone="t")
        is None
    )
    instant = T.StructType([T.StructField("at", T.TimestampType()), T.StructField("s", T.StringType())])
    decoder = DeclaredJsonDecoder.plan(instant, envelope=True, tombstone="t")
    assert decoder is not None and len(decoder.reads) == 2  # Kafka's millis read too
    assert decoder.problem == "json converter: body envelope does not parse as struct<at:timestamp,s:string>"


def test_a_long_type_name_is_cut_as_spark_cuts_flags() -> None:
    from pyspark.sql import types as T

    wide = T.StructType([T.StructField(f"field_with_a_long_name_{i}", T.LongType()) for i in range(40)])
    decoder = DeclaredJsonDecoder.plan(wide, envelope=False, tombstone=TOMBSTONE_PROPERTY)
    assert decoder is not None and len(decoder.problem) > MAX_RECORD_ERROR_CHARS
    flag = decoder.decode(_arrow_batch([b"[]"])).column(ERROR_COLUMN)[0].as_py()
    assert flag == decoder.problem[:MAX_RECORD_ERROR_CHARS]


def test_the_error_column_is_always_there_and_keeps_an_earlier_flag() -> None:
    batch = _arrow_batch([b"{}", b"x", None])
    out = JsonTextDecoder(TOMBSTONE_PROPERTY).decode(batch)
    assert out.schema.names == ["topic", "partition", "queue_offset", "properties", "value", ERROR_COLUMN]
    assert out.column(ERROR_COLUMN).to_pylist() == [None, NOT_JSON, None]
    earlier = batch.append_column(ERROR_COLUMN, pa.array(["earlier", None, None]))
    out = JsonTextDecoder(TOMBSTONE_PROPERTY).decode(earlier)
    assert out.column(ERROR_COLUMN).to_pylist() == ["earlier", NOT_JSON, None]
    empty = JsonTextDecoder(TOMBSTONE_PROPERTY).decode(_arrow_batch([]))
    assert empty.schema == out.schema and empty.num_rows == 0


def test_the_module_imports_no_pyspark() -> None:
    code = "import sys, sluice.connectors.arrow_json_bodies; assert 'pyspark' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
