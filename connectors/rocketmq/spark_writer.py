"""Batch writer of the ``rocketmq`` Spark data source: DataFrame rows to messages of one topic.

Options:
- ``namesrv``, ``topic`` (required). The topic must exist: the writer creates nothing (topic
  auto-creation is off in production brokers, and a typo must not create a topic).
- ``maxBatchMessages`` (default 4096) and ``maxBatchBytes`` (default 4 MiB, the broker's default
  maxMessageSize): a send_batch request is flushed when either is reached (the client splits a
  request further if its stored size would exceed the limit).
- ``maxInFlight`` (default 2): batch requests in flight per Spark task (never two for one queue).
- ``maxMessageBytes`` (default 4 MiB, the broker's default maxMessageSize): every message's stored
  size is checked before anything of its batch is sent, and one over the limit fails the write with
  MessageTooLargeError naming its source position (converters flag such records earlier, so with
  ``errors.tolerance=all`` they never get here).
- ``resultPath`` (optional): a driver-local file where ``commit`` writes the JSON summary of what
  was written (see ``WriteSummary``). Why a file: ``commit`` runs in a Python worker the driver JVM
  starts, not in the caller's interpreter, so an in-memory result would not reach the caller.
- ``accessKey``/``secretKey``, ``requestTimeoutSeconds``: passed to the client.
- ``boundProperties`` (``true``/``false``, default false): every message also carries the
  properties bound to the job that runs the write (``bound_properties``: a source's batch
  reference), so one planned write serves every batch; a job with none bound fails.

Columns: ``body`` (binary or string, required, non-null), optional ``keys``, ``tags`` (string),
``properties`` (map<string,string>), and one of ``sharding_key`` or ``message_group`` (string), or
``queue`` (int). With a sharding key / message group, each row goes to queue
``crc32(key) % queue_count`` of the topic's queues in natural order, so rows with the same key keep
their order in one queue; with ``queue``, to that index of them (the caller shards). Without any,
each Spark task sends its batches round-robin over the queues, starting at its partition id.

Delivery is at-least-once: a retried Spark task (or a send retried after a timeout) can store a
batch twice. Exactly-once sinks downstream deduplicate by the plan's ranges, not by this writer.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, IntegerType, MapType, StringType, StructType

from sluice.connectors.job_properties import bound_to_jobs, job_value
from sluice.connectors.planning import natural_key
from sluice.connectors.rocketmq.arrow_encode import encode_rows, key_slots, row_position, stamp_text
from sluice.connectors.rocketmq.codec import EncodedBatch, stored_size
from sluice.connectors.rocketmq.errors import MessageTooLargeError, TopicNotFoundError
from sluice.connectors.rocketmq.limits import MAX_MESSAGE_BYTES
from sluice.connectors.rocketmq.spark_options import (
    client_options,
    executor_client,
    get_option,
    int_option,
    require_option,
)
from sluice.connectors.rocketmq.values import MessageQueue, SendResult

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient

log = logging.getLogger(__name__)

DEFAULT_MAX_BATCH_MESSAGES = 4096
DEFAULT_MAX_BATCH_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_IN_FLIGHT = 2
KEY_COLUMNS = ("sharding_key", "message_group")
QUEUE_COLUMN = "queue"


@dataclass(frozen=True)
class WrittenRange:
    """Contiguous offsets ``[first_offset, first_offset + count)`` written to one queue."""

    partition: str
    first_offset: int
    count: int


@dataclass(frozen=True)
class RocketMQCommitMessage(WriterCommitMessage):
    """What one Spark task wrote (picklable; sent to the driver's ``commit``)."""

    task_partition: int
    written: tuple[WrittenRange, ...]

    @property
    def count(self) -> int:
        return sum(w.count for w in self.written)


@dataclass(frozen=True)
class WriteSummary:
    """All ranges of one write job, as written to ``resultPath`` (JSON with a version field)."""

    topic: str
    written: tuple[WrittenRange, ...] = field(default_factory=tuple)
    version: int = 1

    @property
    def count(self) -> int:
        return sum(w.count for w in self.written)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> WriteSummary:
        doc = json.loads(text)
        if doc.get("version") != 1:
            raise ValueError(f"rocketmq sink: unsupported write summary version {doc.get('version')!r}")
        written = tuple(WrittenRange(**w) for w in doc["written"])
        return WriteSummary(topic=doc["topic"], written=written)


#: The rows ``RocketMQWriter.write_batches`` yields: one per run of offsets a task stored.
WRITTEN_SCHEMA = "partition string, first_offset long, count long"


#: The Spark local property holding the properties a ``boundProperties`` write stamps (JSON).
BOUND_PROPERTIES_PROPERTY: Final = "sluice.rocketmq.write.properties"


@contextmanager
def bound_properties(spark: SparkSession, properties: Mapping[str, str]) -> Iterator[None]:
    """Jobs this thread starts in the block stamp ``properties`` on every message a
    ``boundProperties`` write sends."""
    with bound_to_jobs(spark, BOUND_PROPERTIES_PROPERTY, json.dumps(dict(properties))):
        yield


def read_write_summary(path: str | Path) -> WriteSummary:
    """The summary ``commit`` wrote to the ``resultPath`` option."""
    return WriteSummary.from_json(Path(path).read_text())


class RocketMQWriter(DataSourceArrowWriter):
    """Sends Arrow batches as RocketMQ batch requests; see the module docstring."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.namesrv = require_option(options, "namesrv")
        self.topic = require_option(options, "topic")
        self.max_messages = int_option(options, "maxBatchMessages", DEFAULT_MAX_BATCH_MESSAGES)
        self.max_bytes = int_option(options, "maxBatchBytes", DEFAULT_MAX_BATCH_BYTES)
        self.max_in_flight = int_option(options, "maxInFlight", DEFAULT_MAX_IN_FLIGHT)
        self.max_message_bytes = int_option(options, "maxMessageBytes", MAX_MESSAGE_BYTES)
        self.result_path = get_option(options, "resultPath") or None
        self.client_options = client_options(options)
        self.key_column = _check_schema(schema, self.topic)
        self.bound_properties = (get_option(options, "boundProperties") or "").lower() == "true"
        #: properties stamped on every message when the writer runs outside a Spark job (a batch
        #: sent in the worker's process), as JSON; a job's are bound to it (``boundProperties``)
        self.stamped_properties = dict(json.loads(get_option(options, "stampedProperties") or "{}"))
        # Fail on the driver, before any task starts, if the topic does not exist.
        client = executor_client(self.namesrv, self.client_options)
        if not client.topic_exists(self.topic):
            raise TopicNotFoundError(self.topic, "the rocketmq sink creates no topics; create it first")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> RocketMQCommitMessage:
        ctx = TaskContext.get()
        task_partition = ctx.partitionId() if ctx is not None else 0
        client = executor_client(self.namesrv, self.client_options)
        queues = sorted(client.queues(self.topic), key=lambda q: natural_key(q.key))
        if not queues:
            raise TopicNotFoundError(self.topic, "it has no writable queues")
        sender = _Sender(
            client, queues, self.max_messages, self.max_bytes, task_partition, self.max_in_flight
        )
        row = 0
        where = f"rocketmq sink (topic {self.topic!r})"
        stamped = stamp_text(self._stamped(), where)
        try:
            for batch in iterator:
                ids = client.message_ids(batch.num_rows)
                encoded = encode_rows(batch, ids, where, row, stamped)
                sizes = [stored_size(size, self.topic) for size in encoded.entry_sizes()]
                if sizes and max(sizes) > self.max_message_bytes:
                    i = next(i for i, size in enumerate(sizes) if size > self.max_message_bytes)
                    raise MessageTooLargeError(
                        f"{where}: {row_position(batch, i, row)} takes {sizes[i]} bytes stored, over "
                        f"the broker's limit of {self.max_message_bytes} (maxMessageSize)"
                    )
                sender.add(encoded, _slots(batch, self.key_column, len(queues)), sizes)
                row += batch.num_rows
        finally:
            written = sender.finish()
        return RocketMQCommitMessage(task_partition, tuple(written))

    def _stamped(self) -> dict[str, str]:
        """The properties bound to this job (``boundProperties``), never none in silence, or those
        given (``stampedProperties``)."""
        if not self.bound_properties:
            return self.stamped_properties
        bound = job_value(BOUND_PROPERTIES_PROPERTY)
        if bound is None:
            raise RuntimeError(
                f"rocketmq sink (topic {self.topic!r}): this job has no properties bound (bound_properties)"
            )
        return dict(json.loads(bound))

    def write_batches(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """``write`` where Sluice's own tasks send (a source share's messages,
        activities.source_runner) rather than a data source's write: the ranges stored, as one
        batch of ``WRITTEN_SCHEMA`` rows."""
        import pyarrow as pa

        written = self.write(iter(batches)).written
        yield pa.RecordBatch.from_pydict(
            {
                "partition": [w.partition for w in written],
                "first_offset": [w.first_offset for w in written],
                "count": [w.count for w in written],
            },
            schema=pa.schema(
                [("partition", pa.string()), ("first_offset", pa.int64()), ("count", pa.int64())]
            ),
        )

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        written = tuple(
            w for m in messages if isinstance(m, RocketMQCommitMessage) for w in sorted(m.written, key=_order)
        )
        summary = WriteSummary(self.topic, written)
        if self.result_path:
            Path(self.result_path).write_text(summary.to_json())
        log.info("rocketmq sink: wrote %d messages to topic %r", summary.count, self.topic)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        sent = sum(m.count for m in messages if isinstance(m, RocketMQCommitMessage))
        log.warning(
            "rocketmq sink: write to topic %r aborted after %d messages were stored by finished tasks "
            "(RocketMQ cannot take them back; the retry may duplicate them)",
            self.topic,
            sent,
        )


def _order(w: WrittenRange) -> tuple[object, ...]:
    return (natural_key(w.partition), w.first_offset)


def _check_schema(schema: StructType, topic: str) -> str | None:
    fields = {f.name: f.dataType for f in schema.fields}
    where = f"rocketmq sink (topic {topic!r})"
    if "body" not in fields:
        raise ValueError(f"{where}: the DataFrame needs a 'body' column (binary or string)")
    if not isinstance(fields["body"], BinaryType | StringType):
        raise ValueError(
            f"{where}: column 'body' must be binary or string, got {fields['body'].simpleString()}"
        )
    for name in ("keys", "tags", *KEY_COLUMNS):
        if name in fields and not isinstance(fields[name], StringType):
            raise ValueError(f"{where}: column {name!r} must be a string, got {fields[name].simpleString()}")
    if "properties" in fields:
        dt = fields["properties"]
        if not (
            isinstance(dt, MapType)
            and isinstance(dt.keyType, StringType)
            and isinstance(dt.valueType, StringType)
        ):
            raise ValueError(
                f"{where}: column 'properties' must be map<string,string>, got {dt.simpleString()}"
            )
    if QUEUE_COLUMN in fields and not isinstance(fields[QUEUE_COLUMN], IntegerType):
        raise ValueError(f"{where}: column 'queue' must be an int, got {fields[QUEUE_COLUMN].simpleString()}")
    keyed = [c for c in (*KEY_COLUMNS, QUEUE_COLUMN) if c in fields]
    if len(keyed) > 1:
        raise ValueError(f"{where}: give one of 'sharding_key', 'message_group' and 'queue', not several")
    return keyed[0] if keyed else None


def _slots(batch: pa.RecordBatch, key_column: str | None, queue_count: int) -> list[int]:
    """Each row's target: its ``queue``, or ``crc32(key) % queue_count`` for a keyed row, -1
    (round-robin) otherwise."""
    import numpy as np
    import pyarrow.compute as pc

    if key_column is None:
        return [-1] * batch.num_rows
    if key_column == QUEUE_COLUMN:
        column = pc.fill_null(batch.column(batch.schema.names.index(key_column)), -1)
        slots = column.to_numpy(zero_copy_only=False).astype(np.int64)
        bad = (slots >= queue_count) | (slots < -1)
        if bad.any():
            raise ValueError(
                f"rocketmq sink: queue index {slots[np.argmax(bad)]} is not one of the topic's "
                f"{queue_count} queues"
            )
        return slots.tolist()
    return key_slots(batch.column(batch.schema.names.index(key_column)), queue_count).tolist()


class _Sender:
    """Buffers messages per target queue and sends them as batch requests, a few in flight.

    Why in flight: a batch request waits for the broker's store; overlapping it with building the
    next batch keeps the task busy. Order per queue still holds: a queue's next batch is submitted
    only after its previous one finished, so keyed rows stay in order.
    """

    def __init__(
        self,
        client: SyncRocketMQClient,
        queues: Sequence[MessageQueue],
        max_messages: int,
        max_bytes: int,
        start: int,
        max_in_flight: int = 2,
    ) -> None:
        self.client = client
        self.queues = list(queues)
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.next_queue = start % len(self.queues)
        self.topic = queues[0].topic if queues else ""
        self.buffers: dict[int, list[EncodedBatch]] = {}
        self.counts: dict[int, int] = {}
        self.sizes: dict[int, int] = {}
        self.offsets: dict[str, list[int]] = {}
        self.max_in_flight = max_in_flight
        self.pool = ThreadPoolExecutor(max_workers=max_in_flight, thread_name_prefix="sluice-rocketmq-send")
        self.in_flight: deque[tuple[int, Future[SendResult]]] = deque()

    def add(self, batch: EncodedBatch, slots: list[int], sizes: list[int] | None = None) -> None:
        """Queue the batch's entries: each run of rows with one slot (-1: round-robin) is cut into
        request-sized pieces without copying. ``sizes``: the entries' stored sizes, if known."""
        if sizes is None:
            sizes = [stored_size(size, self.topic) for size in batch.entry_sizes()]
        batch, slots, sizes = _grouped_by_slot(batch, slots, sizes)
        start = 0
        for stop in range(1, len(slots) + 1):
            if stop < len(slots) and slots[stop] == slots[start]:
                continue
            slot = slots[start]
            while start < stop:
                count, size = self.counts.get(slot, 0), self.sizes.get(slot, 0)
                end = start
                while end < stop and count < self.max_messages and (size < self.max_bytes or end == start):
                    size += sizes[end]
                    count += 1
                    end += 1
                self.buffers.setdefault(slot, []).append(batch.slice(start, end))
                self.counts[slot], self.sizes[slot] = count, size
                if count >= self.max_messages or size >= self.max_bytes:
                    self.flush(slot)
                start = end

    def flush(self, slot: int) -> None:
        parts = self.buffers.pop(slot, [])
        self.counts.pop(slot, None)
        self.sizes.pop(slot, None)
        if not parts:
            return
        if slot == -1:
            index = self.next_queue
            self.next_queue = (self.next_queue + 1) % len(self.queues)
        else:
            index = slot
        for queued, fut in list(self.in_flight):
            if queued == index:  # keep per-queue order: wait for this queue's previous batch
                self._finish_until(fut)
        while len(self.in_flight) >= self.max_in_flight:
            self._finish_until(self.in_flight[0][1])
        request = EncodedBatch.concat(parts)
        self.in_flight.append(
            (index, self.pool.submit(self.client.send_encoded, self.queues[index], request))
        )

    def _finish_until(self, target: Future[SendResult]) -> None:
        while self.in_flight:
            _, fut = self.in_flight.popleft()
            self._record(fut.result())
            if fut is target:
                return

    def finish(self) -> list[WrittenRange]:
        """Flush every buffer, wait for all sends, and return the written offsets as runs."""
        try:
            for slot in sorted(self.buffers):
                self.flush(slot)
            while self.in_flight:
                self._finish_until(self.in_flight[0][1])
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)
        return [
            run
            for key in sorted(self.offsets, key=natural_key)
            for run in _runs(key, sorted(self.offsets[key]))
        ]

    def _record(self, result: SendResult) -> None:
        offsets = result.offsets or tuple(range(result.first_offset, result.first_offset + result.count))
        self.offsets.setdefault(result.queue.key, []).extend(offsets)


def _grouped_by_slot(
    batch: EncodedBatch, slots: list[int], sizes: list[int]
) -> tuple[EncodedBatch, list[int], list[int]]:
    """The entries reordered so each slot's are one run, in their own order (a stable sort by
    slot), unless they are already. Rows sharded by key alternate between queues nearly row by
    row, and ``_Sender.add`` would cut a piece per row: a third of a JDBC source task's send,
    profiled (#18). Order within a queue, the one order a keyed sink sees, is kept."""
    import numpy as np

    keys = np.asarray(slots, dtype=np.int64)
    runs = 1 + int(np.count_nonzero(keys[1:] != keys[:-1])) if len(keys) else 0
    if runs <= len(np.unique(keys)):
        return batch, slots, sizes
    order = np.argsort(keys, kind="stable")
    return batch.take(order.tolist()), keys[order].tolist(), [sizes[i] for i in order]


def _runs(partition: str, offsets: list[int]) -> Iterator[WrittenRange]:
    """Sorted offsets of one queue as contiguous ``WrittenRange`` runs."""
    if not offsets:
        return
    run_start = prev = offsets[0]
    for off in offsets[1:]:
        if off != prev + 1:
            yield WrittenRange(partition, run_start, prev - run_start + 1)
            run_start = off
        prev = off
    yield WrittenRange(partition, run_start, prev - run_start + 1)
