"""A sink's tolerated bad records as dead-letter messages, made in Arrow from the messages read.

Kafka Connect's shape: the failed record's original bytes (the message body as it was in the
topic, and its keys) plus properties saying which connector failed it, where it came from and
why. A body longer than ``MAX_DEAD_LETTER_BODY`` is truncated to it, with its original size in
``sluice.original.size`` and ``sluice.truncated=true``. Pure pyarrow: the sink's stages make them
where they run (connectors.sink_stages), the runner sends them (activities.dead_letters).
"""

from __future__ import annotations

from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors.records import ERROR_COLUMN

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
    body = pc.fill_null(originals.column("body").combine_chunks(), pa.scalar(b"", pa.binary()))
    size = pc.binary_length(body)
    truncated = pc.greater(size, MAX_DEAD_LETTER_BODY)
    properties = {
        ERROR_PROPERTY: bad.column(ERROR_COLUMN),
        CONNECTOR_PROPERTY: pa.repeat(pa.scalar(connector), bad.num_rows),
        ORIGIN_TOPIC_PROPERTY: originals.column("topic"),
        ORIGIN_PARTITION_PROPERTY: bad.column("partition"),
        ORIGIN_OFFSET_PROPERTY: bad.column("offset").cast(pa.string()),
        ORIGINAL_SIZE_PROPERTY: size.cast(pa.string()),
        TRUNCATED_PROPERTY: pc.if_else(truncated, "true", "false"),
    }
    return pa.table(
        [
            pc.binary_slice(body, 0, MAX_DEAD_LETTER_BODY),
            originals.column("keys"),
            _as_map(properties, bad.num_rows),
        ],
        schema=DEAD_LETTER_SCHEMA,
    )


def position_keys(table: pa.Table, offset: str) -> pa.Array:
    """``partition@offset`` per row (``offset`` names the offset column): one key to find a
    record's message by."""
    texts = [table.column("partition"), pa.scalar("@"), table.column(offset).cast(pa.string())]
    return pc.binary_join_element_wise(*texts, pa.scalar("")).combine_chunks()


def _as_map(columns: dict[str, pa.ChunkedArray | pa.Array], rows: int) -> pa.MapArray:
    """One map per row of the named columns' values; RocketMQ stores no empty property value,
    so null and empty ones are left out."""
    arrays = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in columns.values()]
    flat = pa.concat_arrays([a.cast(pa.string()) for a in arrays])
    # flat holds column after column: row r's entries are flat[c * rows + r] for each column c
    items = flat.take(pa.array(np.arange(len(flat)).reshape(len(arrays), rows).T.ravel()))
    keys = pa.array(np.tile(np.array(list(columns), dtype=object), rows), pa.string())
    kept = pc.and_(pc.is_valid(items), pc.not_equal(pc.fill_null(items, ""), ""))
    offsets = np.zeros(rows + 1, np.int32)
    np.cumsum(np.asarray(kept).reshape(rows, len(arrays)).sum(axis=1), out=offsets[1:])
    return pa.MapArray.from_arrays(pa.array(offsets), keys.filter(kept), items.filter(kept))
