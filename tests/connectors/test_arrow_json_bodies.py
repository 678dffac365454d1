"""The Arrow decode of schemaless and declared-schema JSON bodies (connectors.arrow_json_bodies):
each body's expected outcome, its value or the flag naming why it is a bad record.

Where the module follows Kafka's JsonConverter rather than Spark's decode (the ``from_json`` and
``try_parse_json`` decode the sink side used before, now gone), the cases below say what Spark made
of the body, as its decode was run on them last.

Each table is one batch of reader messages, decoded in slices as a reader hands them over.
"""

from __future__ import annotations

import base64
import json
import math
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from decimal import Context, Decimal
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import pyarrow as pa
import pytest

from sluice.connectors import arrow_json_bodies
from sluice.connectors.arrow_json_bodies import NOT_JSON, NOT_UTF8, DeclaredJsonDecoder, JsonTextDecoder
from sluice.connectors.converters import TOMBSTONE_PROPERTY, JsonConverter
from sluice.connectors.records import ERROR_COLUMN, MAX_RECORD_ERROR_CHARS
from sluice.connectors.spark_ddl import parse_ddl

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

Decoder: TypeAlias = JsonTextDecoder | DeclaredJsonDecoder
#: A body's outcome: its value, and the flag naming why it is a bad record (its value then null).
Outcome: TypeAlias = tuple[Any, str | None]
TOMBSTONE: Any = object()  # a case's body: an empty body marked as a tombstone
MAP = pa.map_(pa.string(), pa.string())
NO_VALUE: Outcome = (None, None)  # no body, a tombstone, or JSON null where that is no bad record


def _arrow_batch(bodies: list[Any]) -> pa.RecordBatch:
    """Reader messages (the columns the decoders read, and one they pass on)."""
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
                [[(TOMBSTONE_PROPERTY, "true")] if b is TOMBSTONE else [("h", "x")] for b in bodies], MAP
            ),
            "body": pa.array([b"" if b is TOMBSTONE else b for b in bodies], pa.binary()),
        },
    )


def _decoded(decoder: Decoder, bodies: list[Any], value_type: pa.DataType, chunk: int = 7) -> list[Outcome]:
    """Each body's (value, flag), decoded in slices of ``chunk`` (a flagged record's value is left
    out: the runtime reports or dead-letters the record, never writes its value), the value column
    of ``value_type`` whatever the data."""
    table = pa.Table.from_batches([_arrow_batch(bodies)])
    batches = [decoder.decode(b) for b in table.to_batches(max_chunksize=chunk)]
    assert all(b.schema == batches[0].schema for b in batches)  # the schema does not depend on data
    decoded = pa.Table.from_batches(batches).sort_by("queue_offset")
    assert decoded.schema.field("value").type == value_type
    assert decoded.schema.field(ERROR_COLUMN).type == pa.string()
    assert decoded.column("properties").to_pylist() == table.column("properties").to_pylist()
    values, flags = decoded.column("value").to_pylist(), decoded.column(ERROR_COLUMN).to_pylist()
    return [(None if f else v, f) for v, f in zip(values, flags, strict=True)]


def _nan_as_text(value: Any) -> Any:
    """``value`` with NaN floats as text, which compare equal (NaN != NaN)."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return {k: _nan_as_text(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_nan_as_text(v) for v in value)
    return value


def _assert_outcomes(names: list[Any], got: list[Outcome], expected: list[Outcome]) -> None:
    differ = [
        (n, g, e)
        for n, g, e in zip(names, got, expected, strict=True)
        if _nan_as_text(g) != _nan_as_text(e) or type(g[0]) is not type(e[0])
    ]
    assert not differ, "\n".join(f"{n!r}: got {g!r}, expected {e!r}" for n, g, e in differ)


# (body, True where it is JSON, else the flag): JSON's value is the body's text, unchanged.
# Spark's decode flagged the same bodies; it flagged duplicate keys too (the test after these).
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


def _text_outcome(body: Any, is_json: bool | str) -> Outcome:
    if isinstance(is_json, str):  # the flag
        return (None, is_json)
    return NO_VALUE if body is None or body is TOMBSTONE else (body.decode(), None)


def test_schemaless_text_is_its_value_and_what_is_not_json_is_flagged() -> None:
    bodies = [body for body, _ in TEXT_CASES]
    got = _decoded(JsonTextDecoder(TOMBSTONE_PROPERTY), bodies, pa.string())
    _assert_outcomes(bodies, got, [_text_outcome(body, is_json) for body, is_json in TEXT_CASES])


def test_schemaless_duplicate_keys_are_json_as_kafka_reads_them() -> None:
    """Kafka's JsonConverter keeps the last; Spark's decode (a variant) flagged them not JSON."""
    bodies = [b'{"a":1,"a":2}', b'[{"k":1,"k":{"k":2}}]']
    assert _decoded(JsonTextDecoder(TOMBSTONE_PROPERTY), bodies, pa.string()) == [
        (b.decode(), None) for b in bodies
    ]


def _declared(ddl: str, envelope: bool) -> DeclaredJsonDecoder:
    """The Arrow decoder the json converter plans for a declared ``value.converter.schema``."""
    decoder = DeclaredJsonDecoder.plan(
        parse_ddl(ddl), envelope=envelope, tombstone=TOMBSTONE_PROPERTY
    )  # the type as the converter parses the setting
    assert decoder is not None
    assert JsonConverter(schemas_enable=envelope, value_schema=ddl).arrow_records().value == decoder
    return decoder


def _arrow_type(ddl: str) -> pa.DataType:
    """The Arrow type of a declared type's values: every field, element nullable."""
    from pyspark.sql.pandas.types import to_arrow_type

    data_type: DataType = parse_ddl(ddl)
    return to_arrow_type(data_type)


def _good(i: int) -> bytes:
    return json.dumps(
        {"id": i, "name": f"n{i}", "tags": ["a", str(i)], "at": "2024-05-01T12:00:00Z"}
    ).encode()


def test_bad_records_in_a_large_batch_are_found_by_halving(monkeypatch: Any) -> None:
    """A good batch is one read and no record is looked at alone; a few bad records cost a few
    reads each (halving), and every other record keeps its value."""
    reads: list[int] = []
    alone: list[str] = []
    read, value_end = arrow_json_bodies.read_lines, arrow_json_bodies._value_end

    def counted_read(lines: pa.Array, schema: pa.Schema) -> pa.Table | None:
        reads.append(len(lines))
        return read(lines, schema)

    def counted_value_end(text: str) -> int | None:
        alone.append(text)
        return value_end(text)

    monkeypatch.setattr(arrow_json_bodies, "read_lines", counted_read)
    monkeypatch.setattr(arrow_json_bodies, "_value_end", counted_value_end)
    n = 20_000
    good = [_good(i) for i in range(n)]
    ddl = "id bigint, name string, tags array<string>, at timestamp"
    text, declared = JsonTextDecoder(TOMBSTONE_PROPERTY), _declared(ddl, envelope=False)
    for decoder in (text, declared):
        out = decoder.decode(_arrow_batch(good))
        assert out.column(ERROR_COLUMN).null_count == n
        assert (reads, alone) == ([n], [])
        reads.clear()

    bad = {0: b'{"id":', n // 2: b'{"id":"not a number"}', n - 1: b"[]"}
    bodies = [bad.get(i, body) for i, body in enumerate(good)]
    at = datetime(2024, 5, 1, 12, tzinfo=UTC)
    problem = (
        "json converter: body does not parse as struct<id:bigint,name:string,tags:array<string>,at:timestamp>"
    )
    expected = {
        text: [(None, NOT_JSON) if i == 0 else (body.decode(), None) for i, body in enumerate(bodies)],
        declared: [
            (None, problem)
            if i in bad
            else ({"id": i, "name": f"n{i}", "tags": ["a", str(i)], "at": at}, None)
            for i in range(n)
        ],  # [] and a string id are JSON, but not of the declared type
    }
    for decoder, value_type in ((text, pa.string()), (declared, _arrow_type(ddl))):
        got = _decoded(decoder, bodies, value_type, chunk=n)
        # per bad record and halving (15 for 20,000 rows): the failing half with each wire type tried
        # (two where instants may be millis), its good sibling with one
        wires = len(getattr(decoder, "reads", (None,)))
        assert len(reads) <= 3 * 15 * (wires + 1) and len(alone) <= 3, (len(reads), alone)
        reads.clear()
        alone.clear()
        assert got == expected[decoder]


# A declared type of every kind the decoder reads, and bodies of it: plain JSON (decimals as
# numbers), and the same values' payloads in envelopes (decimals as Kafka's base64).
DDL = (
    "id bigint, tiny tinyint, n int, f float, d double, flag boolean, name string, amount decimal(12,2), "
    "wide decimal(30,5), day date, at timestamp, local timestamp_ntz, raw binary, tags array<string>, "
    "points array<struct<x: int, label: string>>, addr struct<city: string, zip: bigint>"
)
#: DDL as flags name it (Spark's simpleString of the type)
DDL_TYPE = (
    "struct<id:bigint,tiny:tinyint,n:int,f:float,d:double,flag:boolean,name:string,amount:decimal(12,2),"
    "wide:decimal(30,5),day:date,at:timestamp,local:timestamp_ntz,raw:binary,tags:array<string>,"
    "points:array<struct<x:int,label:string>>,addr:struct<city:string,zip:bigint>>"
)
NOT_DDL: Outcome = (None, "json converter: body does not parse as " + DDL_TYPE)
NOT_DDL_ENVELOPE: Outcome = (None, "json converter: body envelope does not parse as " + DDL_TYPE)
AT = int(datetime(2024, 5, 1, 12, 0, tzinfo=UTC).timestamp() * 1000)
LOCAL_MICROS = int(datetime(1999, 12, 31, 23, 59, 1, tzinfo=UTC).timestamp() * 1_000_000)


def _row(i: int, **changes: Any) -> dict[str, Any]:
    """A value of DDL as JSON writes it (dates as epoch days, instants as ISO text or epoch millis,
    local times as epoch micros, bytes as base64)."""
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


NULLS: dict[str, Any] = dict.fromkeys(_row(0))  # a value of DDL with every field null


def _value(row: dict[str, Any]) -> dict[str, Any]:
    """The value the decode makes of a ``_row`` (its fields of DDL only, the float's 32 bits)."""
    value = {**NULLS, **{k: v for k, v in row.items() if k in NULLS}}
    value["f"] = float(np.float32(row["f"]))
    value["day"] = date(1970, 1, 1) + timedelta(days=row["day"])
    at = row["at"]
    value["at"] = (
        datetime.fromtimestamp(at / 1000, UTC) if isinstance(at, int) else datetime.fromisoformat(at)
    )
    value["local"] = datetime(1970, 1, 1) + timedelta(microseconds=row["local"])
    value["raw"] = base64.b64decode(row["raw"])
    return value


def _unscaled(value: Decimal, scale: int) -> str:
    unscaled = int(value.scaleb(scale, Context(prec=60)))  # exact: the default context keeps 28 digits
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


NOON = datetime(2024, 5, 1, 12, tzinfo=UTC)

DECLARED_CASES: list[tuple[str, Any, Outcome]] = [
    ("every field", _plain(_numbers(_row(1))), (_value(_row(1)), None)),
    (
        "negative and more",
        _plain(_numbers(_row(3, amount=Decimal("-7.05"), tiny=127))),
        (_value(_row(3, amount=Decimal("-7.05"), tiny=127)), None),
    ),
    ("nulls", _plain(NULLS), (NULLS, None)),
    ("missing fields read null", b'{"id":5}', ({**NULLS, "id": 5}, None)),
    (
        "extra fields are ignored",
        _plain(_numbers(_row(6, extra={"x": [1]}, more=None))),
        (_value(_row(6)), None),
    ),
    ("empty object", b"{}", (NULLS, None)),
    ("pretty-printed", _plain(_numbers(_row(7)), indent=2), (_value(_row(7)), None)),
    (
        "instant with an offset",
        _plain({"at": "2024-05-01T14:00:00.5+02:00"}),
        ({**NULLS, "at": datetime(2024, 5, 1, 12, 0, 0, 500000, tzinfo=UTC)}, None),
    ),
    ("instant as millis text", _plain({"at": str(AT)}), ({**NULLS, "at": NOON}, None)),
    ("instant as millis", _plain({"at": AT}), ({**NULLS, "at": NOON}, None)),
    ("decimal as text", b'{"amount":"12.5"}', ({**NULLS, "amount": Decimal("12.50")}, None)),
    ("float from an int", b'{"f":3,"d":-4}', ({**NULLS, "f": 3.0, "d": -4.0}, None)),
    ("NaN float", b'{"d":NaN}', ({**NULLS, "d": math.nan}, None)),  # Spark's from_json read NaN too
    ("trailing content", b'{"id":8} and more', ({**NULLS, "id": 8}, None)),
    ("two objects", b'{"id":9}{"id":10}', ({**NULLS, "id": 9}, None)),
    ("null body is no struct", b"null", NOT_DDL),
    ("an array", b"[{}]", NOT_DDL),
    ("a number", b"1", NOT_DDL),
    ("not JSON", b'{"id":', NOT_DDL),
    ("empty", b"", NOT_DDL),
    ("int from text", b'{"id":"12"}', NOT_DDL),
    ("int from a fraction", b'{"n":1.5}', NOT_DDL),
    ("int from 1.0", b'{"n":1.0}', NOT_DDL),
    ("tinyint overflow", b'{"tiny":300}', NOT_DDL),
    ("int overflow", b'{"n":3000000000}', NOT_DDL),
    ("decimal over its precision", b'{"amount":12345678901.5}', NOT_DDL),
    ("bool from a number", b'{"flag":1}', NOT_DDL),
    ("struct from a number", b'{"addr":1}', NOT_DDL),
    ("array from an object", b'{"tags":{}}', NOT_DDL),
    ("date from a fraction", b'{"day":1.5}', NOT_DDL),
    ("micros from text", b'{"local":"x"}', NOT_DDL),
    ("BOM", '\ufeff{"id":1}'.encode(), NOT_DDL),
    ("raw newline in a string", b'{"name":"a\nb"}', NOT_DDL),
    ("not UTF-8", b'{"name":"\xff"}', (None, NOT_UTF8)),
    ("no body", None, NO_VALUE),
    ("tombstone", TOMBSTONE, NO_VALUE),
]


def test_declared_bodies_decode_to_their_values_or_are_flagged() -> None:
    got = _decoded(_declared(DDL, envelope=False), [body for _, body, _ in DECLARED_CASES], _arrow_type(DDL))
    _assert_outcomes(
        [name for name, _, _ in DECLARED_CASES], got, [outcome for _, _, outcome in DECLARED_CASES]
    )
    every = got[0][0]
    assert every["amount"] == Decimal("1.25") and every["wide"] == Decimal("123456789012345678901234.00001")
    assert every["day"] == date(1970, 12, 31) and every["local"] == datetime(1999, 12, 31, 23, 59, 1)
    assert (
        every["at"] == datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC) and every["raw"] == b"\x01\x00\xff"
    )


ENVELOPE_CASES: list[tuple[str, Any, Outcome]] = [
    ("every field", _envelope(_row(1)), (_value(_row(1)), None)),
    (
        "negative decimals",
        _envelope(_row(2, amount=Decimal("-7.05"), wide=Decimal("-1.00001"))),
        (_value(_row(2, amount=Decimal("-7.05"), wide=Decimal("-1.00001"))), None),
    ),
    ("nulls", _envelope(NULLS), (NULLS, None)),
    ("Kafka's millis", _envelope(_row(4, at=AT)), (_value(_row(4, at=AT)), None)),  # a number: the instant
    ("schema after payload", b'{"payload":{"id":5},"schema":{}}', ({**NULLS, "id": 5}, None)),
    ("no payload reads null", b'{"schema":{}}', NO_VALUE),
    ("null payload", b'{"schema":{},"payload":null}', NO_VALUE),
    (
        "pretty-printed",
        json.dumps(json.loads(_envelope(_row(7))), indent=1).encode(),
        (_value(_row(7)), None),
    ),
    ("trailing content", b'{"payload":{"id":8}} x', ({**NULLS, "id": 8}, None)),
    ("payload not a struct", b'{"payload":[1]}', NOT_DDL_ENVELOPE),
    ("not an object", b"[1]", NOT_DDL_ENVELOPE),
    ("null body", b"null", NOT_DDL_ENVELOPE),
    ("not JSON", b'{"payload":', NOT_DDL_ENVELOPE),
    ("int from text", b'{"payload":{"id":"1"}}', NOT_DDL_ENVELOPE),
    ("no body", None, NO_VALUE),
    ("tombstone", TOMBSTONE, NO_VALUE),
]


def test_declared_envelopes_decode_to_their_payloads_or_are_flagged() -> None:
    got = _decoded(_declared(DDL, envelope=True), [body for _, body, _ in ENVELOPE_CASES], _arrow_type(DDL))
    _assert_outcomes(
        [name for name, _, _ in ENVELOPE_CASES], got, [outcome for _, _, outcome in ENVELOPE_CASES]
    )
    assert got[0][0]["wide"] == Decimal("123456789012345678901234.00001")
    assert got[1][0]["amount"] == Decimal("-7.05") and got[1][0]["wide"] == Decimal("-1.00001")
    assert got[3][0]["at"] == NOON


def _not(ddl_type: str) -> Outcome:
    return (None, f"json converter: body does not parse as {ddl_type}")


@pytest.mark.parametrize(
    ("ddl", "cases"),
    [
        (
            "array<int>",
            [
                (b"[1,2]", ([1, 2], None)),
                (b"[]", ([], None)),
                (b"null", NO_VALUE),  # a null value, no bad record: only a struct must be an object
                (b'[1,"x"]', _not("array<int>")),
                (b"[1] x", _not("array<int>")),
                (b'{"a":1}', _not("array<int>")),
                (b'1,"w":2', _not("array<int>")),
            ],
        ),
        (
            "bigint",
            [
                (b"1", (1, None)),
                (b"-9", (-9, None)),
                (b"null", NO_VALUE),
                (b"1 x", _not("bigint")),
                (b'"1"', _not("bigint")),
                (b"1.5", _not("bigint")),
            ],
        ),
        (
            "array<struct<d: decimal(5,1)>>",
            [
                (b'[{"d":1.5},null,{"d":"2"}]', ([{"d": Decimal("1.5")}, None, {"d": Decimal("2.0")}], None)),
                (b'[{"d":12345.6}]', _not("array<struct<d:decimal(5,1)>>")),
            ],
        ),
    ],
)
def test_declared_types_that_are_no_struct_are_read_inside_a_payload(
    ddl: str, cases: list[tuple[bytes, Outcome]]
) -> None:
    bodies = [body for body, _ in cases]
    got = _decoded(_declared(ddl, envelope=False), bodies, _arrow_type(ddl))
    _assert_outcomes(bodies, got, [outcome for _, outcome in cases])


# Records Spark's decode read by coercion (or as null), which are flagged here (the module docstring
# tells why); each comment says what Spark read.
DIFFERENCES: list[tuple[str, bytes, bool]] = [
    ("a number into a string", b'{"name":1}', False),  # "1"
    ("an object into a string", b'{"name":{"a":1}}', False),  # '{"a":1}'
    ("more fraction digits than the scale", b'{"amount":1.234}', False),  # 1.23
    ("NaN as text", b'{"d":"NaN"}', False),  # NaN
    ("duplicate keys", b'{"id":1,"id":2}', False),  # 2
    ("an instant without a zone", b'{"at":"2024-05-01 12:00:00"}', False),  # 12:00 in the session's zone
    ("an instant as a date", b'{"at":"2024-05-01"}', False),  # midnight
    ("bytes that are not base64", b'{"raw":"%%%"}', False),  # b""
    ("bytes without padding", b'{"raw":"AAE"}', False),  # b"\x00\x01"
    ("a decimal that is not base64", b'{"payload":{"amount":"%%"}}', True),  # null
    ("a decimal as a number", b'{"payload":{"amount":1.5}}', True),  # null
]


@pytest.mark.parametrize(("name", "body", "envelope"), DIFFERENCES, ids=[d[0] for d in DIFFERENCES])
def test_what_spark_read_by_coercion_is_flagged(name: str, body: bytes, envelope: bool) -> None:
    assert _decoded(_declared(DDL, envelope), [body], _arrow_type(DDL)) == [
        NOT_DDL_ENVELOPE if envelope else NOT_DDL
    ]


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


def test_a_long_type_name_is_cut_as_every_flag_is() -> None:
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
