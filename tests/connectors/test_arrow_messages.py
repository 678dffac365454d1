"""Messages made in Arrow (connectors.arrow_messages): what a Kafka JsonConverter user expects, byte for
byte, for every converter and value kind; records a source or the converter flags keep their place,
flagged; the size check flags per message; a type no converter writes is refused when planned.

Expected bodies are written out by hand for a few rows, and for whole batches built by a Python
reference (``_reference_json``: the ``json`` module's strings, Connect's wire forms written out, Java's
float layout) that was checked against the Spark converter these messages replaced. The envelope
schema is Kafka's Connect schema of the value, written out as a literal.
"""

from __future__ import annotations

import base64
import json
import math
import zlib
from datetime import UTC, date, datetime
from decimal import Context, Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from sluice.connectors.arrow_messages import MESSAGE_SCHEMA, NOT_JSON_VALUE, connect_payloads, sharded
from sluice.connectors.barriers import BARRIER_HEADER, BARRIER_QUEUES_HEADER
from sluice.connectors.converters import (
    OFFSET_PROPERTY,
    PARTITION_PROPERTY,
    TAGS_HEADER,
    TOMBSTONE_PROPERTY,
    JsonConverter,
    StringConverter,
    converter_for,
)
from sluice.connectors.records import ERROR_COLUMN, Record, RecordError, good_arrow_records
from sluice.connectors.rocketmq.limits import MAX_MESSAGE_BYTES, unsendable
from sluice.connectors.source_reads import record_table, records_table
from tests.connectors.test_arrow_envelopes import _value

JSON_SCHEMAS = {"value.converter": "json", "value.converter.schemas.enable": "true"}
JSON_PLAIN = {"value.converter": "json", "value.converter.schemas.enable": "false"}
KEY_ENVELOPES = {"key.converter": "json", "key.converter.schemas.enable": "true"}

#: ``test_arrow_envelopes.VALUE_DDL`` as a source's Arrow records type it.
VALUE_TYPE = pa.struct(
    [
        ("id", pa.int64()), ("tiny", pa.int8()), ("small", pa.int16()), ("n", pa.int32()),
        ("f", pa.float32()), ("d", pa.float64()), ("flag", pa.bool_()), ("name", pa.string()),
        ("raw", pa.binary()), ("amount", pa.decimal128(12, 2)), ("wide", pa.decimal128(30, 5)),
        ("day", pa.date32()), ("at", pa.timestamp("us", tz="UTC")), ("local", pa.timestamp("us")),
        ("tags", pa.list_(pa.string())),
        ("points", pa.list_(pa.struct([("x", pa.int32()), ("label", pa.string())]))),
        ("addr", pa.struct([("city", pa.string()), ("zip", pa.int64())])),
    ]
)  # fmt: skip


def _optional(kind: str, **more: Any) -> dict[str, Any]:
    return {"type": kind, "optional": True, **more}


def _struct(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "struct", "fields": list(fields), "optional": True}


#: Kafka's Connect schema of ``VALUE_TYPE``, keys in the order its JsonConverter writes them.
VALUE_SCHEMA = _struct(
    *[
        {**_optional("int64"), "field": "id"},
        {**_optional("int8"), "field": "tiny"},
        {**_optional("int16"), "field": "small"},
        {**_optional("int32"), "field": "n"},
        {**_optional("float32"), "field": "f"},
        {**_optional("float64"), "field": "d"},
        {**_optional("boolean"), "field": "flag"},
        {**_optional("string"), "field": "name"},
        {**_optional("bytes"), "field": "raw"},
        {
            **_optional("bytes", name="org.apache.kafka.connect.data.Decimal", version=1),
            "parameters": {"scale": "2", "connect.decimal.precision": "12"},
            "field": "amount",
        },
        {
            **_optional("bytes", name="org.apache.kafka.connect.data.Decimal", version=1),
            "parameters": {"scale": "5", "connect.decimal.precision": "30"},
            "field": "wide",
        },
        {**_optional("int32", name="org.apache.kafka.connect.data.Date", version=1), "field": "day"},
        {**_optional("string", name="io.debezium.time.ZonedTimestamp", version=1), "field": "at"},
        {**_optional("int64", name="io.debezium.time.MicroTimestamp", version=1), "field": "local"},
        {"type": "array", "items": _optional("string"), "optional": True, "field": "tags"},
        {
            "type": "array",
            "items": _struct({**_optional("int32"), "field": "x"}, {**_optional("string"), "field": "label"}),
            "optional": True,
            "field": "points",
        },
        {
            **_struct({**_optional("string"), "field": "city"}, {**_optional("int64"), "field": "zip"}),
            "field": "addr",
        },
    ]
)
VALUE_HEAD = '{"schema":' + json.dumps(VALUE_SCHEMA, separators=(",", ":")) + ',"payload":'
#: The payloads of ``_value(0)`` and of a value whose every field but its id is null, as Kafka's
#: JsonConverter writes them (Sluice's instants: ISO-8601 with microseconds, zone-less ones epoch
#: micros; decimals and bytes base64).
PAYLOAD_0 = (
    '{"id":0,"tiny":0,"small":0,"n":0,"f":1.5,"d":3.3333333333333335E299,"flag":true,'
    '"name":"Grüße \\"0\\"\\\\ 東京\\n\\t\\u0001 ✓","raw":"AAD/","amount":"BQ==","wide":"J+QbMka+ybFuOKNA",'
    '"day":-1,"at":"2024-05-01T12:00:00.123456Z","local":946684740000000,"tags":[],'
    '"points":[{"x":0,"label":null},{"x":0,"label":"p"}],"addr":{"city":"Oslo","zip":150}}'
)
PAYLOAD_NULLS = (
    '{"id":2,"tiny":null,"small":null,"n":null,"f":null,"d":null,"flag":null,"name":null,"raw":null,'
    '"amount":null,"wide":null,"day":null,"at":null,"local":null,"tags":null,"points":null,"addr":null}'
)


# --- the Python reference -----------------------------------------------------------------------


def _reference_json(value: Any, kind: pa.DataType) -> str:
    """``value`` (as Arrow's ``to_pylist`` gives it) as the json converter's JSON of its Connect wire
    form: Python's ``json`` strings, base64 bytes and decimals (the unscaled value's minimal two's
    complement, as Java's ``BigInteger.toByteArray``), epoch days, ISO instants, epoch micros."""
    if value is None:
        return "null"
    if pa.types.is_struct(kind):
        members = [f"{json.dumps(f.name)}:{_reference_json(value[f.name], f.type)}" for f in kind]
        return "{" + ",".join(members) + "}"
    if pa.types.is_list(kind):
        return "[" + ",".join(_reference_json(v, kind.value_type) for v in value) + "]"
    if pa.types.is_map(kind):
        entries = [
            f"{json.dumps(k, ensure_ascii=False)}:{_reference_json(v, kind.item_type)}" for k, v in value
        ]
        return "{" + ",".join(entries) + "}"
    if pa.types.is_boolean(kind):
        return "true" if value else "false"
    if pa.types.is_integer(kind):
        return str(value)
    if pa.types.is_floating(kind):
        return _java_float(value, pa.types.is_float32(kind))
    if pa.types.is_string(kind):
        return json.dumps(value, ensure_ascii=False)
    if pa.types.is_binary(kind):
        return json.dumps(base64.b64encode(value).decode())
    if pa.types.is_decimal(kind):
        unscaled = int(value.scaleb(kind.scale, context=Context(prec=100)))
        raw = unscaled.to_bytes(max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1), "big", signed=True)
        return json.dumps(base64.b64encode(raw).decode())
    if pa.types.is_date32(kind):
        return str((value - date(1970, 1, 1)).days)
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        return '"' + value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + 'Z"'
    if pa.types.is_timestamp(kind):
        delta = value - datetime(1970, 1, 1)
        return str((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)
    raise TypeError(kind)


def _java_float(value: float, single: bool) -> str:
    """Java's ``Float/Double.toString`` layout of Python's shortest digits: plain from 10^-3 to
    10^7, ``d.dddE<n>`` outside; the non-finite as strings (Jackson's)."""
    if math.isnan(value) or math.isinf(value):
        return '"NaN"' if math.isnan(value) else ('"Infinity"' if value > 0 else '"-Infinity"')
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    shortest = Decimal(str(np.float32(value)) if single else repr(value))
    sign, digit_tuple, exponent = shortest.normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    power = len(digits) + int(exponent) - 1  # value = d.ddd * 10^power
    minus = "-" if sign else ""
    if -3 <= power < 7:
        whole = digits[: power + 1].ljust(power + 1, "0") if power >= 0 else "0"
        fraction = digits[power + 1 :] if power >= 0 else "0" * (-power - 1) + digits
        return f"{minus}{whole}.{fraction or '0'}"
    return f"{minus}{digits[0]}.{digits[1:] or '0'}E{power}"


def _reference_properties(row: dict[str, Any], extra: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """A record's message properties: its headers that travel (not Sluice's but a barrier mark,
    not the tags, not null), its position, the tombstone mark of a null value, ``extra``."""
    headers = [
        (k, v)
        for k, v in row["headers"] or []
        if v is not None and (not k.startswith("sluice.") or k == BARRIER_HEADER) and k != TAGS_HEADER
    ]
    position = [(PARTITION_PROPERTY, row["partition"]), (OFFSET_PROPERTY, str(row["offset"]))]
    tombstone = [(TOMBSTONE_PROPERTY, "true")] if row["value"] is None else []
    return [*headers, *position, *tombstone, *(extra or {}).items()]


def _typed_values(count: int) -> list[Any]:
    values: list[Any] = [_value(i) for i in range(count)]
    values[2] = {**dict.fromkeys(values[0]), "id": 2}  # every field null but the key
    values[3] = None  # a tombstone
    return values


STRUCT_KEY = pa.struct([("id", pa.int64()), ("region", pa.string())])
STRUCT_KEYS = [{"id": i, "region": None if i % 3 else "eu"} for i in range(8)]
HEADERS = [
    {},
    {"rocketmq.tags": "orders"},
    {"sluice.value.schema": "x", "app": "a", BARRIER_HEADER: "0/1"},
    {"a": "1", "b": "2", "rocketmq.tags": "t2"},
    {},
    {"sluice.tombstone": "true"},
    {"x": "ü ✓"},
    {},
]


def _records(key_type: pa.DataType | None, keys: list[Any] | None, headers: Any = None) -> pa.Table:
    records = [
        Record("db.t", 100 + i, v, topic="t" if i % 2 else None, key=keys[i] if keys else None,
               headers=headers[i] if headers else {})
        for i, v in enumerate(_typed_values(8))
    ]  # fmt: skip
    return records_table(records, VALUE_TYPE, key_type or pa.null())


def _struct_key_head() -> str:
    schema = _struct({**_optional("int64"), "field": "id"}, {**_optional("string"), "field": "region"})
    return '{"schema":' + json.dumps(schema, separators=(",", ":")) + ',"payload":'


def _envelope_key(key: dict[str, Any]) -> str:
    return f"{_struct_key_head()}{_reference_json(key, STRUCT_KEY)}}}"


CASES = {
    "string keys, no headers": (JSON_SCHEMAS, pa.string(), [f'{{"id":{i}}}' for i in range(8)], None, {}),
    "no keys, headers, tags and a batch reference": (
        JSON_SCHEMAS,
        None,
        None,
        HEADERS,
        {"sluice.batch": "c/0/7"},
    ),
    "struct keys as JSON": (
        {**JSON_SCHEMAS, "key.converter": "json", "key.converter.schemas.enable": "false"},
        STRUCT_KEY,
        STRUCT_KEYS,
        HEADERS,
        {},
    ),
    "struct keys as envelopes": (
        {**JSON_SCHEMAS, **KEY_ENVELOPES},
        STRUCT_KEY,
        STRUCT_KEYS,
        None,
        {"sluice.batch": "c/0/8"},
    ),
}


def _expected_keys(config: dict[str, str], keys: list[Any] | None) -> list[str | None]:
    if keys is None:
        return [None] * 8
    if config.get("key.converter.schemas.enable") == "true":
        return [_envelope_key(k) for k in keys]
    if isinstance(keys[0], dict):  # Spark's to_json: a null field left out
        return [
            json.dumps({k: v for k, v in key.items() if v is not None}, separators=(",", ":")) for key in keys
        ]
    return keys


@pytest.mark.parametrize("config, key_type, keys, headers, extra", CASES.values(), ids=list(CASES))
def test_envelope_messages_are_kafkas(
    config: dict[str, str], key_type: pa.DataType | None, keys: Any, headers: Any, extra: Any
) -> None:
    records = _records(key_type, keys, headers)
    messages = converter_for(config).arrow_encoder(records.schema).encode(records, extra or None)
    assert messages.schema == MESSAGE_SCHEMA  # no record flagged: no error column
    rows = records.to_pylist()
    bodies = messages.column("body").to_pylist()
    assert bodies[0] == f"{VALUE_HEAD}{PAYLOAD_0}}}".encode()
    assert bodies[2] == f"{VALUE_HEAD}{PAYLOAD_NULLS}}}".encode()
    assert bodies[3] == b""  # a tombstone
    assert bodies == [
        b"" if r["value"] is None else f"{VALUE_HEAD}{_reference_json(r['value'], VALUE_TYPE)}}}".encode()
        for r in rows
    ]
    assert messages.column("keys").to_pylist() == _expected_keys(config, keys)
    assert messages.column("topic").to_pylist() == [None, "t"] * 4
    assert messages.column("partition").to_pylist() == ["db.t"] * 8
    assert messages.column("offset").to_pylist() == list(range(100, 108))
    tags = [dict(h).get(TAGS_HEADER) for h in headers] if headers else [None] * 8
    assert messages.column("tags").to_pylist() == tags
    assert messages.column("properties").to_pylist() == [_reference_properties(r, extra) for r in rows]


def test_keys_and_properties_written_out() -> None:
    """A few messages' keys and properties as literals: the struct key as JSON (its null field left
    out) and as an envelope; headers first, then the position, the tombstone mark, the extras."""
    records = _records(STRUCT_KEY, STRUCT_KEYS, HEADERS)
    plain = converter_for({**JSON_SCHEMAS, "key.converter": "json"}).arrow_encoder(records.schema)
    messages = plain.encode(records, {"sluice.batch": "c/0/7"})
    assert messages.column("keys").to_pylist()[:2] == ['{"id":0,"region":"eu"}', '{"id":1}']
    assert messages.column("properties").to_pylist()[2:4] == [
        [("app", "a"), (BARRIER_HEADER, "0/1"), ("sluice.partition", "db.t"), ("sluice.offset", "102"),
         ("sluice.batch", "c/0/7")],
        [("a", "1"), ("b", "2"), ("sluice.partition", "db.t"), ("sluice.offset", "103"),
         ("sluice.tombstone", "true"), ("sluice.batch", "c/0/7")],
    ]  # fmt: skip
    assert messages.column("tags").to_pylist()[:4] == [None, "orders", None, "t2"]
    envelopes = converter_for({**JSON_SCHEMAS, **KEY_ENVELOPES}).arrow_encoder(records.schema)
    assert envelopes.encode(records).column("keys").to_pylist()[1] == (
        '{"schema":{"type":"struct","fields":[{"type":"int64","optional":true,"field":"id"},'
        '{"type":"string","optional":true,"field":"region"}],"optional":true},'
        '"payload":{"id":1,"region":null}}'
    )


OWN_BYTES = {
    "the string converter, text lines": ({"value.converter": "string"}, pa.string()),
    "the string converter, binary values": ({"value.converter": "string"}, pa.binary()),
    "the bytes converter, text lines": ({"value.converter": "bytes"}, pa.string()),
    "the bytes converter, binary values": ({"value.converter": "bytes"}, pa.binary()),
    "the bytes converter, large text": ({"value.converter": "bytes"}, pa.large_string()),
}


@pytest.mark.parametrize("config, value_type", OWN_BYTES.values(), ids=list(OWN_BYTES))
def test_bodies_of_a_values_own_bytes(config: dict[str, str], value_type: pa.DataType) -> None:
    """A file source's lines: the body is the text's UTF-8 (or the binary value), a null value a
    tombstone, with string keys and headers as in the envelope cases."""
    lines = ["0000000001 plain", "ü ✓ non-ASCII", "", None, "x" * 300, "tab\tand\\", "7", "last"]
    values = [None if v is None else (v.encode() if pa.types.is_binary(value_type) else v) for v in lines]
    records = [
        Record("/data/in.txt", 100 * i, v, key=None if i % 3 else f"k{i}", headers=HEADERS[i])
        for i, v in enumerate(values)
    ]
    table = records_table(records, value_type, pa.string())
    messages = converter_for(config).arrow_encoder(table.schema).encode(table, {"sluice.batch": "c/0/9"})
    assert messages.column("body").to_pylist() == [b"" if v is None else v.encode() for v in lines]
    assert messages.column("keys").to_pylist() == ["k0", None, None, "k3", None, None, "k6", None]
    assert messages.column("properties").to_pylist() == [
        _reference_properties(r, {"sluice.batch": "c/0/9"}) for r in table.to_pylist()
    ]
    assert messages.column("properties").to_pylist()[3] == [
        ("a", "1"), ("b", "2"), ("sluice.partition", "/data/in.txt"), ("sluice.offset", "300"),
        ("sluice.tombstone", "true"), ("sluice.batch", "c/0/9"),
    ]  # fmt: skip


def test_payloads_of_every_type_are_connects_wire_forms() -> None:
    """Each field on its own, so a difference names its type."""
    values = pa.array(_typed_values(8), VALUE_TYPE)
    for field, child in zip(VALUE_TYPE, values.flatten(), strict=True):
        expected = [_reference_json(v, field.type) for v in child.to_pylist()]
        assert connect_payloads(child).to_pylist() == expected, field.name


def test_decimal_payloads_are_javas_minimal_twos_complement() -> None:
    """Kafka's Decimal payload: ``BigInteger.toByteArray`` of the unscaled value, in base64."""
    cases = [("0", 0, "00"), ("-1", 0, "ff"), ("127", 0, "7f"), ("128", 0, "0080"), ("-128", 0, "80"),
             ("-129", 0, "ff7f"), ("-0.01", 2, "ff"), ("12345678.91", 2, "499602d3"),
             ("99999999999999999999999999999999999999", 0, "4b3b4ca85a86c47a098a223fffffffff")]  # fmt: skip
    for text, scale, hexed in cases:
        payload = connect_payloads(pa.array([Decimal(text)], pa.decimal128(38, scale))).to_pylist()[0]
        assert base64.b64decode(json.loads(payload)).hex() == hexed, text


# --- each converter's values, keys and flags ----------------------------------------------------

TIMES = [
    datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=UTC),
    datetime(2024, 1, 1, 0, 0, 0, 120000, tzinfo=UTC),
]


def _one_column(
    value_type: pa.DataType,
    values: list[Any],
    key_type: pa.DataType | None = None,
    keys: list[Any] | None = None,
    errors: list[str | None] | None = None,
) -> pa.Table:
    return record_table(
        "p", list(range(len(values))), values, topic="t", value_type=value_type, keys=keys,
        key_type=key_type or pa.string(), errors=errors,
    )  # fmt: skip


def _bodies(config: dict[str, str], table: pa.Table) -> list[bytes | None]:
    return converter_for(config).arrow_encoder(table.schema).encode(table).column("body").to_pylist()


STRING_BODIES = {
    "int": (pa.int32(), [1, -(2**31), None], [b"1", b"-2147483648", b""]),
    "float": (pa.float32(), [1.5, float("nan"), 1e10], [b"1.5", b"NaN", b"1.0E10"]),
    "double": (pa.float64(), [0.1, 1e300, -0.0], [b"0.1", b"1.0E300", b"-0.0"]),
    "boolean": (pa.bool_(), [True, False], [b"true", b"false"]),
    "decimal": (pa.decimal128(38, 10), [Decimal("0E-10"), Decimal("-1.5")],
                [b"0.0000000000", b"-1.5000000000"]),
    "date": (pa.date32(), [date(2024, 2, 29), date(1, 1, 1)], [b"2024-02-29", b"0001-01-01"]),
    "timestamp": (pa.timestamp("us", "UTC"), TIMES,
                  [b"2024-02-29 23:59:59.123456", b"2024-01-01 00:00:00.12"]),
    "timestamp_ntz": (pa.timestamp("us"), [t.replace(tzinfo=None) for t in TIMES],
                      [b"2024-02-29 23:59:59.123456", b"2024-01-01 00:00:00.12"]),
    "struct": (
        pa.struct([("i", pa.int64()), ("s", pa.string()), ("d", pa.decimal128(5, 2)),
                   ("at", pa.timestamp("us", "UTC")), ("b", pa.binary())]),
        [{"i": 1, "s": 'a"b', "d": Decimal("1.25"), "at": TIMES[0], "b": b"\x00\xff"},
         {"i": None, "s": None, "d": None, "at": None, "b": None}],
        [b'{"i":1,"s":"a\\"b","d":1.25,"at":"2024-02-29T23:59:59.123Z","b":"AP8="}',
         b'{"i":null,"s":null,"d":null,"at":null,"b":null}'],
    ),
    "map": (pa.map_(pa.string(), pa.float64()), [[("a", 1.5)], [("b", None), ("c", 1e10)]],
            [b'{"a":1.5}', b'{"b":null,"c":1.0E10}']),
    "list": (pa.list_(pa.int32()), [[1, None], []], [b"[1,null]", b"[]"]),
}  # fmt: skip


@pytest.mark.parametrize("value_type, values, bodies", STRING_BODIES.values(), ids=list(STRING_BODIES))
def test_the_string_converter_writes_a_values_text(
    value_type: pa.DataType, values: list[Any], bodies: list[bytes]
) -> None:
    """As Spark casts a value to a string: structures as JSON with null fields kept (Spark's own
    forms: millisecond instants, plain decimals), decimals plainly, floating point as Java does."""
    assert _bodies({"value.converter": "string"}, _one_column(value_type, values)) == bodies


JSON_BODIES = {
    "int": (pa.int64(), [7, None], [b"7", b""]),
    "float": (pa.float32(), [1.5, float("inf")], [b"1.5", b'"Infinity"']),
    "text as JSON": (pa.binary(), [b"\x00\xff"], [b'"AP8="']),
    "decimal": (pa.decimal128(12, 2), [Decimal("1.25"), Decimal("-0.01")], [b'"fQ=="', b'"/w=="']),
    "date": (pa.date32(), [date(2024, 2, 29), date(1969, 12, 31)], [b"19782", b"-1"]),
    "timestamp": (pa.timestamp("us", "UTC"), TIMES,
                  [b'"2024-02-29T23:59:59.123456Z"', b'"2024-01-01T00:00:00.120000Z"']),
    "timestamp_ntz": (pa.timestamp("us"), [TIMES[0].replace(tzinfo=None)], [b"1709251199123456"]),
    "struct": (
        pa.struct([("i", pa.int64()), ("d", pa.decimal128(5, 2)), ("day", pa.date32()),
                   ("xs", pa.list_(pa.string()))]),
        [{"i": 1, "d": Decimal("1.25"), "day": date(1970, 1, 2), "xs": ["a", None]},
         {"i": None, "d": None, "day": None, "xs": None}],
        [b'{"i":1,"d":"fQ==","day":1,"xs":["a",null]}', b'{"i":null,"d":null,"day":null,"xs":null}'],
    ),
    "map": (pa.map_(pa.string(), pa.timestamp("us", "UTC")), [[("at", TIMES[0])]],
            [b'{"at":"2024-02-29T23:59:59.123456Z"}']),
}  # fmt: skip


@pytest.mark.parametrize("value_type, values, bodies", JSON_BODIES.values(), ids=list(JSON_BODIES))
def test_the_json_converter_without_schemas_writes_the_values_wire_json(
    value_type: pa.DataType, values: list[Any], bodies: list[bytes]
) -> None:
    """The payload an envelope would carry, alone: decimals and bytes base64, dates epoch days,
    instants ISO-8601 with microseconds, zone-less date-times epoch micros."""
    assert _bodies(JSON_PLAIN, _one_column(value_type, values)) == bodies


def test_the_json_converter_with_schemas_wraps_scalars_and_text() -> None:
    bodies = _bodies(JSON_SCHEMAS, _one_column(pa.string(), ['{"a":1}', None, "plain"]))
    assert bodies == [
        b'{"schema":{"type":"string","optional":true},"payload":"{\\"a\\":1}"}',
        b"",
        b'{"schema":{"type":"string","optional":true},"payload":"plain"}',
    ]
    decimals = _bodies(JSON_SCHEMAS, _one_column(pa.decimal128(5, 2), [Decimal("-0.01")]))
    assert decimals == [
        b'{"schema":{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal",'
        b'"version":1,"parameters":{"scale":"2","connect.decimal.precision":"5"}},"payload":"/w=="}'
    ]


SCALAR_KEYS = {
    "bigint": (pa.int64(), [1, -(2**63)], ["1", "-9223372036854775808"]),
    "boolean": (pa.bool_(), [True, False], ["true", "false"]),
    "float": (pa.float32(), [float("nan"), 1e10], ['"NaN"', "1.0E10"]),
    "double": (pa.float64(), [0.1, 123456789.0], ["0.1", "1.23456789E8"]),
    "binary": (pa.binary(), [b"\x00\xff", b""], ['"AP8="', '""']),
    "decimal": (pa.decimal128(12, 2), [Decimal("1.25"), Decimal("9999999999.99")], ['"fQ=="', '"AOjUpQ//"']),
    "date": (pa.date32(), [date(2024, 2, 29), date(1, 1, 1)], ["19782", "-719162"]),
    "timestamp": (pa.timestamp("us", "UTC"), TIMES,
                  ['"2024-02-29T23:59:59.123456Z"', '"2024-01-01T00:00:00.120000Z"']),
    "timestamp_ntz": (pa.timestamp("us"), [datetime(1969, 12, 31, 23, 59, 59, 999999)], ["-1"]),
}  # fmt: skip


@pytest.mark.parametrize("key_type, keys, texts", SCALAR_KEYS.values(), ids=list(SCALAR_KEYS))
def test_scalar_keys_are_the_json_of_their_wire_form(
    key_type: pa.DataType, keys: list[Any], texts: list[str]
) -> None:
    table = _one_column(pa.string(), ["v"] * (len(keys) + 1), key_type, [*keys, None])
    messages = converter_for({"value.converter": "string"}).arrow_encoder(table.schema).encode(table)
    assert messages.column("keys").to_pylist() == [*texts, None]


def test_scalar_keys_as_envelopes() -> None:
    table = _one_column(pa.string(), ["v", "w"], pa.int32(), [5, None])
    messages = (
        converter_for({"value.converter": "string", **KEY_ENVELOPES})
        .arrow_encoder(table.schema)
        .encode(table)
    )
    assert messages.column("keys").to_pylist() == [
        '{"schema":{"type":"int32","optional":true},"payload":5}',
        None,
    ]
    dates = _one_column(pa.string(), ["v"], pa.date32(), [date(1970, 1, 2)])
    encoder = converter_for({"value.converter": "string", **KEY_ENVELOPES}).arrow_encoder(dates.schema)
    assert encoder.encode(dates).column("keys").to_pylist() == [
        '{"schema":{"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Date","version":1},'
        '"payload":1}'
    ]


def test_schemaless_text_values_are_sent_as_they_are_and_flagged_when_not_json() -> None:
    """Without schemas a string value is taken to be JSON text already; one that is not one JSON
    value (an empty string neither) is flagged, a null one stays a tombstone. The check is the one
    a sink makes of a schemaless body (arrow_json_bodies.not_json): as Jackson reads a root value,
    what follows the first value is not read, and duplicate keys are JSON (Kafka keeps the last)."""
    texts = ['{"a": 1}', "id=1", "", None, '{"a":1} x', '{"a":1,"a":2}', "12", "  [1, 2] ", "null", "NaN",
             "1, 2", '"s"', "tru", "{broken"]  # fmt: skip
    table = _one_column(pa.string(), texts)
    messages = converter_for(JSON_PLAIN).arrow_encoder(table.schema).encode(table)
    assert messages.column("body").to_pylist() == [b"" if t is None else t.encode() for t in texts]
    flagged = {1, 2, 9, 10, 12, 13}
    assert messages.column(ERROR_COLUMN).to_pylist() == [
        NOT_JSON_VALUE if i in flagged else None for i in range(len(texts))
    ]
    assert [dict(p).get(TOMBSTONE_PROPERTY) for p in messages.column("properties").to_pylist()][2:4] == [
        None,
        "true",
    ]
    with pytest.raises(RecordError, match="partition 'p' offset 1: json converter: value is not valid JSON"):
        good_arrow_records(messages, "connector 'src'")


def test_a_records_own_flag_is_kept_and_comes_first() -> None:
    """A record its source could not decode keeps its flag, and its place: one message per record,
    in order; the converter's flag of another record follows it."""
    table = _one_column(
        pa.string(), ['{"a":1}', None, "x", '{"b":2}', "nope"],
        errors=[None, "source: not UTF-8", None, "bad", "its own"],
    )  # fmt: skip
    messages = converter_for(JSON_PLAIN).arrow_encoder(table.schema).encode(table)
    assert messages.column("offset").to_pylist() == [0, 1, 2, 3, 4]
    assert messages.column(ERROR_COLUMN).to_pylist() == [
        None,
        "source: not UTF-8",
        NOT_JSON_VALUE,
        "bad",
        "its own",
    ]
    assert messages.column("body").to_pylist() == [b'{"a":1}', b"", b"x", b'{"b":2}', b"nope"]
    envelopes = _one_column(VALUE_TYPE, _typed_values(4)[:3], errors=[None, "source: bad row", None])
    made = converter_for(JSON_SCHEMAS).arrow_encoder(envelopes.schema).encode(envelopes)
    assert made.column(ERROR_COLUMN).to_pylist() == [None, "source: bad row", None]
    assert made.column("body").to_pylist()[0] == f"{VALUE_HEAD}{PAYLOAD_0}}}".encode()
    unflagged = _one_column(pa.string(), ["{}"], errors=[None])
    assert (
        ERROR_COLUMN
        not in converter_for(JSON_PLAIN).arrow_encoder(unflagged.schema).encode(unflagged).column_names
    )


def test_a_null_typed_value_is_a_tombstone_for_every_converter() -> None:
    table = _one_column(pa.null(), [None, None])
    for config in ({"value.converter": "string"}, {"value.converter": "bytes"}, JSON_SCHEMAS, JSON_PLAIN):
        messages = converter_for(config).arrow_encoder(table.schema).encode(table)
        assert messages.column("body").to_pylist() == [b"", b""]
        assert [dict(p)[TOMBSTONE_PROPERTY] for p in messages.column("properties").to_pylist()] == [
            "true",
            "true",
        ]


def test_nanosecond_timestamps_are_cut_to_microseconds() -> None:
    """As Spark takes them: a value's instants and a key's."""
    nanos = pa.array([1_709_251_199_123_456_789], pa.timestamp("ns", "UTC"))
    value_type = pa.struct([("at", pa.timestamp("ns", "UTC")), ("local", pa.timestamp("ns"))])
    values = pa.StructArray.from_arrays([nanos, nanos.cast(pa.timestamp("ns"))], fields=list(value_type))
    table = _one_column(value_type, values.to_pylist(), pa.timestamp("ns", "UTC"), [None])
    table = table.set_column(table.schema.get_field_index("value"), "value", values)
    table = table.set_column(table.schema.get_field_index("key"), "key", nanos)
    messages = converter_for(JSON_SCHEMAS).arrow_encoder(table.schema).encode(table)
    assert messages.column("body").to_pylist() == [
        b'{"schema":{"type":"struct","fields":[{"type":"string","optional":true,'
        b'"name":"io.debezium.time.ZonedTimestamp","version":1,"field":"at"},{"type":"int64","optional":true,'
        b'"name":"io.debezium.time.MicroTimestamp","version":1,"field":"local"}],"optional":true},'
        b'"payload":{"at":"2024-02-29T23:59:59.123456Z","local":1709251199123456}}'
    ]
    assert messages.column("keys").to_pylist() == ['"2024-02-29T23:59:59.123456Z"']
    text = converter_for({"value.converter": "string"}).arrow_encoder(table.schema).encode(table)
    assert text.column("body").to_pylist() == [
        b'{"at":"2024-02-29T23:59:59.123Z","local":"2024-02-29T23:59:59.123"}'
    ]


UNWRITTEN = {
    "a 256-bit decimal value": (JSON_SCHEMAS, "value", pa.decimal256(40, 2),
                                "json converter: a value of type decimal256(40, 2)"),
    "a 256-bit decimal value, schemas off": (JSON_PLAIN, "value", pa.struct([("d", pa.decimal256(40, 2))]),
                                             "json converter: a value of type struct<d: decimal256(40, 2)>"),
    "a time of day": ({"value.converter": "string"}, "value", pa.time64("us"),
                      "string converter: a value of type time64[us]"),
    "an unsigned integer": (JSON_SCHEMAS, "value", pa.uint64(), "json converter: a value of type uint64"),
    "a map of integer keys in an envelope": (JSON_SCHEMAS, "value", pa.map_(pa.int32(), pa.string()),
                                             "json converter: a value of type map<int32, string>"),
    "a 256-bit decimal key": ({"value.converter": "string"}, "key", pa.decimal256(40, 2),
                              "string converter: a key of type decimal256(40, 2)"),
    "a struct key of a time": ({"value.converter": "bytes"}, "key", pa.struct([("t", pa.time32("s"))]),
                               "bytes converter: a key of type struct<t: time32[s]>"),
    "an enveloped key of a time": ({**JSON_SCHEMAS, **KEY_ENVELOPES}, "key", pa.time32("s"),
                                   "json converter: a key of type time32[s]"),
}  # fmt: skip


@pytest.mark.parametrize("config, column, kind, message", UNWRITTEN.values(), ids=list(UNWRITTEN))
def test_a_type_no_converter_writes_is_refused_when_planned_naming_the_column(
    config: dict[str, str], column: str, kind: pa.DataType, message: str
) -> None:
    schema = pa.schema([pa.field("key", pa.string()), pa.field("value", pa.string())])
    schema = schema.set(schema.get_field_index(column), pa.field(column, kind))
    with pytest.raises(ValueError) as caught:
        converter_for(config).arrow_encoder(schema)
    assert str(caught.value) == f"{message} is not written by Sluice"


def test_the_bytes_converter_takes_only_binary_or_text() -> None:
    schema = pa.schema([pa.field("key", pa.string()), pa.field("value", pa.struct([("id", pa.int64())]))])
    with pytest.raises(
        ValueError, match=r"^bytes converter: value must be binary or string, got struct<id: int64>$"
    ):
        converter_for({"value.converter": "bytes"}).arrow_encoder(schema)


def test_a_map_of_integer_keys_is_written_as_text_by_the_string_converter() -> None:
    table = _one_column(pa.map_(pa.int32(), pa.string()), [[(1, "a"), (2, None)]])
    assert _bodies({"value.converter": "string"}, table) == [b'{"1":"a","2":null}']


# --- a declared value.converter.schema (its DDL is Spark's: a session parses it) ---------------


def test_a_declared_schema_parses_text_values_and_flags_what_does_not_fit(spark: Any) -> None:
    """A text value read as the declared type (decimals plain JSON numbers, dates epoch days,
    instants ISO-8601 or epoch millis), then written as an envelope or, schemas off, as the JSON of
    its wire form; a text that does not fit is flagged, naming the type, and has no body; a JSON
    null is a tombstone."""
    texts = [
        '{"a": 5, "d": 1.25, "day": 19782, "at": "2024-02-29T23:59:59.123456Z"}',
        "oops",
        None,
        "",
        '{"a": "x"}',
        '{"a": 1}',
        "null",
        '{"a": 3} trailing',
        '{"a": 4, "at": 1714564800000}',
    ]
    table = _one_column(pa.string(), texts)
    ddl = "a int, d decimal(5,2), day date, at timestamp"
    problem = "json converter: value does not parse as struct<a:int,d:decimal(5,2),day:date,at:timestamp>"
    plain = (
        converter_for({**JSON_PLAIN, "value.converter.schema": ddl}).arrow_encoder(table.schema).encode(table)
    )
    payloads = [
        b'{"a":5,"d":"fQ==","day":19782,"at":"2024-02-29T23:59:59.123456Z"}',
        None,
        b"",
        None,
        None,
        b'{"a":1,"d":null,"day":null,"at":null}',
        None,
        b'{"a":3,"d":null,"day":null,"at":null}',
        b'{"a":4,"d":null,"day":null,"at":"2024-05-01T12:00:00.000000Z"}',
    ]
    assert plain.column("body").to_pylist() == payloads
    errors = [None, problem, None, problem, problem, None, problem, None, None]
    assert plain.column(ERROR_COLUMN).to_pylist() == errors
    schema = (
        b'{"schema":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"a"},{"type":"bytes",'
        b'"optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2",'
        b'"connect.decimal.precision":"5"},"field":"d"},{"type":"int32","optional":true,'
        b'"name":"org.apache.kafka.connect.data.Date","version":1,"field":"day"},{"type":"string",'
        b'"optional":true,"name":"io.debezium.time.ZonedTimestamp","version":1,"field":"at"}],'
        b'"optional":true},"payload":'
    )
    on = (
        converter_for({**JSON_SCHEMAS, "value.converter.schema": ddl})
        .arrow_encoder(table.schema)
        .encode(table)
    )
    assert on.column("body").to_pylist() == [p if not p else schema + p + b"}" for p in payloads]
    assert on.column(ERROR_COLUMN).to_pylist() == errors
    tombstones = [dict(p).get(TOMBSTONE_PROPERTY) for p in on.column("properties").to_pylist()]
    assert tombstones == [None, None, "true", None, None, None, None, None, None]

    numbers = _one_column(pa.string(), ["5", "x", None, "null", "1.5", " 7 "])
    bigint = converter_for({**JSON_SCHEMAS, "value.converter.schema": "bigint"}).arrow_encoder(numbers.schema)
    made = bigint.encode(numbers)
    head = b'{"schema":{"type":"int64","optional":true},"payload":'
    assert made.column("body").to_pylist() == [head + b"5}", None, b"", b"", None, head + b"7}"]
    not_bigint = "json converter: value does not parse as bigint"
    assert made.column(ERROR_COLUMN).to_pylist() == [None, not_bigint, None, None, not_bigint, None]
    with pytest.raises(ValueError, match=r"holds a type Sluice parses only from Connect envelopes \(a map\)"):
        converter_for({**JSON_PLAIN, "value.converter.schema": "m map<string,int>"}).arrow_encoder(
            table.schema
        )


# --- the size check and the send's shards -------------------------------------------------------


def _messages_table(rows: list[dict[str, Any]]) -> pa.Table:
    full = [
        {"topic": None, "body": b"{}", "keys": None, "tags": None, "partition": "db.t", "offset": i, **row}
        for i, row in enumerate(rows)
    ]
    for row in full:
        row["properties"] = list(row.get("properties", {}).items())
    return pa.Table.from_pylist(full, schema=MESSAGE_SCHEMA)


def test_the_size_check_flags_each_message_over_the_limits() -> None:
    """Per message: null where it fits, why where it does not (its stored size and body, or its
    properties' size); None for a batch where every message fits."""
    from sluice.connectors.rocketmq.codec import MAX_PROPERTIES_BYTES, STORED_OVERHEAD

    row = {"topic": "orders", "keys": "k1", "tags": "t", "properties": {"sluice.partition": "p", "a": "ü"}}
    properties = (4 + 2 + 2) + (4 + 2 + 1) + (16 + 2 + 1) + (1 + 2 + 2) + (8 + 2 + 32) + (4 + 2 + 4)
    base = 2 + properties + STORED_OVERHEAD + len("orders")  # all but the body
    fits = _messages_table([{**row, "body": b"x" * (MAX_MESSAGE_BYTES - base)}])
    assert unsendable(fits) is None
    assert unsendable(_messages_table([])) is None
    over = _messages_table([{**row, "body": b"x" * (MAX_MESSAGE_BYTES - base + 1)}])
    stamped = 40
    many = _messages_table([{"properties": {f"p{i}": "v" * 100 for i in range(400)}}])
    batch = pa.concat_tables([fits, _messages_table([row]), over, many])
    problems = unsendable(batch, stamped)
    assert problems is not None
    too_large = (
        f"message of {MAX_MESSAGE_BYTES + 1 + stamped} bytes (body {MAX_MESSAGE_BYTES - base + 1} bytes) "
        f"is over RocketMQ's maximum message size of {MAX_MESSAGE_BYTES} bytes"
    )
    fits_stamped = (
        f"message of {MAX_MESSAGE_BYTES + stamped} bytes (body {MAX_MESSAGE_BYTES - base} bytes) is over "
        f"RocketMQ's maximum message size of {MAX_MESSAGE_BYTES} bytes"
    )
    # each entry's name, value and two separators; UNIQ_KEY's and WAIT's; the stamped ones
    many_bytes = sum(len(f"p{i}") + 2 + 100 for i in range(400)) + 42 + 10 + stamped
    assert problems.to_pylist() == [
        fits_stamped,  # fits only without the stamped properties
        None,
        too_large,
        f"message properties take {many_bytes} bytes, over RocketMQ's limit of {MAX_PROPERTIES_BYTES}",
    ]


def test_an_oversized_message_is_flagged_naming_its_record() -> None:
    """A JDBC batch's record whose message is over the broker's limit: flagged with its position,
    before anything is sent, the others not."""
    value_type = pa.struct([("id", pa.int64()), ("text", pa.string())])
    values = [{"id": 1, "text": "small"}, {"id": 2, "text": "x" * (5 * 1024 * 1024)}]
    records = record_table(
        "db.t", [6, 7], values, value_type=value_type, keys=["1", "2"], key_type=pa.string()
    )
    messages = converter_for(JSON_SCHEMAS).arrow_encoder(records.schema).encode(records)
    problems = unsendable(messages)
    assert problems is not None
    with pytest.raises(RecordError) as caught:
        good_arrow_records(messages.append_column(ERROR_COLUMN, problems), "connector c")
    assert str(caught.value).startswith("connector c: bad record at partition 'db.t' offset 7: message of ")
    assert str(caught.value).endswith("over RocketMQ's maximum message size of 4194304 bytes")
    assert problems.to_pylist()[0] is None


def test_sharding_sends_keyed_messages_by_their_keys_crc32_and_a_barrier_to_every_queue() -> None:
    """Keyed messages by the crc32 of their key (``pmod(crc32(key), n)``), keyless ones by their
    partition's, and a barrier to every queue, each copy labelled, in the row's place."""
    queues = ("broker-a:0", "broker-a:1", "broker-a:2")
    messages = _messages_table(
        [
            {"keys": '{"id":1}', "properties": {"sluice.offset": "0"}},
            {"keys": "Grüße ✓", "tags": "t"},
            {"partition": "db.other", "properties": {"app": "x"}},
            {"keys": '{"id":1}', "properties": {BARRIER_HEADER: "true", "sluice.offset": "3"}},
            {"keys": '{"id":42}'},
        ]
    )
    out = sharded(messages, queues)

    def slot(text: str) -> int:
        return zlib.crc32(text.encode()) % 3

    assert out.column("queue").to_pylist() == [
        slot('{"id":1}'),
        slot("Grüße ✓"),
        slot("db.other"),
        0,
        1,
        2,
        slot('{"id":42}'),
    ]
    assert out.column("offset").to_pylist() == [0, 1, 2, 3, 3, 3, 4]
    listed = ",".join(queues)
    assert out.column("properties").to_pylist()[2:6] == [
        [("app", "x")],
        *[
            [("sluice.offset", "3"), (BARRIER_HEADER, f"{i}/3"), (BARRIER_QUEUES_HEADER, listed)]
            for i in range(3)
        ],
    ]


def test_an_empty_read_makes_no_messages_and_shards_none() -> None:
    """A snapshot chunk or a log range can hold no rows; its job's task gets a table of no chunks."""
    records = _records(pa.string(), [f"{i}" for i in range(8)]).slice(0, 0)
    assert converter_for(JSON_SCHEMAS).arrow_encoder(records.schema).encode(records).num_rows == 0
    no_chunks = pa.Table.from_batches([], schema=MESSAGE_SCHEMA)
    assert sharded(no_chunks, ("broker-a:0",)).column("queue").to_pylist() == []


def test_encoders_are_planned_once_and_pickle() -> None:
    """An encoder is planned on the driver and runs in a Spark task: it pickles, and equal plans
    are equal (the runner keeps one per record shape)."""
    import pickle

    records = _records(STRUCT_KEY, STRUCT_KEYS, HEADERS)
    converter = converter_for({**JSON_SCHEMAS, **KEY_ENVELOPES})
    encoder = converter.arrow_encoder(records.schema)
    assert pickle.loads(pickle.dumps(encoder)) == encoder == converter.arrow_encoder(records.schema)
    assert isinstance(StringConverter().arrow_encoder(records.schema), type(encoder))
    assert JsonConverter().arrow_encoder(records.schema).value.kind == "connect"
