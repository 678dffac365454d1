"""Plain frozen values of the RocketMQ client API (queues, messages, results, routes).

Kept apart from the client so the codec, the Spark reader and the planner can import them without
pulling in asyncio machinery.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sluice.connectors.model import queue_partition


@dataclass(frozen=True)
class MessageQueue:
    """One queue of a topic on one broker: the unit RocketMQ orders and offsets messages by."""

    topic: str
    broker_name: str
    queue_id: int

    @property
    def key(self) -> str:
        """The partition key used in plans and the offset store ("broker-a:3")."""
        return queue_partition(self.broker_name, self.queue_id)

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker_name}:{self.queue_id}"


@dataclass(frozen=True)
class Message:
    """A stored message as pulled from a queue.

    ``properties`` holds user properties only: KEYS and TAGS have their own fields and RocketMQ's
    system properties (UNIQ_KEY, WAIT, CLUSTER, ...) are dropped so that what a source wrote is
    exactly what a sink reads. ``msg_id`` is the producer-assigned unique id (UNIQ_KEY) when present,
    else the broker's offset message id, as the official clients report it.
    """

    topic: str
    broker_name: str
    queue_id: int
    queue_offset: int
    body: bytes
    keys: str | None
    tags: str | None
    properties: dict[str, str]
    born_timestamp_ms: int
    store_timestamp_ms: int
    msg_id: str


@dataclass(slots=True)
class MessageColumns:
    """Stored messages of one broker decoded field by field: entry ``i`` of every list is message ``i``.

    What codec.decode_columns returns, so that the Arrow reader builds its columns without a Python
    object per message. ``properties`` is each message's raw properties text ("name\\x01value\\x02...",
    system properties included); ``store_host`` (address + port bytes) and ``commit_log_offset`` make
    the offset message id of a message without UNIQ_KEY.
    """

    broker_name: str
    topic: list[str] = field(default_factory=list)
    queue_id: list[int] = field(default_factory=list)
    queue_offset: list[int] = field(default_factory=list)
    born_timestamp_ms: list[int] = field(default_factory=list)
    store_timestamp_ms: list[int] = field(default_factory=list)
    body: list[bytes] = field(default_factory=list)
    properties: list[str] = field(default_factory=list)
    store_host: list[bytes] = field(default_factory=list)
    commit_log_offset: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.queue_offset)

    def _lists(self) -> tuple[list[Any], ...]:
        return (
            self.topic, self.queue_id, self.queue_offset, self.born_timestamp_ms, self.store_timestamp_ms,
            self.body, self.properties, self.store_host, self.commit_log_offset,
        )  # fmt: skip

    def extend(self, other: MessageColumns) -> None:
        """Append ``other``'s messages (same broker) after these."""
        for mine, theirs in zip(self._lists(), other._lists(), strict=True):
            mine.extend(theirs)

    def within(self, start: int, end: int) -> MessageColumns:
        """The messages with queue offsets in ``[start, end)`` (``self`` when that is all of them)."""
        offsets = self.queue_offset
        if not offsets or (min(offsets) >= start and max(offsets) < end):
            return self
        keep = [i for i, offset in enumerate(offsets) if start <= offset < end]
        out = MessageColumns(self.broker_name)
        for mine, theirs in zip(out._lists(), self._lists(), strict=True):
            mine.extend([theirs[i] for i in keep])
        return out


@dataclass(frozen=True)
class OutgoingMessage:
    """A message to send; the topic and queue are chosen by the send call."""

    body: bytes
    keys: str | None = None
    tags: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PullResult:
    """Messages from one pull; ``next_offset`` is where the next pull should start."""

    messages: tuple[Message, ...]
    next_offset: int
    min_offset: int
    max_offset: int


@dataclass(frozen=True)
class SendResult:
    """Where a batch landed.

    ``offsets`` lists each message's queue offset. They are contiguous from ``first_offset`` when the
    batch went out as one request (or nobody else wrote to the queue meanwhile); a batch split for
    size into several requests may interleave with other producers.
    """

    queue: MessageQueue
    first_offset: int
    count: int
    msg_ids: tuple[str, ...]
    offsets: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicRoute:
    """Readable queues of a topic and the master address of each broker holding them."""

    topic: str
    queues: tuple[MessageQueue, ...]
    broker_addresses: dict[str, str]
    writable_queues: tuple[MessageQueue, ...] = ()
    #: the topic's permission bits on its brokers, joined (2 write, 4 read)
    perm: int = 6
