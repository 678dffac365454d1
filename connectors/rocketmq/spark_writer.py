"""Batch writer of the ``rocketmq`` Spark data source: DataFrame rows to messages of one topic.

Options:
- ``namesrv``, ``topic`` (required). The topic must exist: the writer creates nothing (topic
  auto-creation is off in production brokers, and a typo must not create a topic).
- ``maxBatchMessages`` (default 4096) and ``maxBatchBytes`` (default 4 MiB, the broker's default
  maxMessageSize): a send_batch request is flushed when either is reached (the client splits a
  request further if its stored size would exceed the limit).
- ``resultPath`` (optional): a driver-local file where ``commit`` writes the JSON summary of what
  was written (see ``WriteSummary``). Why a file: ``commit`` runs in a Python worker the driver JVM
  starts, not in the caller's interpreter, so an in-memory result would not reach the caller.
- ``accessKey``/``secretKey``, ``requestTimeoutSeconds``: passed to the client.

Columns: ``body`` (binary or string, required, non-null), optional ``keys``, ``tags`` (string),
``properties`` (map<string,string>), and optional ``sharding_key`` or ``message_group`` (string).
With a sharding key / message group, each row goes to queue ``crc32(key) % queue_count`` of the
topic's queues in natural order, so rows with the same key keep their order in one queue. Without
one, each Spark task sends its batches round-robin over the queues, starting at its partition id.

Delivery is at-least-once: a retried Spark task (or a send retried after a timeout) can store a
batch twice. Exactly-once sinks downstream deduplicate by the plan's ranges, not by this writer.
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, MapType, StringType, StructType

from connectors.planning import natural_key
from connectors.rocketmq.errors import TopicNotFoundError
from connectors.rocketmq.spark_source import (
    client_options,
    executor_client,
    get_option,
    int_option,
    require_option,
)
from connectors.rocketmq.values import MessageQueue, OutgoingMessage, SendResult

if TYPE_CHECKING:
    import pyarrow as pa

    from connectors.rocketmq.sync_client import SyncRocketMQClient

log = logging.getLogger(__name__)

DEFAULT_MAX_BATCH_MESSAGES = 4096
DEFAULT_MAX_BATCH_BYTES = 4 * 1024 * 1024
KEY_COLUMNS = ("sharding_key", "message_group")


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
        self.result_path = get_option(options, "resultPath") or None
        self.client_options = client_options(options)
        self.key_column = _check_schema(schema, self.topic)
        # Fail on the driver, before any task starts, if the topic does not exist.
        client = executor_client(self.namesrv, self.client_options)
        if not client.topic_exists(self.topic):
            raise TopicNotFoundError(self.topic, "the rocketmq sink creates no topics; create it first")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> RocketMQCommitMessage:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        task_partition = ctx.partitionId() if ctx is not None else 0
        client = executor_client(self.namesrv, self.client_options)
        queues = sorted(client.queues(self.topic), key=lambda q: natural_key(q.key))
        if not queues:
            raise TopicNotFoundError(self.topic, "it has no writable queues")
        sender = _Sender(client, queues, self.max_messages, self.max_bytes, task_partition)
        row = 0
        for batch in iterator:
            for message, key in _messages(batch, self.key_column, self.topic, row):
                sender.add(message, key)
            row += batch.num_rows
        sender.flush_all()
        return RocketMQCommitMessage(task_partition, tuple(sender.written))

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
    keyed = [c for c in KEY_COLUMNS if c in fields]
    if len(keyed) > 1:
        raise ValueError(f"{where}: give either 'sharding_key' or 'message_group', not both")
    return keyed[0] if keyed else None


def _messages(
    batch: pa.RecordBatch, key_column: str | None, topic: str, first_row: int
) -> Iterator[tuple[OutgoingMessage, str | None]]:
    names = batch.schema.names
    bodies = batch.column(names.index("body")).to_pylist()
    n = len(bodies)
    none: list[Any] = [None] * n
    keys = batch.column(names.index("keys")).to_pylist() if "keys" in names else none
    tags = batch.column(names.index("tags")).to_pylist() if "tags" in names else none
    props = batch.column(names.index("properties")).to_pylist() if "properties" in names else none
    shard = batch.column(names.index(key_column)).to_pylist() if key_column else none
    for i in range(n):
        body = bodies[i]
        if body is None:
            raise ValueError(f"rocketmq sink (topic {topic!r}): row {first_row + i} has a null 'body'")
        if isinstance(body, str):
            body = body.encode()
        properties = dict(props[i]) if props[i] else {}
        yield OutgoingMessage(body=body, keys=keys[i], tags=tags[i], properties=properties), shard[i]


class _Sender:
    """Buffers messages per target queue and flushes them as batch sends."""

    def __init__(
        self,
        client: SyncRocketMQClient,
        queues: Sequence[MessageQueue],
        max_messages: int,
        max_bytes: int,
        start: int,
    ) -> None:
        self.client = client
        self.queues = list(queues)
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.next_queue = start % len(self.queues)
        self.buffers: dict[int, list[OutgoingMessage]] = {}
        self.sizes: dict[int, int] = {}
        self.written: list[WrittenRange] = []

    def add(self, message: OutgoingMessage, key: str | None) -> None:
        # -1 is the shared round-robin buffer; a keyed row goes to its queue's own buffer.
        slot = -1 if key is None else zlib.crc32(key.encode()) % len(self.queues)
        buf = self.buffers.setdefault(slot, [])
        buf.append(message)
        size = (
            self.sizes.get(slot, 0)
            + len(message.body)
            + 64
            + sum(len(k) + len(v) for k, v in message.properties.items())
        )
        self.sizes[slot] = size
        if len(buf) >= self.max_messages or size >= self.max_bytes:
            self.flush(slot)

    def flush(self, slot: int) -> None:
        buf = self.buffers.pop(slot, [])
        self.sizes.pop(slot, None)
        if not buf:
            return
        if slot == -1:
            mq = self.queues[self.next_queue]
            self.next_queue = (self.next_queue + 1) % len(self.queues)
        else:
            mq = self.queues[slot]
        self._record(self.client.send_batch(mq, buf))

    def flush_all(self) -> None:
        for slot in sorted(self.buffers):
            self.flush(slot)

    def _record(self, result: SendResult) -> None:
        offsets = result.offsets or tuple(range(result.first_offset, result.first_offset + result.count))
        key = result.queue.key
        run_start = prev = offsets[0]
        for off in offsets[1:]:
            if off != prev + 1:
                self._append(WrittenRange(key, run_start, prev - run_start + 1))
                run_start = off
            prev = off
        self._append(WrittenRange(key, run_start, prev - run_start + 1))

    def _append(self, w: WrittenRange) -> None:
        last = self.written[-1] if self.written else None
        if last and last.partition == w.partition and last.first_offset + last.count == w.first_offset:
            self.written[-1] = WrittenRange(w.partition, last.first_offset, last.count + w.count)
        else:
            self.written.append(w)
