"""How the Spark writer cuts rows into batch requests: per target queue, in row order, within the
message and byte limits (a recording client stands in for the broker; the real one is exercised by
test_spark_source)."""

from __future__ import annotations

import zlib

import pyarrow as pa
import pytest

from sluice.connectors.rocketmq.codec import EncodedBatch, stored_size
from sluice.connectors.rocketmq.spark_writer import _grouped_by_slot, _Sender, _slots
from sluice.connectors.rocketmq.values import MessageQueue, SendResult

QUEUES = [MessageQueue("T", "broker-a", i) for i in range(3)]


class RecordingClient:
    def __init__(self) -> None:
        self.requests: list[tuple[int, list[str]]] = []
        self.next_offset = [0, 0, 0]

    def send_encoded(self, mq: MessageQueue, batch: EncodedBatch) -> SendResult:
        first = self.next_offset[mq.queue_id]
        self.next_offset[mq.queue_id] += len(batch)
        self.requests.append(
            (mq.queue_id, [bytes(batch.slice(i, i + 1).data).decode() for i in range(len(batch))])
        )
        return SendResult(mq, first, len(batch), tuple(batch.ids))


def rows(*names: str) -> EncodedBatch:
    return EncodedBatch.of_entries([n.encode() for n in names], list(names))


ENTRY = stored_size(1, "T")  # stored size of a one-byte entry

CASES = [
    # (what, rows, slots, max_messages, max_bytes, expected requests)
    ("one queue, split by count", "abcde", [1] * 5, 2, 10**6, [(1, ["a", "b"]), (1, ["c", "d"]), (1, ["e"])]),
    ("split by bytes", "abcde", [0] * 5, 100, 2 * ENTRY, [(0, ["a", "b"]), (0, ["c", "d"]), (0, ["e"])]),
    ("keyed runs keep order per queue", "abcd", [2, 0, 2, 0], 10, 10**6, [(0, ["b", "d"]), (2, ["a", "c"])]),
    ("round robin without keys", "abcde", [-1] * 5, 2, 10**6, [(1, ["a", "b"]), (2, ["c", "d"]), (0, ["e"])]),
]


@pytest.mark.parametrize(
    ("what", "names", "slots", "max_messages", "max_bytes", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_requests(
    what: str,
    names: str,
    slots: list[int],
    max_messages: int,
    max_bytes: int,
    expected: list[tuple[int, list[str]]],
) -> None:
    client = RecordingClient()
    sender = _Sender(client, QUEUES, max_messages, max_bytes, start=1)  # type: ignore[arg-type]
    sender.add(rows(*names), slots)
    written = sender.finish()
    assert client.requests == expected
    assert sum(w.count for w in written) == len(names)


def _entries(batch: EncodedBatch) -> list[str]:
    return [bytes(batch.slice(i, i + 1).data).decode() for i in range(len(batch))]


GROUP_CASES = [
    # (what, rows, slots, expected rows, expected slots)
    ("alternating keys: each slot's rows one run, in their order", "abcdef", [1, 0, 1, -1, 0, 1],
     "dbeacf", [-1, 0, 0, 1, 1, 1]),
    ("already grouped: as it is", "abcd", [2, 2, 0, 0], "abcd", [2, 2, 0, 0]),
    ("one slot", "abc", [-1, -1, -1], "abc", [-1, -1, -1]),
    ("nothing", "", [], "", []),
]  # fmt: skip


@pytest.mark.parametrize(
    ("what", "names", "slots", "expected", "expected_slots"), GROUP_CASES, ids=[c[0] for c in GROUP_CASES]
)
def test_grouped_by_slot(
    what: str, names: str, slots: list[int], expected: str, expected_slots: list[int]
) -> None:
    batch = EncodedBatch.of_entries([(n * (i + 1)).encode() for i, n in enumerate(names)], list(names))
    sizes = [stored_size(i + 1, "T") for i in range(len(names))]
    grouped, grouped_slots, grouped_sizes = _grouped_by_slot(batch, slots, sizes)
    assert [e[0] for e in _entries(grouped)] == list(expected)
    assert list(grouped.ids) == list(expected) and grouped_slots == expected_slots
    assert _entries(grouped) == [n * (names.index(n) + 1) for n in expected]
    assert grouped_sizes == [stored_size(len(e), "T") for e in _entries(grouped)]


def test_rows_of_several_arrow_batches_share_a_request() -> None:
    client = RecordingClient()
    sender = _Sender(client, QUEUES, 3, 10**6, start=0)  # type: ignore[arg-type]
    sender.add(rows("a", "b"), [1, 1])
    sender.add(rows("c", "d"), [1, 1])
    sender.finish()
    assert client.requests == [(1, ["a", "b", "c"]), (1, ["d"])]


SLOT_CASES = [
    # (what, column, values, queue count, expected slots or the error's text)
    ("no key: round robin", None, ["x", "y"], 4, [-1, -1]),
    ("a key: crc32 % queues, like Kafka's partitioner", "sharding_key", ["k1", "k2", "k1"], 4,
     [zlib.crc32(b"k1") % 4, zlib.crc32(b"k2") % 4, zlib.crc32(b"k1") % 4]),
    ("an explicit queue", "queue", [3, 0, None], 4, [3, 0, -1]),
    ("a queue the topic lacks", "queue", [4], 4, "queue index 4 is not one of the topic's 4 queues"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("what", "column", "values", "count", "expected"), SLOT_CASES, ids=[c[0] for c in SLOT_CASES]
)
def test_slots(what: str, column: str | None, values: list[object], count: int, expected: object) -> None:
    batch = pa.RecordBatch.from_pydict({"body": ["b"] * len(values), **({column: values} if column else {})})
    if isinstance(expected, str):
        with pytest.raises(ValueError, match=expected):
            _slots(batch, column, count)
    else:
        assert _slots(batch, column, count) == expected


def test_take_of_a_slice() -> None:
    """A slice's entries start past its buffer's first byte; ``take`` gathers them all the same."""
    taken = rows(*"abcdef").slice(2, 5).take([2, 0, 1])
    assert _entries(taken) == ["e", "c", "d"] and list(taken.ids) == ["e", "c", "d"]
