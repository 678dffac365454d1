"""The reader's Arrow batches (codec.decode_columns + arrow_decode) equal the old per-message conversion.

1. Table-driven: tricky properties texts (unicode, empty names or values, missing keys/tags, system
   properties, values holding ``\\x01`` or newlines, no properties, repeated names, a compressed body)
   in stored messages built here byte by byte; the expected rows are written out by hand, in the
   shape the per-message conversion produced (``list(m.properties.items())`` per message).
2. Property test of the column-wise properties parser against a plain Python parser written here.
3. Against the broker: ``pull_range_columns`` returns exactly ``[start, end)``, as sent.
"""

from __future__ import annotations

import struct
import time
import zlib
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.connectors.rocketmq.arrow_decode import parse_properties, to_record_batch
from sluice.connectors.rocketmq.codec import SYSTEM_PROPERTIES, decode_columns, decode_messages
from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.connectors.rocketmq.values import MessageColumns, MessageQueue, OutgoingMessage
from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.rocketmq import BROKER_NAME

pytestmark = pytest.mark.timeout(300)

MQ = MessageQueue("T", "broker-a", 2)
BORN_MS, STORE_MS = 1_700_000_000_123, 1_700_000_000_456
TS = pa.timestamp("us", tz="UTC")
SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.string()),
        ("queue_id", pa.int32()),
        ("queue_offset", pa.int64()),
        ("keys", pa.string()),
        ("tags", pa.string()),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("born_timestamp", TS),
        ("store_timestamp", TS),
        ("body", pa.binary()),
    ]
)


def stored(offset: int, body: bytes, text: str, *, compressed: bool = False) -> bytes:
    """One message in the broker's stored layout (V1 magic, IPv4 hosts), written out field by field."""
    payload = zlib.compress(body) if compressed else body
    topic, props = MQ.topic.encode(), text.encode()
    fields = [
        struct.pack(
            ">iiiiqqiq", -626843481, 0, MQ.queue_id, 0, offset, 4096 + offset, int(compressed), BORN_MS
        ),
        b"\x7f\x00\x00\x01" + struct.pack(">i", 4242),  # born host + port
        struct.pack(">q", STORE_MS),
        b"\x7f\x00\x00\x01" + struct.pack(">i", 10911),  # store host + port
        struct.pack(">iqi", 0, 0, len(payload)),  # reconsume times, prepared tx offset, body length
        payload,
        struct.pack(">B", len(topic)),
        topic,
        struct.pack(">h", len(props)),
        props,
    ]
    rest = b"".join(fields)
    return struct.pack(">i", 4 + len(rest)) + rest


# name, properties text, compressed body, expected keys, tags, properties (in the text's order)
CASES: list[tuple[str, str, bool, str | None, str | None, list[tuple[str, str]]]] = [
    ("no properties", "", False, None, None, []),
    ("user properties", "a\x011\x02b\x01two words\x02", False, None, None, [("a", "1"), ("b", "two words")]),
    ("keys and tags", "KEYS\x01k1 k2\x02TAGS\x01tagA\x02x\x01y\x02", False, "k1 k2", "tagA", [("x", "y")]),
    ("tags without keys", "TAGS\x01t\x02", False, None, "t", []),
    ("keys without tags", "p\x01q\x02KEYS\x01only\x02", False, "only", None, [("p", "q")]),
    (
        "system properties dropped",
        "UNIQ_KEY\x01ABC\x02WAIT\x01true\x02CLUSTER\x01c\x02p\x01v\x02MAX_OFFSET\x019\x02",
        False,
        None,
        None,
        [("p", "v")],
    ),  # fmt: skip
    (
        "unicode",
        "名前\x01värde ✓\x02émoji\x01🎉\x02KEYS\x01ключ\x02",
        False,
        "ключ",
        None,
        [("名前", "värde ✓"), ("émoji", "🎉")],
    ),  # fmt: skip
    (
        "empty names and values ignored",
        "a\x01\x02\x01v\x02b\x01x\x02c\x02\x02KEYS\x01\x02TAGS\x02",
        False,
        None,
        None,
        [("b", "x")],
    ),  # fmt: skip
    (
        "separator and newline in values",
        "a\x01x\x01y\x02b\x01line1\nline2\x02TAGS\x01\x01t\x02",
        False,
        None,
        "\x01t",
        [("a", "x\x01y"), ("b", "line1\nline2")],
    ),  # fmt: skip
    ("no trailing separator", "a\x011\x02b\x012", False, None, None, [("a", "1"), ("b", "2")]),
    ("system name twice", "WAIT\x01true\x02x\x01y\x02WAIT\x01true\x02", False, None, None, [("x", "y")]),
    ("compressed body", "KEYS\x01k\x02a\x011\x02", True, "k", None, [("a", "1")]),
]
REPEATED = (
    "repeated names: first position, last value",
    "a\x011\x02b\x012\x02a\x013\x02KEYS\x01k1\x02KEYS\x01k2\x02",
    False, "k2", None, [("a", "3"), ("b", "2")],
)  # fmt: skip


def _body(index: int) -> bytes:
    return b"body %d \x00\xff" % index * (index + 1)


def _expected(cases: list[Any]) -> pa.RecordBatch:
    n = len(cases)
    return pa.RecordBatch.from_pydict(
        {
            "topic": [MQ.topic] * n,
            "partition": [MQ.key] * n,
            "queue_id": [MQ.queue_id] * n,
            "queue_offset": list(range(100, 100 + n)),
            "keys": [c[3] for c in cases],
            "tags": [c[4] for c in cases],
            "properties": [c[5] for c in cases],
            "born_timestamp": [BORN_MS * 1000] * n,
            "store_timestamp": [STORE_MS * 1000] * n,
            "body": [_body(i) for i in range(n)],
        },
        schema=SCHEMA,
    )


def _check(cases: list[Any]) -> None:
    data = b"".join(stored(100 + i, _body(i), c[1], compressed=c[2]) for i, c in enumerate(cases))
    batch = to_record_batch(decode_columns(data, MQ.broker_name), MQ)
    expected = _expected(cases)
    assert batch.schema == expected.schema
    assert batch.to_pylist() == expected.to_pylist()
    assert batch.equals(expected)
    # the Message path of the same parser agrees
    messages = decode_messages(data, MQ.broker_name)
    assert [(m.keys, m.tags, list(m.properties.items()), m.body) for m in messages] == [
        (c[3], c[4], c[5], _body(i)) for i, c in enumerate(cases)
    ]


@pytest.mark.parametrize("case", [*CASES, REPEATED], ids=lambda c: c[0])
def test_each_case_alone(case: Any) -> None:
    _check([case])


@pytest.mark.parametrize("repeated", [False, True], ids=["column-wise", "with a repeated name"])
def test_all_cases_in_one_batch(repeated: bool) -> None:
    _check([*CASES, REPEATED] if repeated else CASES + CASES[::-1])


def test_empty_columns_make_an_empty_batch() -> None:
    batch = to_record_batch(MessageColumns(MQ.broker_name), MQ)
    assert batch.num_rows == 0 and batch.schema == SCHEMA


def _reference(text: str) -> tuple[str | None, str | None, list[tuple[str, str]]]:
    props: dict[str, str] = {}
    for item in text.split("\x02"):
        name, sep, value = item.partition("\x01")
        if sep and name and value:
            props[name] = value
    user = [(k, v) for k, v in props.items() if k not in SYSTEM_PROPERTIES]
    return props.get("KEYS"), props.get("TAGS"), user


tokens = st.sampled_from(["\x01", "\x02", "\x02", "a", "b", "é", "\n", "KEYS", "TAGS", "UNIQ_KEY", "x y"])
texts = st.lists(tokens, max_size=14).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(texts, min_size=1, max_size=8))
def test_properties_parse_like_the_per_message_parser(batch: list[str]) -> None:
    keys, tags, properties = parse_properties(batch)
    got = list(zip(keys.to_pylist(), tags.to_pylist(), properties.to_pylist(), strict=True))
    assert got == [_reference(text) for text in batch]


def test_within_keeps_exactly_the_range() -> None:
    cols = MessageColumns("b", queue_offset=[4, 5, 6, 7], body=[b"4", b"5", b"6", b"7"])
    for name in ("topic", "queue_id", "born_timestamp_ms", "store_timestamp_ms", "store_host"):
        getattr(cols, name).extend([0] * 4)
    cols.properties.extend([""] * 4)
    cols.commit_log_offset.extend([0] * 4)
    assert cols.within(4, 8) is cols
    inner = cols.within(5, 7)
    assert (inner.queue_offset, inner.body, len(inner.topic)) == ([5, 6], [b"5", b"6"], 2)


def test_pull_range_columns_reads_exactly_the_range(stack_config: StackConfig, topic_name: str) -> None:
    outgoing = [
        OutgoingMessage(f"m{i} ü".encode(), keys=f"k{i}" if i % 3 else None, tags="t" if i % 2 else None,
                        properties={"i": str(i), "multi": "a\x03b\nc"} if i % 4 else {})
        for i in range(40)
    ]  # fmt: skip
    with SyncRocketMQClient(stack_config.namesrv_address) as client:
        mq = MessageQueue(topic_name, BROKER_NAME, 1)
        client.send_batch(mq, outgoing)
        for _ in range(200):  # the consume queue is dispatched after the send is acknowledged
            if client.max_offset(mq) >= len(outgoing):
                break
            time.sleep(0.05)
        columns = client.pull_range_columns(mq, 3, 29, max_per_request=5, concurrency=2)
        assert len(client.pull_range_columns(mq, 7, 7)) == 0
        messages = client.pull_range(mq, 3, 29, max_per_request=7)
    assert columns.queue_offset == list(range(3, 29))
    rows = to_record_batch(columns, mq).to_pylist()
    assert [(r["body"], r["keys"], r["tags"], r["properties"]) for r in rows] == [
        (o.body, o.keys, o.tags, list(o.properties.items())) for o in outgoing[3:29]
    ]
    assert all((r["topic"], r["partition"], r["queue_id"]) == (topic_name, mq.key, 1) for r in rows)
    assert [(m.body, m.keys, m.tags, m.properties) for m in messages] == [
        (o.body, o.keys, o.tags, dict(o.properties)) for o in outgoing[3:29]
    ]
