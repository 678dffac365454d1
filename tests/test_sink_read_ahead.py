"""activities.sink_read_ahead: the records after a batch, made ahead, taken exactly per planned range."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from sluice.activities.sink_read_ahead import RecordsAhead
from sluice.connectors.model import PartitionRange

CHUNK = 4


def messages(topic: str, partition: str, start: int, end: int) -> pa.RecordBatch:
    offsets = list(range(start, end))
    return pa.RecordBatch.from_pydict(
        {
            "topic": [topic] * len(offsets),
            "partition": [partition] * len(offsets),
            "queue_offset": pa.array(offsets, pa.int64()),
            "barrier": [o % 5 == 3 for o in offsets],
        }
    )


class OffsetRecords:
    """A records plan that keeps a message's coordinates (and drops 'barrier copies' when asked)."""

    def records(self, batches: Iterable[pa.RecordBatch], *, barriers_once: bool) -> pa.Table | None:
        made = []
        for batch in batches:
            if barriers_once:
                batch = batch.filter(pc.invert(batch.column("barrier")))
            if batch.num_rows:
                made.append(
                    pa.RecordBatch.from_arrays(
                        [batch.column("topic"), batch.column("partition"), batch.column("queue_offset")],
                        names=["topic", "partition", "offset"],
                    )
                )
        return pa.Table.from_batches(made) if made else None


def broker(held: dict[tuple[str, str], int], fail_at: dict[tuple[str, str], int] | None = None) -> Any:
    """Reads what each queue holds (``held``: its end offset) in chunks of CHUNK messages."""

    def read(wanted: PartitionRange) -> Iterator[pa.RecordBatch]:
        key = (wanted.topic, wanted.partition)
        end = min(wanted.end.offset, held.get(key, 0))
        for lo in range(wanted.start.offset, end, CHUNK):
            if fail_at and fail_at.get(key) == lo:
                raise ConnectionError("broker went away")
            yield messages(*key, lo, min(lo + CHUNK, end))

    return read


def ahead_of(queues: list[PartitionRange], read: Any, *, barriers_once: bool = False) -> RecordsAhead:
    ahead = RecordsAhead("shape", queues, read, OffsetRecords(), barriers_once=barriers_once)  # type: ignore[arg-type]
    ahead._thread.join(30)  # read all there is, as while a batch's write takes long enough
    ahead.stop()
    return ahead


def offsets_of(batches: list[pa.RecordBatch]) -> list[int]:
    return [o for b in batches for o in b.column("offset").to_pylist()]


def want(partition: str, start: int, end: int, topic: str = "t") -> PartitionRange:
    return PartitionRange.offsets(partition, start, end, topic)


@pytest.mark.parametrize(
    ("held", "planned", "taken", "covered"),
    [
        (20, (10, 20), list(range(10, 20)), 20),  # all of it, ahead
        (20, (10, 15), list(range(10, 15)), 15),  # ends inside a chunk: sliced
        (20, (10, 30), list(range(10, 20)), 20),  # more arrived since: the rest read by the batch
        (20, (12, 18), [], 12),  # starts elsewhere: nothing taken
        (10, (10, 14), [], 10),  # nothing was there ahead
        (20, (10, 10 + CHUNK), list(range(10, 10 + CHUNK)), 10 + CHUNK),  # exactly one chunk
    ],
)
def test_taken_records_start_at_the_planned_start_and_stop_at_its_end(
    held: int, planned: tuple[int, int], taken: list[int], covered: int
) -> None:
    ahead = ahead_of([want("b:0", 10, 10 + 25)], broker({("t", "b:0"): held}))
    got, upto = ahead.take(want("b:0", *planned))
    assert offsets_of(got) == taken
    assert upto == covered


def test_each_queue_is_taken_on_its_own_and_dropped_copies_still_count_as_covered() -> None:
    read = broker({("t", "b:0"): 30, ("t", "b:1"): 7, ("u", "b:0"): 5})
    ahead = ahead_of(
        [want("b:0", 20, 40), want("b:1", 0, 20), want("b:0", 5, 25, topic="u")], read, barriers_once=True
    )
    got, upto = ahead.take(want("b:0", 20, 30))
    assert (offsets_of(got), upto) == ([o for o in range(20, 30) if o % 5 != 3], 30)
    got, upto = ahead.take(want("b:1", 0, 9))
    assert (offsets_of(got), upto) == ([0, 1, 2, 4, 5, 6], 7)
    assert ahead.take(want("b:0", 5, 9, topic="u")) == ([], 5)  # the queue held nothing past 5
    assert ahead.take(want("b:2", 0, 9)) == ([], 0)  # a queue not read ahead


def test_a_failed_read_keeps_the_chunks_before_it() -> None:
    read = broker({("t", "b:0"): 30}, fail_at={("t", "b:0"): 8})
    ahead = ahead_of([want("b:0", 0, 30)], read)
    got, upto = ahead.take(want("b:0", 0, 30))
    assert (offsets_of(got), upto) == (list(range(8)), 8)


def test_messages_out_of_order_end_what_is_taken() -> None:
    def read(wanted: PartitionRange) -> Iterator[pa.RecordBatch]:
        yield messages("t", "b:0", 0, 4)
        yield messages("t", "b:0", 8, 12)  # not the next messages
        yield messages("t", "b:0", 4, 8)

    ahead = ahead_of([want("b:0", 0, 12)], read)
    got, upto = ahead.take(want("b:0", 0, 12))
    assert (offsets_of(got), upto) == ([0, 1, 2, 3], 4)


def test_stopping_ends_the_read_after_the_chunk_being_made() -> None:
    made: list[int] = []
    second = threading.Event()
    go_on = threading.Event()

    def read(wanted: PartitionRange) -> Iterator[pa.RecordBatch]:
        for lo in range(0, 40, CHUNK):
            made.append(lo)
            if lo == CHUNK:
                second.set()
                go_on.wait(10)
            yield messages("t", "b:0", lo, lo + CHUNK)

    ahead = RecordsAhead("shape", [want("b:0", 0, 40)], read, OffsetRecords(), barriers_once=False)  # type: ignore[arg-type]
    assert second.wait(10)
    threading.Timer(0.2, go_on.set).start()
    ahead.stop()
    got, upto = ahead.take(want("b:0", 0, 40))
    assert (offsets_of(got), upto) == (
        list(range(CHUNK)),
        CHUNK,
    )  # the chunk being made when stopped is not kept
    assert made == [0, CHUNK]


def test_a_read_still_busy_after_the_wait_is_left_and_nothing_of_it_taken() -> None:
    release = threading.Event()

    def read(wanted: PartitionRange) -> Iterator[pa.RecordBatch]:
        yield messages("t", "b:0", 0, 4)
        release.wait(10)  # a pull waiting on a broker that went away
        yield messages("t", "b:0", 4, 8)

    ahead = RecordsAhead("shape", [want("b:0", 0, 8)], read, OffsetRecords(), barriers_once=False)  # type: ignore[arg-type]
    ahead.stop(0.2)
    assert ahead.take(want("b:0", 0, 8)) == ([], 0)
    release.set()
