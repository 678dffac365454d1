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

from pyspark.sql import functions as F

from sluice.connectors.rocketmq.codec import MAX_PROPERTIES_BYTES, STORED_OVERHEAD

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column

#: The broker's default maxMessageSize, also the client's limit (transport.max_message_bytes).
MAX_MESSAGE_BYTES: Final = 4 * 1024 * 1024
#: Longest topic name RocketMQ accepts (TopicValidator): the size of a message to an unknown topic.
MAX_TOPIC_CHARS: Final = 127
_UNIQ_KEY_ENTRY: Final = len("UNIQ_KEY") + 2 + 32  # name, two separators, 32 hex characters
_WAIT_ENTRY: Final = len("WAIT") + 2 + len("true")


def stamped_size(properties: Mapping[str, str]) -> int:
    """Bytes ``properties`` take in every message's properties text when the writer stamps them."""
    return sum(len(k.encode()) + 2 + len(v.encode()) for k, v in properties.items())


def properties_size(keys: Column, tags: Column, properties: Column, stamped_bytes: int = 0) -> Column:
    """Bytes of a message's properties text as the writer encodes it (``stamped_bytes``: the
    properties it stamps on every message)."""

    def entry(name: str, value: Column) -> Column:
        return F.when(value.isNull(), F.lit(0)).otherwise(len(name) + 2 + F.octet_length(value))

    # name + value + two separators per entry; joined arrays, not a lambda per entry (that one is
    # interpreted, these are code-generated: this runs for every message a source sends)
    props = F.coalesce(properties, F.create_map().cast("map<string,string>"))
    user = (
        F.octet_length(F.concat_ws("", F.map_keys(props)))
        + F.octet_length(F.concat_ws("", F.map_values(props)))
        + 2 * F.size(props)
    )
    return entry("KEYS", keys) + entry("TAGS", tags) + user + _UNIQ_KEY_ENTRY + _WAIT_ENTRY + stamped_bytes


def stored_size(body: Column, props_size: Column, topic: Column) -> Column:
    """Bytes the broker stores for the message (what maxMessageSize applies to)."""
    topic_size = F.coalesce(F.octet_length(topic), F.lit(MAX_TOPIC_CHARS))
    return F.coalesce(F.octet_length(body), F.lit(0)) + 2 + props_size + STORED_OVERHEAD + topic_size


def size_problem(
    body: Column, keys: Column, tags: Column, properties: Column, topic: Column, stamped_bytes: int = 0
) -> Column:
    """Why a message cannot be sent (null when it fits): over the size or properties limit."""
    props = properties_size(keys, tags, properties, stamped_bytes)
    stored = stored_size(body, props, topic)
    too_large = F.concat(
        F.lit("message of "), stored.cast("string"),
        F.lit(" bytes (body "), F.octet_length(body).cast("string"),
        F.lit(f" bytes) is over RocketMQ's maximum message size of {MAX_MESSAGE_BYTES} bytes"),
    )  # fmt: skip
    too_many_props = F.concat(
        F.lit("message properties take "), props.cast("string"),
        F.lit(f" bytes, over RocketMQ's limit of {MAX_PROPERTIES_BYTES}"),
    )  # fmt: skip
    return F.when(stored > MAX_MESSAGE_BYTES, too_large).when(props > MAX_PROPERTIES_BYTES, too_many_props)


def size_problem_in_arrow(messages: pa.Table, stamped_bytes: int = 0) -> tuple[int, str] | None:
    """``size_problem`` for an Arrow table of message columns (connectors.arrow_messages), counted
    as it counts: the first message that does not fit and why, or None when every one fits."""
    import numpy as np
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
    unfit = np.flatnonzero((stored > MAX_MESSAGE_BYTES) | (props > MAX_PROPERTIES_BYTES))
    if not len(unfit):
        return None
    i = int(unfit[0])
    if stored[i] > MAX_MESSAGE_BYTES:
        return i, (
            f"message of {stored[i]} bytes (body {body[i]} bytes) is over RocketMQ's maximum message "
            f"size of {MAX_MESSAGE_BYTES} bytes"
        )
    return i, f"message properties take {props[i]} bytes, over RocketMQ's limit of {MAX_PROPERTIES_BYTES}"
