"""A sink's tolerated bad records as dead-letter messages, made in Arrow from the messages read.

Kafka Connect's shape: the failed record's original bytes (the message body as it was in the
topic, and its keys; for a direct pipeline's record, which never was a message, what its source
could not decode or its value) plus properties saying which connector failed it, where it came
from and why. A body longer than ``MAX_DEAD_LETTER_BODY`` is truncated to it, with its original size in
``sluice.original.size`` and ``sluice.truncated=true``. Pure pyarrow: the sink's stages make them
where they run (connectors.sink_stages), the runners send them (activities.dead_letters).
"""

from __future__ import annotations

from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors.arrow_messages import connect_payloads
from sluice.connectors.records import ERROR_COLUMN, RAW_COLUMN
from sluice.connectors.spark_json import json_values

ERROR_PROPERTY: Final = "sluice.error"
CONNECTOR_PROPERTY: Final = "sluice.connector"
ORIGIN_TOPIC_PROPERTY: Final = "sluice.origin.topic"
ORIGIN_PARTITION_PROPERTY: Final = "sluice.origin.partition"
ORIGIN_OFFSET_PROPERTY: Final = "sluice.origin.offset"
ORIGINAL_SIZE_PROPERTY: Final = "sluice.original.size"
TRUNCATED_PROPERTY: Final = "sluice.truncated"
#: Room left under the broker's message limit for a dead letter's properties (at most 32 KiB).
MAX_DEAD_LETTER_BODY: Final = 4 * 1024 * 1024 - 64 * 1024

#: A dead letter's columns, as the rocketmq writer takes them.
DEAD_LETTER_SCHEMA: Final = pa.schema(
    [
        pa.field("body", pa.binary()),
        pa.field("keys", pa.string()),
        pa.field("properties", pa.map_(pa.string(), pa.string())),
    ]
)


def dead_letters(messages: pa.Table, bad: pa.Table, connector: str) -> pa.Table:
    """The dead letters of ``bad`` records (their ``partition``, ``offset`` and error column)
    read as ``messages`` (the reader's columns), in queue and offset order."""
    bad = bad.sort_by([("partition", "ascending"), ("offset", "ascending")])
    at = pc.index_in(position_keys(bad, "offset"), value_set=position_keys(messages, "queue_offset"))
    originals = messages.take(at)
    return _letters(
        bad, originals.column("body"), originals.column("keys"), originals.column("topic"), connector
    )


def record_dead_letters(records: pa.Table, connector: str) -> pa.Table:
    """The dead letters of flagged records that were never messages (a direct pipeline's): the bytes
    the source could not decode (``RAW_COLUMN``), else the value's: a text's UTF-8, bytes as they
    are, anything else its JSON (Connect's payload form). A record's topic is where it was going:
    no origin topic is said."""
    records = records.sort_by([("partition", "ascending"), ("offset", "ascending")])
    value = records.column("value").combine_chunks()
    if pa.types.is_string(value.type) or pa.types.is_binary(value.type):
        body = value.cast(pa.binary())
    else:
        body = connect_payloads(value).cast(pa.binary())
    if RAW_COLUMN in records.column_names:
        body = pc.coalesce(records.column(RAW_COLUMN).combine_chunks().cast(pa.binary()), body)
    key = records.column("key").combine_chunks()
    keys = (
        key.cast(pa.string())
        if pa.types.is_string(key.type) or pa.types.is_null(key.type)
        else json_values(key)
    )
    return _letters(records, body, keys, pa.nulls(records.num_rows, pa.string()), connector)


def _letters(
    bad: pa.Table, body: pa.Array | pa.ChunkedArray, keys: pa.Array | pa.ChunkedArray,
    topics: pa.Array | pa.ChunkedArray, connector: str,
) -> pa.Table:  # fmt: skip
    """Dead letters of ``bad``'s records (partition, offset, error) with their bodies, keys and
    origin topics."""
    body = pc.fill_null(_single(body), pa.scalar(b"", pa.binary()))
    size = pc.binary_length(body)
    properties = {
        ERROR_PROPERTY: bad.column(ERROR_COLUMN),
        CONNECTOR_PROPERTY: pa.repeat(pa.scalar(connector), bad.num_rows),
        ORIGIN_TOPIC_PROPERTY: topics,
        ORIGIN_PARTITION_PROPERTY: bad.column("partition"),
        ORIGIN_OFFSET_PROPERTY: bad.column("offset").cast(pa.string()),
        ORIGINAL_SIZE_PROPERTY: size.cast(pa.string()),
        TRUNCATED_PROPERTY: pc.if_else(pc.greater(size, MAX_DEAD_LETTER_BODY), "true", "false"),
    }
    columns = [
        pc.binary_slice(body, 0, MAX_DEAD_LETTER_BODY),
        _single(keys),
        _as_map(properties, bad.num_rows),
    ]
    return pa.table(columns, schema=DEAD_LETTER_SCHEMA)


def _single(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def position_keys(table: pa.Table, offset: str) -> pa.Array:
    """``partition@offset`` per row (``offset`` names the offset column): one key to find a
    record's message by."""
    texts = [table.column("partition"), pa.scalar("@"), table.column(offset).cast(pa.string())]
    return pc.binary_join_element_wise(*texts, pa.scalar("")).combine_chunks()


def _as_map(columns: dict[str, pa.ChunkedArray | pa.Array], rows: int) -> pa.MapArray:
    """One map per row of the named columns' values; RocketMQ stores no empty property value,
    so null and empty ones are left out."""
    arrays = [_single(c) for c in columns.values()]
    flat = pa.concat_arrays([a.cast(pa.string()) for a in arrays])
    # flat holds column after column: row r's entries are flat[c * rows + r] for each column c
    items = flat.take(pa.array(np.arange(len(flat)).reshape(len(arrays), rows).T.ravel()))
    keys = pa.array(np.tile(np.array(list(columns), dtype=object), rows), pa.string())
    kept = pc.and_(pc.is_valid(items), pc.not_equal(pc.fill_null(items, ""), ""))
    offsets = np.zeros(rows + 1, np.int32)
    np.cumsum(np.asarray(kept).reshape(rows, len(arrays)).sum(axis=1), out=offsets[1:])
    return pa.MapArray.from_arrays(pa.array(offsets), keys.filter(kept), items.filter(kept))
