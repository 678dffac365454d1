"""The broker's message size limit, checked per record before anything is sent.

Why before: a broker (or the client, which enforces the same limit) refusing a batch fails all of
it, names "message 5 of the batch" rather than a source position, and cannot be tolerated record
by record. Here the stored size of each message is computed the way the writer will frame it
(arrow_encode: body, ``KEYS``/``TAGS``/user properties, ``UNIQ_KEY``, ``WAIT``) and the broker will
store it (codec.stored_size), so a record over the limit is flagged as a bad record, with its
position, while the others go on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from sluice.connectors.rocketmq.codec import MAX_PROPERTIES_BYTES, STORED_OVERHEAD

if TYPE_CHECKING:
    import pyarrow as pa

#: The broker's default maxMessageSize, also the client's limit (transport.max_message_bytes).
MAX_MESSAGE_BYTES: Final = 4 * 1024 * 1024
#: Longest topic name RocketMQ accepts (TopicValidator): the size of a message to an unknown topic.
MAX_TOPIC_CHARS: Final = 127
_UNIQ_KEY_ENTRY: Final = len("UNIQ_KEY") + 2 + 32  # name, two separators, 32 hex characters
_WAIT_ENTRY: Final = len("WAIT") + 2 + len("true")


def stamped_size(properties: Mapping[str, str]) -> int:
    """Bytes ``properties`` take in every message's properties text when the writer stamps them."""
    return sum(len(k.encode()) + 2 + len(v.encode()) for k, v in properties.items())


def unsendable(messages: pa.Table, stamped_bytes: int = 0) -> pa.Array | None:
    """Why each message of an Arrow table of message columns (connectors.arrow_messages) cannot be
    sent, null where it fits: over the broker's size limit, or its properties over theirs. None
    when every message fits (the common case: no column is built). ``stamped_bytes``: the
    properties the writer stamps on every message.

    Sizes are counted as the writer frames the message (arrow_encode: body, ``KEYS``/``TAGS``/user
    properties, ``UNIQ_KEY``, ``WAIT``) and the broker stores it (codec.stored_size)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    def lengths(column: str) -> np.ndarray:
        return pc.fill_null(pc.binary_length(messages.column(column)), 0).to_numpy().astype(np.int64)

    def entry(column: str, name: str) -> np.ndarray:
        present = messages.column(column).is_valid().to_numpy(zero_copy_only=False)
        return np.where(present, len(name) + 2 + lengths(column), 0)

    if messages.num_rows == 0:
        return None
    properties = messages.column("properties").combine_chunks()
    offsets = properties.offsets.to_numpy().astype(np.int64)
    start, end = int(offsets[0]), int(offsets[-1])
    entry_bytes = sum(
        pc.fill_null(pc.binary_length(child.slice(start, end - start)), 0).to_numpy().astype(np.int64)
        for child in (properties.keys, properties.items)
    )
    cumulative = np.concatenate([[0], np.cumsum(entry_bytes)])[offsets - start]
    user = np.diff(cumulative) + 2 * np.diff(offsets)
    fixed = _UNIQ_KEY_ENTRY + _WAIT_ENTRY + stamped_bytes
    props = entry("keys", "KEYS") + entry("tags", "TAGS") + user + fixed
    topic = messages.column("topic")
    topic_size = np.where(topic.is_valid().to_numpy(zero_copy_only=False), lengths("topic"), MAX_TOPIC_CHARS)
    body = lengths("body")
    stored = body + 2 + props + STORED_OVERHEAD + topic_size
    too_large = stored > MAX_MESSAGE_BYTES
    unfit = np.flatnonzero(too_large | (props > MAX_PROPERTIES_BYTES))
    if not len(unfit):
        return None
    reasons: list[str | None] = [None] * messages.num_rows
    for i in unfit.tolist():  # rare: a text each
        reasons[i] = (
            f"message of {stored[i]} bytes (body {body[i]} bytes) is over RocketMQ's maximum message "
            f"size of {MAX_MESSAGE_BYTES} bytes"
            if too_large[i]
            else f"message properties take {props[i]} bytes, over RocketMQ's limit of {MAX_PROPERTIES_BYTES}"
        )
    return pa.array(reasons, pa.string())
