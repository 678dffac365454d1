"""Message layouts: decoding stored messages from pull results and encoding batches for send.

Written from the public layout of Apache RocketMQ's MessageDecoder. A pull response body is a
sequence of stored messages, each::

    int32 totalSize, int32 magic (V1: 1-byte topic length, V2: 2-byte), int32 bodyCRC, int32 queueId,
    int32 flag, int64 queueOffset, int64 commitLogOffset, int32 sysFlag, int64 bornTimestamp,
    bornHost (IPv4 4 / IPv6 16 bytes, sysFlag bit 4) + int32 port, int64 storeTimestamp,
    storeHost (sysFlag bit 5) + int32 port, int32 reconsumeTimes, int64 preparedTransactionOffset,
    int32 bodyLength + body (compressed when sysFlag bit 0; codec in bits 8-10), topic length + topic,
    int16 propertiesLength + properties ("name\\x01value\\x02" ...)

A batch send body is a sequence of ``int32 size, int32 magic, int32 bodyCRC, int32 flag,
int32 bodyLength, body, int16 propertiesLength, properties``; magic, bodyCRC and flag are 0, as
RocketMQ's own ``MessageDecoder.encodeMessage`` writes them (the broker computes the stored CRC).

Speed matters (the sink reads 100k+ messages/s in one process): decoding uses precompiled structs
with ``unpack_from`` on the response bytes and builds each value once. There is one parser,
``decode_columns``, which returns per-field lists (values.MessageColumns) so the Arrow reader never
builds an object per message; ``decode_messages`` makes Messages from those columns. Every length is
checked against the buffer so malformed input raises ProtocolError instead of anything else.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate

from sluice.connectors.rocketmq.errors import MessageTooLargeError, ProtocolError
from sluice.connectors.rocketmq.values import Message, MessageColumns, OutgoingMessage

MAGIC_V1 = -626843481
MAGIC_V2 = -626843477

SYSFLAG_COMPRESSED = 0x1
SYSFLAG_BORNHOST_V6 = 0x1 << 4
SYSFLAG_STOREHOST_V6 = 0x1 << 5
COMPRESSION_MASK = 0x7 << 8

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

PROP_KEYS = "KEYS"
PROP_TAGS = "TAGS"
PROP_UNIQ_KEY = "UNIQ_KEY"
PROP_WAIT = "WAIT"

# MessageConst.STRING_HASH_SET: names RocketMQ reserves for itself. They are never user properties.
SYSTEM_PROPERTIES = frozenset({
    "1ST_POP_TIME", "ARRIVE_TIME", "BORN_TIMESTAMP", "BUYER_ID", "CLUSTER", "CONSUME_START_TIME",
    "CORRECTION_FLAG", "CORRELATION_ID", "DELAY", "DLQ_ORIGIN_MESSAGE_ID", "DLQ_ORIGIN_TOPIC", "DUP_INFO",
    "EXTEND_UNIQ_INFO", "INNER_MULTI_QUEUE_OFFSET", "INSTANCE_ID", "KEYS", "MAX_OFFSET",
    "MAX_RECONSUME_TIMES", "MIN_OFFSET", "MQ2_FLAG", "MSG_REGION", "MSG_TYPE", "ORIGIN_MESSAGE_ID",
    "PGROUP", "POP_CK", "POP_CK_OFFSET", "PUSH_REPLY_TIME", "REAL_QID", "REAL_TOPIC", "RECONSUME_TIME",
    "REPLY_TO_CLIENT", "RETRY_TOPIC", "TAGS", "TIMER_DELAY_LEVEL", "TIMER_DELAY_MS", "TIMER_DELAY_SEC",
    "TIMER_DELIVER_MS", "TIMER_DEL_UNIQKEY", "TIMER_DEQUEUE_MS", "TIMER_ENQUEUE_MS", "TIMER_OUT_MS",
    "TIMER_ROLL_TIMES", "TRACE_ON", "TRANSFER_FLAG", "TRAN_MSG", "TRAN_PREPARED_QUEUE_OFFSET", "TTL",
    "UNIQ_KEY", "WAIT", "__BORNHOST", "__CRC32#",
})  # fmt: skip

MAX_PROPERTIES_BYTES = 32767  # properties length travels as a Java short
# Bytes a stored message adds around body, topic and properties (IPv4 hosts; the broker's
# MessageExtEncoder.calMsgLength). Used to keep a batch under the broker's size limit.
STORED_OVERHEAD = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 2 + 2

# totalSize, magic, bodyCRC (skipped), queueId, flag (skipped), queueOffset, commitLogOffset, sysFlag,
# bornTimestamp, bornHost+port (skipped), storeTimestamp, storeHost+port (kept for the offset msg id),
# reconsumeTimes + preparedTransactionOffset (skipped), bodyLength; indexed by the two host-v6 bits.
_FIXED = tuple(
    struct.Struct(f">ii4xi4xqqiq{born}xq{store}s12xi") for born, store in ((8, 8), (20, 8), (8, 20), (20, 20))
)
_MIN_SIZE = _FIXED[0].size + 1 + 2  # empty body, V1 topic length, properties length
_SYSFLAG_LOW_BYTE = 39  # offset of the sysFlag's low byte in a stored message
_I16 = struct.Struct(">h")
_BATCH_HEAD = struct.Struct(">iiiii")  # size, magic, bodyCRC, flag, bodyLength
BATCH_HEAD_SIZE = _BATCH_HEAD.size  # for encoders that frame entries themselves (arrow_encode)
_Q = struct.Struct(">q")


def encode_properties(props: Mapping[str, str]) -> str:
    return "".join(f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in props.items())


def decode_properties(text: str) -> dict[str, str]:
    """Parse "k\\x01v\\x02..."; like RocketMQ, entries without a name or value are ignored."""
    props: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep and name and value:
            props[name] = value
    return props


def _decompress(body: bytes, sysflag: int, where: str) -> bytes:
    kind = (sysflag & COMPRESSION_MASK) >> 8
    try:
        if kind in (0, 3):  # 0: clients before 4.9.x always used zlib
            return zlib.decompress(body)
        if kind == 1:
            # lz4, zstandard: optional, not dependencies; a missing one is the ProtocolError below
            import lz4.frame

            return bytes(lz4.frame.decompress(body))
        if kind == 2:
            import zstandard  # optional: see lz4 above

            return bytes(zstandard.ZstdDecompressor().decompressobj().decompress(body))
    except ImportError:
        name = "lz4" if kind == 1 else "zstandard"
        raise ProtocolError(
            f"rocketmq: {where} is compressed with {name}; install the {name} package"
        ) from None
    except Exception as exc:  # any codec failure means corrupt bytes
        raise ProtocolError(f"rocketmq: {where} has a corrupt compressed body: {exc}") from None
    raise ProtocolError(f"rocketmq: {where} uses unknown compression type {kind}")


def decode_columns(data: bytes, broker_name: str) -> MessageColumns:
    """Decode every stored message in a pull response body (strictly: no trailing garbage), by field.

    The one parser of pull bodies and the hot loop of every sink, so it does the minimum per message:
    one ``unpack_from`` for the fixed fields (IPv4 hosts assumed, re-read when a host is IPv6), slices
    for body, topic and properties, and one append per column. Properties stay raw text here; the
    Arrow reader parses them column-wise, messages_from_columns per message.
    """
    cols = MessageColumns(broker_name)
    topics, queue_ids, queue_offsets = cols.topic.append, cols.queue_id.append, cols.queue_offset.append
    borns, stores, bodies = cols.born_timestamp_ms.append, cols.store_timestamp_ms.append, cols.body.append
    props, hosts, physes = cols.properties.append, cols.store_host.append, cols.commit_log_offset.append
    structs = _FIXED
    n = len(data)
    pos = 0
    topic_bytes, topic = b"", ""
    try:
        while pos < n:
            start = pos
            fixed = structs[(data[pos + _SYSFLAG_LOW_BYTE] >> 4) & 3]
            (total, magic, queue_id, queue_offset, phys, sysflag, born_ts, store_ts, store_host,
             body_len) = fixed.unpack_from(data, pos)  # fmt: skip
            end = start + total
            if end > n or total < _MIN_SIZE:
                raise ProtocolError(
                    f"rocketmq: message at byte {start} announces size {total} but {n - start} bytes remain"
                )
            pos += fixed.size
            if body_len < 0 or pos + body_len > end:
                raise ProtocolError(
                    f"rocketmq: message at byte {start} has body length {body_len} past its end"
                )
            body = data[pos : pos + body_len]
            pos += body_len
            if magic == MAGIC_V1:
                topic_len = data[pos]
                pos += 1
            elif magic == MAGIC_V2:
                topic_len = (data[pos] << 8) | data[pos + 1]
                pos += 2
            else:
                raise ProtocolError(f"rocketmq: message at byte {start} has unknown magic code {magic}")
            if data[pos : pos + topic_len] != topic_bytes:  # a pull body is one queue: decode once
                topic_bytes = data[pos : pos + topic_len]
                topic = topic_bytes.decode("utf-8")
            pos += topic_len
            props_len = ((data[pos] << 8) | data[pos + 1]) if pos + 2 <= end else -1
            pos += 2
            if props_len > MAX_PROPERTIES_BYTES or pos + props_len != end:
                raise ProtocolError(
                    f"rocketmq: message at byte {start} (queue offset {queue_offset}) has topic/properties "
                    f"lengths inconsistent with its size {total}"
                )
            text = data[pos:end].decode("utf-8")
            pos = end
            if sysflag & SYSFLAG_COMPRESSED:
                body = _decompress(body, sysflag, f"message {topic!r} queue {queue_id} offset {queue_offset}")
            topics(topic)
            queue_ids(queue_id)
            queue_offsets(queue_offset)
            borns(born_ts)
            stores(store_ts)
            bodies(body)
            props(text)
            hosts(store_host)
            physes(phys)
    except (struct.error, IndexError):
        raise ProtocolError(f"rocketmq: message at byte {pos} of a {n}-byte pull body is truncated") from None
    except UnicodeDecodeError:
        raise ProtocolError(
            f"rocketmq: message near byte {pos} has a topic or properties that are not UTF-8"
        ) from None
    return cols


def decode_messages(data: bytes, broker_name: str) -> list[Message]:
    """Decode every stored message in a pull response body (decode_columns, then Messages)."""
    return messages_from_columns(decode_columns(data, broker_name))


def messages_from_columns(cols: MessageColumns) -> list[Message]:
    """One Message per decoded message: properties parsed, split into keys, tags and user ones.

    Messages are built without the frozen dataclass ``__init__`` (11 guarded setattr calls cost more
    than the rest of the work).
    """
    out: list[Message] = []
    append = out.append
    system = SYSTEM_PROPERTIES
    new = object.__new__
    setattr_ = object.__setattr__
    broker_name = cols.broker_name
    for topic, queue_id, queue_offset, body, text, born_ts, store_ts, store_host, phys in zip(
        cols.topic, cols.queue_id, cols.queue_offset, cols.body, cols.properties, cols.born_timestamp_ms,
        cols.store_timestamp_ms, cols.store_host, cols.commit_log_offset, strict=True,
    ):  # fmt: skip
        props = decode_properties(text) if text else {}
        msg_id = props.get(PROP_UNIQ_KEY) or (store_host + _Q.pack(phys)).hex().upper()
        msg = new(Message)
        setattr_(msg, "__dict__", {
            "topic": topic, "broker_name": broker_name, "queue_id": queue_id,
            "queue_offset": queue_offset, "body": body,
            "keys": props.get(PROP_KEYS), "tags": props.get(PROP_TAGS),
            "properties": {k: v for k, v in props.items() if k not in system},
            "born_timestamp_ms": born_ts, "store_timestamp_ms": store_ts, "msg_id": msg_id,
        })  # fmt: skip
        append(msg)
    return out


def encode_stored_message(
    msg: Message,
    *,
    commit_log_offset: int = 0,
    sysflag: int = 0,
    born_host: bytes = b"\x7f\x00\x00\x01",
    store_host: bytes = b"\x7f\x00\x00\x01",
    system_properties: Mapping[str, str] | None = None,
) -> bytes:
    """Encode a message in the broker's stored layout (tests and fixtures; the broker does this).

    Inverse of decode_messages for the fields a Message carries. ``store_host`` is 4 or 16 address
    bytes followed by nothing: the port is taken from the offset msg id convention (10911).
    """
    props: dict[str, str] = {}
    if msg.keys is not None:
        props[PROP_KEYS] = msg.keys
    if msg.tags is not None:
        props[PROP_TAGS] = msg.tags
    props.update(msg.properties)
    props.update(system_properties or {})
    props_bytes = encode_properties(props).encode("utf-8")
    topic = msg.topic.encode("utf-8")
    v2 = len(topic) > 127
    sysflag &= ~(SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6)
    sysflag |= (SYSFLAG_BORNHOST_V6 if len(born_host) == 16 else 0) | (
        SYSFLAG_STOREHOST_V6 if len(store_host) == 16 else 0
    )
    parts = [
        b"",  # total size, filled below
        struct.pack(
            ">iiiiqqiq",
            MAGIC_V2 if v2 else MAGIC_V1,
            zlib.crc32(msg.body) & 0x7FFFFFFF,
            msg.queue_id,
            0,
            msg.queue_offset,
            commit_log_offset,
            sysflag,
            msg.born_timestamp_ms,
        ),
        born_host,
        struct.pack(">iq", 4242, msg.store_timestamp_ms),
        store_host,
        struct.pack(">iiqi", 10911, 0, 0, len(msg.body)),
        msg.body,
        struct.pack(">h", len(topic)) if v2 else struct.pack(">B", len(topic)),
        topic,
        struct.pack(">h", len(props_bytes)),
        props_bytes,
    ]
    size = 4 + sum(len(p) for p in parts)
    parts[0] = struct.pack(">i", size)
    return b"".join(parts)


class UniqueIdGenerator:
    """Producer-side message ids in the shape of RocketMQ's UNIQ_KEY (32 hex digits).

    10 bytes fixed per process (IPv4 address, pid, random) then a 48-bit counter seeded from the
    clock, so ids are unique per process and roughly time-ordered.
    """

    def __init__(self) -> None:
        try:
            ip = socket.inet_aton(socket.gethostbyname(socket.gethostname()))
        except OSError:
            ip = b"\x7f\x00\x00\x01"
        self._prefix = (ip + struct.pack(">H", os.getpid() & 0xFFFF) + os.urandom(4)).hex().upper()
        self._lock = threading.Lock()
        self._next = 0

    def take(self, count: int) -> list[str]:
        with self._lock:
            first = max(self._next, (int(time.time() * 1000) & 0xFFFFFFFF) << 16)
            self._next = first + count
        prefix = self._prefix
        return [prefix + format((first + i) & 0xFFFFFFFFFFFF, "012X") for i in range(count)]


def encode_batch_entries(
    messages: Sequence[OutgoingMessage], msg_ids: Sequence[str], topic: str
) -> list[bytes]:
    """Encode each message as a batch entry (with its UNIQ_KEY); validates names and sizes."""
    entries: list[bytes] = []
    for index, (msg, uniq) in enumerate(zip(messages, msg_ids, strict=True)):
        body = msg.body
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"rocketmq: message {index} for topic {topic!r}: body is {type(body).__name__}, not bytes"
            )
        text = _properties_text(msg, uniq, index, topic)
        props = text.encode("utf-8")
        if len(props) > MAX_PROPERTIES_BYTES:
            raise MessageTooLargeError(
                f"rocketmq: message {index} for topic {topic!r} has {len(props)} bytes of properties "
                f"(limit {MAX_PROPERTIES_BYTES})"
            )
        entries.append(batch_entry(bytes(body), props))
    return entries


@dataclass(frozen=True)
class EncodedBatch:
    """Batch-send entries laid back to back, as the broker wants them in one request body.

    Entry ``i`` is ``data[offsets[i] - offsets[0] : offsets[i + 1] - offsets[0]]`` and its
    UNIQ_KEY is ``ids[i]``. Why one buffer: a request body is then a slice, not a join of
    thousands of small objects, and a column-wise encoder can build it in one go.
    """

    data: bytes | memoryview
    offsets: Sequence[int]
    ids: Sequence[str]

    def __len__(self) -> int:
        return len(self.ids)

    def entry_sizes(self) -> list[int]:
        offsets = list(self.offsets)
        return [b - a for a, b in zip(offsets, offsets[1:], strict=False)]

    def slice(self, start: int, stop: int) -> EncodedBatch:
        """Entries ``[start, stop)`` without copying."""
        base = self.offsets[0]
        view = memoryview(self.data)[self.offsets[start] - base : self.offsets[stop] - base]
        return EncodedBatch(view, self.offsets[start : stop + 1], self.ids[start:stop])

    def take(self, order: Sequence[int]) -> EncodedBatch:
        """The entries in ``order`` (indices), copied once into one buffer by Arrow's ``take``:
        a gather at C speed where slicing entry by entry costs a Python object each."""
        import numpy as np
        import pyarrow as pa

        base = self.offsets[0]
        offsets = np.asarray(self.offsets, dtype=np.int64) - base
        entries = pa.Array.from_buffers(
            pa.large_binary(), len(self), [None, pa.py_buffer(offsets), pa.py_buffer(self.data)]
        )
        taken = entries.take(pa.array(order, pa.int64()))
        _, new_offsets, data = taken.buffers()
        ends = np.frombuffer(new_offsets, dtype=np.int64)[: len(self) + 1]
        ids = [self.ids[i] for i in order]
        return EncodedBatch(memoryview(data)[: int(ends[-1])], ends.tolist(), ids)

    @staticmethod
    def of_entries(entries: Sequence[bytes], ids: Sequence[str]) -> EncodedBatch:
        return EncodedBatch(b"".join(entries), [0, *accumulate(len(e) for e in entries)], ids)

    @staticmethod
    def concat(parts: Sequence[EncodedBatch]) -> EncodedBatch:
        if len(parts) == 1:
            return parts[0]
        sizes = [size for part in parts for size in part.entry_sizes()]
        ids = [i for part in parts for i in part.ids]
        return EncodedBatch(b"".join(part.data for part in parts), [0, *accumulate(sizes)], ids)


def batch_entry(body: bytes, props: bytes) -> bytes:
    """One message of a batch-send body; ``props`` is the encoded properties text (UNIQ_KEY included)."""
    size = _BATCH_HEAD.size + len(body) + 2 + len(props)
    return b"".join(
        (
            _BATCH_HEAD.pack(size, 0, 0, 0, len(body)),
            body,
            _I16.pack(len(props)),
            props,
        )
    )


def _properties_text(msg: OutgoingMessage, uniq: str, index: int, topic: str) -> str:
    parts: list[str] = []
    for name, value in ((PROP_KEYS, msg.keys), (PROP_TAGS, msg.tags)):
        if value is not None:
            _check_property(name, value, index, topic)
            parts.append(f"{name}\x01{value}\x02")
    for name, value in msg.properties.items():
        if name in SYSTEM_PROPERTIES:
            raise ValueError(
                f"rocketmq: message {index} for topic {topic!r}: property {name!r} is reserved by RocketMQ"
                + (" (use the keys/tags fields)" if name in (PROP_KEYS, PROP_TAGS) else "")
            )
        _check_property(name, value, index, topic)
        parts.append(f"{name}\x01{value}\x02")
    parts.append(f"{PROP_UNIQ_KEY}\x01{uniq}\x02{PROP_WAIT}\x01true\x02")
    return "".join(parts)


def _check_property(name: str, value: str, index: int, topic: str) -> None:
    if not isinstance(name, str) or not isinstance(value, str):
        raise TypeError(
            f"rocketmq: message {index} for topic {topic!r}: property {name!r} must map str to str"
        )
    if not name or not value:
        raise ValueError(
            f"rocketmq: message {index} for topic {topic!r}: property {name!r} has an empty name or value, "
            "which RocketMQ does not store"
        )
    for ch in (NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR):
        if ch in name or ch in value:
            raise ValueError(
                f"rocketmq: message {index} for topic {topic!r}: property {name!r} contains the reserved "
                f"separator {ch!r}"
            )


def stored_size(entry_size: int, topic: str) -> int:
    """Bytes a batch entry of ``entry_size`` bytes takes once stored by the broker (what its size
    limit applies to)."""
    return entry_size - _BATCH_HEAD.size + STORED_OVERHEAD + len(topic.encode("utf-8"))
