"""Records made into RocketMQ messages in Arrow, as ``Converter.to_messages`` makes them in Spark.

A source whose batch is built on the driver (a CDC task's change records, a snapshot chunk) and
whose records no transform rewrites needs none of Spark's expression engine to make its messages:
the Connect envelope of each value is its schema's JSON (built once per record shape, on the
driver) spliced before the payload's JSON, which Arrow writes column by column
(``connect_payloads``). Built with Spark expressions, the Debezium envelopes of 5,000 change
records cost 0.35–0.5 s of a 1.0–1.4 s source batch (``spark_json``'s writers show the same
JSON in a few milliseconds).

The encoder only ever declines, when it is planned: a record shape it does not write exactly as
Spark's ``to_messages`` would (a key type other than text or structured without envelopes, a
decimal wider than 128 bits, a nanosecond timestamp, records some of which the source could not
decode) gets no encoder, and the batch takes Spark's path. ``tests/connectors/test_arrow_messages.py``
checks the messages equal Spark's, column for column.

Pure pyarrow (and numpy): the runner plans an encoder through the converter
(``Converter.arrow_encoder``), which knows the Connect schemas.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors.barriers import BARRIER_HEADER, BARRIER_QUEUES_HEADER
from sluice.connectors.rocketmq.arrow_encode import key_slots
from sluice.connectors.spark_json import json_values

#: The message columns, as ``Converter.to_messages`` selects them (before its size check).
MESSAGE_SCHEMA: Final = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("body", pa.binary()),
        pa.field("keys", pa.string()),
        pa.field("tags", pa.string()),
        pa.field("properties", pa.map_(pa.string(), pa.string())),
        pa.field("partition", pa.string(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
    ]
)


@dataclass(frozen=True)
class KeyText:
    """How a record's key becomes the message's ``KEYS`` text.

    ``kind``: ``none`` (the key column is all null), ``text`` (a string key as it is), ``json``
    (a structured key as Spark's ``to_json`` writes it, null fields left out) or ``envelope`` (a
    Connect envelope: ``head`` is its ``{"schema":…,"payload":`` prefix)."""

    kind: str
    head: str = ""


@dataclass(frozen=True)
class MessageEncoder:
    """The messages of one record shape: ``value_head`` is the value envelope's prefix (the json
    converter), or None for a body that is the value's own bytes (a text's UTF-8 or binary as it
    is: the string and bytes converters); ``key`` how keys are written; the property names are the
    converter's (connectors.converters)."""

    value_head: str | None
    key: KeyText
    partition_property: str
    offset_property: str
    tombstone_property: str
    tags_header: str

    def encode(self, records: pa.Table, extra_properties: Mapping[str, str] | None = None) -> pa.Table:
        """``records`` (the record columns) as message columns (``MESSAGE_SCHEMA``); a null value is
        an empty body marked as a tombstone, as in Spark's ``to_messages``."""
        records = records.combine_chunks()
        n = records.num_rows
        if n == 0:
            return MESSAGE_SCHEMA.empty_table()
        value = _single(records.column("value"))
        tombstone = value.is_null()
        bodies = pc.if_else(tombstone, pa.scalar(b"", pa.binary()), self._bodies(value).cast(pa.binary()))
        headers = _single(records.column("headers"))
        tags, kept = _tags_and_headers(headers, self.tags_header, n)
        partition = _single(records.column("partition"))
        offset = _single(records.column("offset"))
        fixed_keys = [self.partition_property, self.offset_property]
        fixed_values = [partition, offset.cast(pa.string())]
        for name, text in (extra_properties or {}).items():
            fixed_keys.append(name)
            fixed_values.append(pa.array(np.full(n, text, dtype=object), pa.string()))
        properties = _properties(kept, fixed_keys, fixed_values, tombstone, self.tombstone_property, n)
        columns = {
            "topic": _single(records.column("topic")),
            "body": bodies,
            "keys": self._keys(_single(records.column("key"))),
            "tags": tags,
            "properties": properties,
            "partition": partition,
            "offset": offset,
        }
        return pa.Table.from_arrays([columns[f.name] for f in MESSAGE_SCHEMA], schema=MESSAGE_SCHEMA)

    def _bodies(self, value: pa.Array) -> pa.Array:
        if self.value_head is None:
            return value
        head = pa.scalar(self.value_head, pa.string())
        return pc.binary_join_element_wise(head, connect_payloads(value), pa.scalar("}", pa.string()), "")

    def _keys(self, key: pa.Array) -> pa.Array:
        if self.key.kind == "none":
            return pa.nulls(len(key), pa.string())
        if self.key.kind == "text":
            return key.cast(pa.string())
        if self.key.kind == "json":
            return json_values(key)
        texts = pc.binary_join_element_wise(self.key.head, connect_payloads(key), "}", "")
        return pc.if_else(key.is_null(), pa.scalar(None, pa.string()), texts)


def encodable_type(kind: pa.DataType) -> bool:
    """Whether ``connect_payloads`` writes values of ``kind`` exactly as the json converter does in
    Spark: not decimals over 128 bits, timestamps finer than microseconds, nor non-text map keys."""
    if pa.types.is_struct(kind):
        return all(encodable_type(kind.field(i).type) for i in range(kind.num_fields))
    if pa.types.is_map(kind):
        return pa.types.is_string(kind.key_type) and encodable_type(kind.item_type)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return encodable_type(kind.value_type)
    if pa.types.is_timestamp(kind):
        return kind.unit in ("s", "ms", "us")
    if pa.types.is_decimal(kind):
        return pa.types.is_decimal128(kind)
    return any(
        check(kind)
        for check in (
            pa.types.is_integer, pa.types.is_boolean, pa.types.is_floating, pa.types.is_string,
            pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary, pa.types.is_date32,
        )
    )  # fmt: skip


def connect_payloads(values: pa.Array) -> pa.Array:
    """Each value's JSON as the json converter writes an envelope's payload (``connect_json``'s wire
    forms: instants as ISO-8601 text in UTC with microseconds, zone-less date-times as epoch micros,
    dates as epoch days, decimals and bytes as base64; null struct fields kept as ``null``); a null
    value is ``null``."""
    return pc.fill_null(json_values(_wire(values), keep_nulls=True), "null")


def _wire(values: pa.Array) -> pa.Array:
    """``values`` in their JSON wire types (see ``connect_payloads``)."""
    kind = values.type
    mask = values.is_null() if values.null_count else None
    if pa.types.is_struct(kind):
        children = [_wire(child) for child in values.flatten()]
        fields = [
            pa.field(kind.field(i).name, c.type, kind.field(i).nullable) for i, c in enumerate(children)
        ]
        return pa.StructArray.from_arrays(children, fields=fields, mask=mask)
    if pa.types.is_map(kind):
        offsets = values.offsets
        return pa.MapArray.from_arrays(offsets, values.keys, _wire(values.items), mask=mask)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return type(values).from_arrays(values.offsets, _wire(values.values), mask=mask)
    if pa.types.is_timestamp(kind):
        if kind.tz is None:  # a zone-less date-time: epoch micros (Debezium's MicroTimestamp)
            return values.cast(pa.timestamp("us")).cast(pa.int64())
        text = values.cast(pa.timestamp("us", "UTC")).cast(pa.string())  # "2024-02-29 23:59:59.123456Z"
        return pc.replace_substring(text, " ", "T", max_replacements=1)
    if pa.types.is_date32(kind):
        return values.cast(pa.int32())
    if pa.types.is_decimal(kind):
        return _decimal_base64(values)
    return values


def _decimal_base64(values: pa.Array) -> pa.Array:
    """Kafka's Decimal wire form: base64 of the unscaled value's minimal two's complement bytes."""
    data = values.buffers()[1]
    if data is None:
        return pa.nulls(len(values), pa.string())
    words = np.frombuffer(data, dtype="<i8")[2 * values.offset : 2 * (values.offset + len(values))]
    pairs = words.reshape(-1, 2)
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    texts: list[str | None] = []
    for (low, high), ok in zip(pairs.tolist(), valid.tolist(), strict=True):
        if not ok:
            texts.append(None)
            continue
        unscaled = (high << 64) | (low & 0xFFFFFFFFFFFFFFFF)
        length = max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1)
        texts.append(base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode("ascii"))
    return pa.array(texts, pa.string())


def _tags_and_headers(headers: pa.Array, tags_header: str, n: int) -> tuple[pa.Array, pa.Array]:
    """Each record's tags (its ``tags_header``) and the entries of its headers a message carries:
    not Sluice's own (``sluice.``, but for the barrier mark), not the tags, not null. The entries
    are (row, key, value) arrays in row order."""
    offsets = headers.offsets.to_numpy()
    sizes = np.diff(offsets)
    start, end = int(offsets[0]), int(offsets[-1])
    rows = pa.array(np.repeat(np.arange(n, dtype=np.int64), sizes))
    keys = headers.keys.slice(start, end - start)
    items = headers.items.slice(start, end - start)
    if headers.null_count:  # a null map's entries, if it has any, are none of the record's
        items = pc.if_else(pa.array(np.repeat(headers.is_valid().to_numpy(zero_copy_only=False), sizes)),
                           items, pa.scalar(None, pa.string()))  # fmt: skip
    is_tag = pc.equal(keys, tags_header)
    tags = pa.nulls(n, pa.string())
    if pc.any(is_tag).as_py():
        at = np.full(n, -1, dtype=np.int64)
        at[rows.filter(is_tag).to_numpy()] = np.flatnonzero(is_tag.to_numpy(zero_copy_only=False))
        tags = items.take(pa.array(at, mask=at < 0))
    kept = pc.and_(
        pc.and_(
            pc.or_(pc.invert(pc.starts_with(keys, "sluice.")), pc.equal(keys, BARRIER_HEADER)),
            pc.invert(is_tag),
        ),
        items.is_valid(),
    )
    kept = pc.fill_null(kept, False)
    entries = pa.StructArray.from_arrays(
        [rows.filter(kept), keys.filter(kept), items.filter(kept)], names=["row", "key", "value"]
    )
    return tags, entries


def _properties(
    headers: pa.StructArray,
    fixed_keys: list[str],
    fixed_values: list[pa.Array],
    tombstone: pa.Array,
    tombstone_property: str,
    n: int,
) -> pa.MapArray:
    """Each message's properties: its kept header entries, then the position (and the tombstone
    mark of a null value, before the fixed extra properties, as Spark's map is built)."""
    header_rows = headers.field("row").to_numpy(zero_copy_only=False).astype(np.int64)
    is_tombstone = tombstone.to_numpy(zero_copy_only=False).astype(bool)
    # each entry's row and its place in the row: headers first, then the position, the tombstone
    # mark and the extra properties in order
    rows = [header_rows]
    places = [np.zeros(len(header_rows), dtype=np.int64)]
    keys: list[pa.Array] = [headers.field("key")]
    values: list[pa.Array] = [headers.field("value")]
    every = np.arange(n, dtype=np.int64)
    for i, (name, column) in enumerate(zip(fixed_keys, fixed_values, strict=True)):
        rank = i + 1 if i < 2 else i + 2  # the tombstone mark's place is 3
        rows.append(every)
        places.append(np.full(n, rank, dtype=np.int64))
        keys.append(pa.array(np.full(n, name, dtype=object), pa.string()))
        values.append(column)
    marked = np.flatnonzero(is_tombstone)
    if len(marked):
        rows.append(marked)
        places.append(np.full(len(marked), 3, dtype=np.int64))  # after partition and offset
        keys.append(pa.array(np.full(len(marked), tombstone_property, dtype=object), pa.string()))
        values.append(pa.array(np.full(len(marked), "true", dtype=object), pa.string()))
    all_rows = np.concatenate(rows)
    order = np.lexsort((np.concatenate(places), all_rows))
    counts = np.bincount(all_rows, minlength=n)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    take = pa.array(order)
    flat_keys = pa.concat_arrays(keys).take(take)
    flat_values = pa.concat_arrays(values).take(take)
    return pa.MapArray.from_arrays(pa.array(offsets), flat_keys, flat_values)


def sharded(messages: pa.Table, queues: tuple[str, ...]) -> pa.Table:
    """``messages`` with the ``queue`` each goes to (an index into ``queues``), as the source
    runner shards in Spark: ``crc32(key) % queues`` for a keyed message (its source partition's for
    a keyless one), and every queue for a barrier, each copy labelled ``<i>/<n>`` with the list of
    queues sent to (connectors.barriers)."""
    count = len(queues)
    n = messages.num_rows
    if n == 0:
        return messages.append_column("queue", pa.array([], pa.int32()))
    keys = pc.coalesce(messages.column("keys"), messages.column("partition")).combine_chunks()
    slots = key_slots(keys, count).astype(np.int32)
    properties = _single(messages.column("properties"))
    offsets = properties.offsets.to_numpy()
    start, end = int(offsets[0]), int(offsets[-1])
    marks = pc.equal(properties.keys.slice(start, end - start), BARRIER_HEADER)
    is_mark = marks.to_numpy(zero_copy_only=False)
    rows = np.repeat(np.arange(n), np.diff(offsets))
    barrier = np.bincount(rows[is_mark], minlength=n) > 0
    if not barrier.any():
        return messages.append_column("queue", pa.array(slots, pa.int32()))
    # Barriers are rare (a signal's mark): their copies are made row by row.
    copies = np.where(barrier, count, 1)
    out = messages.take(pa.array(np.repeat(np.arange(n), copies)))
    queue: list[int] = []
    labelled: list[list[tuple[str, str]]] = []
    listed = ",".join(queues)
    for row, entries in enumerate(properties.to_pylist()):
        if not barrier[row]:
            queue.append(int(slots[row]))
            labelled.append(entries)
            continue
        kept = [(k, v) for k, v in entries if k != BARRIER_HEADER]
        for i in range(count):
            queue.append(i)
            labelled.append([*kept, (BARRIER_HEADER, f"{i}/{count}"), (BARRIER_QUEUES_HEADER, listed)])
    out = out.set_column(out.schema.get_field_index("properties"), "properties",
                         pa.array(labelled, properties.type))  # fmt: skip
    return out.append_column("queue", pa.array(queue, pa.int32()))


def _single(column: pa.ChunkedArray) -> pa.Array:
    if column.num_chunks == 1:
        return column.chunk(0)
    return pa.concat_arrays(column.chunks) if column.num_chunks else pa.array([], column.type)
