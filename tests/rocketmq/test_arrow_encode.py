"""arrow_encode builds, column-wise, exactly the batch entries the per-message codec builds."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.connectors.rocketmq.arrow_encode import encode_rows
from sluice.connectors.rocketmq.codec import EncodedBatch, UniqueIdGenerator, encode_batch_entries
from sluice.connectors.rocketmq.errors import MessageTooLargeError
from sluice.connectors.rocketmq.values import OutgoingMessage
from tests.rocketmq.test_codec_fuzz import FUZZ, outgoing  # the codec's own message strategy

SCHEMA = pa.schema(
    [
        ("body", pa.binary()),
        ("keys", pa.string()),
        ("tags", pa.string()),
        ("properties", pa.map_(pa.string(), pa.string())),
    ]
)


def as_batch(msgs: list[OutgoingMessage], null_maps: bool = False) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "body": [m.body for m in msgs],
            "keys": [m.keys for m in msgs],
            "tags": [m.tags for m in msgs],
            "properties": [
                None if null_maps and not m.properties else list(m.properties.items()) for m in msgs
            ],
        },
        schema=SCHEMA,
    )


def entries(batch: EncodedBatch) -> list[bytes]:
    return [bytes(batch.slice(i, i + 1).data) for i in range(len(batch))]


@FUZZ
@given(st.lists(outgoing, min_size=1, max_size=8), st.booleans(), st.integers(0, 3))
def test_entries_equal_the_per_message_codec(msgs: list[OutgoingMessage], null_maps: bool, skip: int) -> None:
    ids = UniqueIdGenerator().take(len(msgs))
    batch = as_batch(msgs, null_maps)
    assert entries(encode_rows(batch, ids, "w")) == encode_batch_entries(msgs, ids, "T")
    # A sliced batch (what a reader of a larger Arrow stream may hand over) encodes its own rows only.
    skip = min(skip, len(msgs) - 1)
    sliced = encode_rows(batch.slice(skip), ids[skip:], "w")
    assert entries(sliced) == encode_batch_entries(msgs[skip:], ids[skip:], "T")
    assert list(sliced.ids) == ids[skip:]


def test_optional_columns_and_string_bodies() -> None:
    ids = ["A" * 32, "B" * 32]
    batch = pa.RecordBatch.from_pydict({"body": pa.array(["é", "x"], pa.string())})
    expected = encode_batch_entries([OutgoingMessage("é".encode()), OutgoingMessage(b"x")], ids, "T")
    assert entries(encode_rows(batch, ids, "w")) == expected


BAD_ROWS = [
    (
        "reserved name",
        {"properties": [[("KEYS", "k")]]},
        ValueError,
        "property 'KEYS' is reserved .*keys/tags",
    ),
    (
        "separator in name",
        {"properties": [[("a\x01", "v")]]},
        ValueError,
        r"'a\\x01' contains a reserved sep",
    ),
    ("empty value", {"properties": [[("a", "")]]}, ValueError, "property 'a' has an empty name or value"),
    ("null value", {"properties": [[("a", None)]]}, ValueError, "property 'a' has a null value"),
    ("separator in tag", {"tags": ["t\x02"]}, ValueError, "property 'TAGS' contains a reserved separator"),
    ("empty key", {"keys": [""]}, ValueError, "property 'KEYS' has an empty"),
    ("null body", {"body": [None]}, ValueError, "row 8 has a null 'body'"),
    ("long properties", {"properties": [[("a", "v" * 40000)]]}, MessageTooLargeError, "row 8 has 4"),
]


@pytest.mark.parametrize(("case", "bad", "error", "match"), BAD_ROWS, ids=[c[0] for c in BAD_ROWS])
def test_errors_name_the_row_and_property(
    case: str, bad: dict[str, list[object]], error: type, match: str
) -> None:
    columns: dict[str, list[object]] = {
        "body": [b"ok", b"x"],
        "keys": [None, None],
        "tags": [None, None],
        "properties": [[], []],
    }
    for name, values in bad.items():
        columns[name][1] = values[0]
    batch = pa.RecordBatch.from_pydict(columns, schema=SCHEMA)
    with pytest.raises(error, match=match) as info:
        encode_rows(batch, ["A" * 32, "B" * 32], "rocketmq sink (topic 'T')", first_row=7)
    assert str(info.value).startswith("rocketmq sink (topic 'T'): row 8")


def test_encoded_batches_slice_and_concatenate_without_losing_entries() -> None:
    whole = EncodedBatch.of_entries([b"a", b"bb", b"ccc", b"dddd"], ["1", "2", "3", "4"])
    parts = [whole.slice(0, 1), whole.slice(1, 3), whole.slice(3, 4)]
    assert [bytes(p.data) for p in parts] == [b"a", b"bbccc", b"dddd"]
    joined = EncodedBatch.concat(parts)
    assert (bytes(joined.data), list(joined.offsets), list(joined.ids)) == (
        b"abbcccdddd",
        [0, 1, 3, 6, 10],
        ["1", "2", "3", "4"],
    )
    assert whole.slice(1, 3).entry_sizes() == [2, 3]
