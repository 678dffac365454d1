"""A sink task's next messages pulled and made into records while its last batch is written.

Why: a sink batch run in Arrow (``SinkRunner._ran_in_arrow``) pulls and decodes its messages on
the driver, then waits while the target merges them (for PostgreSQL about half the batch). The next
batch's messages are already in the broker, after this batch's ranges: they are pulled and decoded
meanwhile, on a thread of their own.

Why this keeps every guarantee: nothing is planned, recorded or written ahead. A queue's message at
an offset never changes, and records are made by the same records plan (the envelope schemas met
are the same, or what was read ahead is dropped), so the next batch takes, for each of its planned
ranges, the records read ahead from exactly its start, sliced at its end, and reads the rest itself.
Anything unusual (a pull or decode that fails, a schema not met, a range that starts elsewhere)
just leaves the batch to read its ranges itself, which tells what it is.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors.model import PartitionRange

if TYPE_CHECKING:
    from sluice.connectors.arrow_records import RecordsPlan

log = logging.getLogger(__name__)

#: How long a batch waits for the read ahead to finish the chunk it is making (seconds).
STOP_WAIT_S = 5.0

#: Reads a queue's range (topic, partition, start, end) as the reader's message batches, in order.
ReadRange = Callable[[PartitionRange], Iterator[pa.RecordBatch]]


@dataclass(frozen=True)
class AheadChunk:
    """The records of one queue's messages at offsets ``[start, end)`` (None: none kept)."""

    start: int
    end: int
    records: pa.RecordBatch | None


class RecordsAhead:
    """Records of the messages after a batch's ranges, made on a thread while the batch is written."""

    def __init__(
        self,
        shape: object,
        queues: Sequence[PartitionRange],
        read: ReadRange,
        records_plan: RecordsPlan,
        *,
        barriers_once: bool,
    ) -> None:
        """``queues``: for each queue, the range to read ahead (from the last batch's end);
        ``shape``: what the records plan was made for (the envelope schemas met)."""
        self.shape = shape
        self._queues = list(queues)
        self._read = read
        self._plan = records_plan
        self._barriers_once = barriers_once
        self._chunks: dict[tuple[str, str], list[AheadChunk]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sluice-sink-read-ahead", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for queue in self._queues:
            made: list[AheadChunk] = []
            chunks = self._chunks
            chunks[(queue.topic, queue.partition)] = made
            offset = queue.start.offset
            try:
                for messages in self._read(queue):
                    if self._stop.is_set():
                        return
                    offsets = messages.column("queue_offset")
                    if pc.min(offsets).as_py() != offset:  # not the next messages: keep what is whole
                        break
                    end = int(pc.max(offsets).as_py()) + 1
                    table = self._plan.records([messages], barriers_once=self._barriers_once)
                    records = None if table is None else table.combine_chunks().to_batches()[0]
                    made.append(AheadChunk(offset, end, records))
                    offset = end
            except Exception:  # noqa: BLE001 - the batch reads the queue itself, and tells what failed
                log.debug(
                    "reading ahead %s/%s from %d stopped", queue.topic, queue.partition, offset, exc_info=True
                )

    def stop(self, timeout_s: float = STOP_WAIT_S) -> None:
        """Stop reading ahead (after the chunk being made) and wait for the thread. A thread still
        busy after ``timeout_s`` (a pull waiting on a broker that went away) is left to end on its
        own, and nothing it read is taken."""
        self._stop.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self._chunks = {}

    def take(self, planned: PartitionRange) -> tuple[list[pa.RecordBatch], int]:
        """The records read ahead for ``planned`` (from exactly its start, up to its end), and the
        offset from which the batch reads itself (``planned``'s start when nothing fits). Call
        ``stop`` first."""
        start, end = planned.start.offset, planned.end.offset
        chunks = self._chunks.get((planned.topic, planned.partition), [])
        if not chunks or chunks[0].start != start:
            return [], start
        taken: list[pa.RecordBatch] = []
        covered = start
        for chunk in chunks:
            if covered >= end:
                break
            records = chunk.records
            if chunk.end > end and records is not None:  # the batch ends inside this chunk
                records = records.filter(pc.less(records.column("offset"), end))
            if records is not None and records.num_rows:
                taken.append(records)
            covered = min(chunk.end, end)
        return taken, covered
