"""Records made into RocketMQ messages in Arrow: the only way a source's records become messages.

The converter plans an encoder per record shape on the driver (``Converter.arrow_encoder``: which
text each value and key becomes, the Connect envelope's head built once from the schema, a declared
``value.converter.schema``'s decoder); the encoder runs wherever the batch runs, in the worker's
process or in a Spark task, with pyarrow and numpy only. The Connect envelope of each value is its
schema's JSON spliced before the payload's JSON, which Arrow writes column by column
(``connect_payloads``). Built with Spark expressions, the Debezium envelopes of 5,000 change
records cost 0.35-0.5 s of a 1.0-1.4 s source batch.

One message per record, in the records' order. A record the encoder cannot make a message of is
flagged in the error column (records.ERROR_COLUMN), never dropped: a record a source flagged keeps
its flag, and the json converter flags a text value that is not JSON or does not fit a declared
schema. A type the converter does not write at all raises ValueError when the encoder is planned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors import base64_columns
from sluice.connectors.arrow_json_bodies import not_json
from sluice.connectors.barriers import BARRIER_HEADER, BARRIER_QUEUES_HEADER
from sluice.connectors.record_tables import flagged
from sluice.connectors.records import ERROR_COLUMN
from sluice.connectors.rocketmq.arrow_encode import key_slots
from sluice.connectors.spark_json import cast_text, json_values

if TYPE_CHECKING:
    from sluice.connectors.arrow_json_bodies import DeclaredJsonDecoder

#: The message columns an encoder makes (``ERROR_COLUMN`` follows them where a record is flagged).
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
#: The json converter's flag of a text value that is not one JSON value (Kafka's JsonConverter
#: fails such a record).
NOT_JSON_VALUE: Final = "json converter: value is not valid JSON"


@dataclass(frozen=True)
class Written:
    """How a record's key or value becomes its message's text (a body is that text's UTF-8).

    ``kind``:

    - ``none``: nothing (a column of Arrow's null type: every value null);
    - ``own``: the value as it is: binary bytes, text (as UTF-8 in a body);
    - ``text``: as Spark casts it to a string (the string converter): structs, lists and maps as
      Spark's ``to_json`` with null fields kept, other values as ``spark_json.cast_text``;
    - ``json``: Spark's ``to_json``, null fields left out (structured keys without envelopes, as
      the JDBC and CDC sources always wrote them);
    - ``connect``: the JSON of the value in the json converter's wire forms (``connect_payloads``);
    - ``envelope``: a Connect envelope: ``head`` (its ``{"schema":…,"payload":``), the
      ``connect`` payload, ``}``;
    - ``checked``: text as it is, flagged (``NOT_JSON_VALUE``) where it is not one JSON value
      (arrow_json_bodies.not_json, as a sink checks schemaless bodies).
    """

    kind: str
    head: str = ""


@dataclass(frozen=True)
class MessageEncoder:
    """The messages of one record shape: how values become bodies and keys become ``KEYS``
    (``value``, ``key``), and where a declared schema asks for it, the decoder that parses text
    values first (``declared``: arrow_json_bodies.DeclaredJsonDecoder, its flag naming the value);
    the property names are the converter's (connectors.converters)."""

    value: Written
    key: Written
    partition_property: str
    offset_property: str
    tombstone_property: str
    tags_header: str
    declared: DeclaredJsonDecoder | None = None

    def encode(self, records: pa.Table, extra_properties: Mapping[str, str] | None = None) -> pa.Table:
        """``records`` (the record columns) as message columns (``MESSAGE_SCHEMA``), one message per
        record in their order, and ``ERROR_COLUMN`` where a record is flagged (its own flag first,
        then the converter's; a flagged message's body is not meant to be sent). A null value is
        an empty body marked as a tombstone; ``extra_properties`` go on every message."""
        records = records.combine_chunks()
        n = records.num_rows
        if n == 0:
            return MESSAGE_SCHEMA.empty_table()
        errors = _single(records.column(ERROR_COLUMN)) if ERROR_COLUMN in records.column_names else None
        value = spark_held(_single(records.column("value")))
        tombstone = value.is_null()
        unparsed = None
        if self.declared is not None:  # a text that parses as null (JSON's null) is a tombstone too
            value, failed = self.declared.parse(value.cast(pa.string()))
            unparsed = pa.array(failed)
            errors = flagged(errors, unparsed, self.declared.problem)
            tombstone = pc.and_(value.is_null(), pc.invert(unparsed))
        texts, not_json_texts = written(self.value, value)
        if not_json_texts is not None:
            errors = flagged(errors, pa.array(not_json_texts), NOT_JSON_VALUE)
        texts = texts.cast(pa.binary())
        texts = pa.concat_arrays([texts]) if texts.offset else texts  # if_else over a slice (pyarrow 21)
        bodies = pc.if_else(tombstone, pa.scalar(b"", pa.binary()), texts)
        if unparsed is not None:  # no body for a text that does not parse
            bodies = pc.if_else(unparsed, pa.scalar(None, pa.binary()), bodies)
        key = spark_held(_single(records.column("key")))
        keys, _ = written(self.key, key)
        keys = pc.if_else(key.is_null(), pa.scalar(None, pa.string()), keys.cast(pa.string()))
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
            "keys": keys,
            "tags": tags,
            "properties": properties,
            "partition": partition,
            "offset": offset,
        }
        messages = pa.Table.from_arrays([columns[f.name] for f in MESSAGE_SCHEMA], schema=MESSAGE_SCHEMA)
        if errors is None or errors.null_count == n:
            return messages
        return messages.append_column(pa.field(ERROR_COLUMN, pa.string()), errors)


def written(how: Written, values: pa.Array) -> tuple[pa.Array, np.ndarray | None]:
    """Each value's text (string or binary; anything for a null value) as ``how`` says, and for
    ``checked`` which are not JSON."""
    if how.kind == "none":
        return pa.nulls(len(values), pa.string()), None
    if how.kind == "own":
        return values, None
    if how.kind == "checked":
        texts = values.cast(pa.string())
        return texts, not_json(texts)
    if how.kind == "text":
        if nested(values.type):
            return json_values(values, keep_nulls=True), None
        return cast_text(values), None
    if how.kind == "json":
        return json_values(values), None
    if how.kind == "connect":
        return connect_payloads(values), None
    if how.kind == "envelope":
        return pc.binary_join_element_wise(how.head, connect_payloads(values), "}", ""), None
    raise ValueError(f"no such text: {how.kind!r}")


def spark_held(values: pa.Array) -> pa.Array:
    """``values`` as Spark holds them: timestamps in microseconds at any depth (finer ones
    truncated, as Spark takes them); other types as they are."""
    held = spark_held_type(values.type)
    return values if held == values.type else values.cast(held, safe=False)


def spark_held_type(kind: pa.DataType) -> pa.DataType:
    """``kind`` with its timestamps in microseconds (``spark_held``)."""
    if pa.types.is_timestamp(kind):
        return pa.timestamp("us", kind.tz)
    if pa.types.is_struct(kind):
        return pa.struct([f.with_type(spark_held_type(f.type)) for f in kind])
    if pa.types.is_map(kind):
        return pa.map_(kind.key_field, kind.item_field.with_type(spark_held_type(kind.item_type)))
    if pa.types.is_list(kind):
        return pa.list_(kind.value_field.with_type(spark_held_type(kind.value_type)))
    if pa.types.is_large_list(kind):
        return pa.large_list(kind.value_field.with_type(spark_held_type(kind.value_type)))
    return kind


def writable(kind: pa.DataType, *, connect: bool) -> bool:
    """Whether the encoder writes values of ``kind`` (``spark_held``) as JSON: Spark's types (signed
    integers, float and double, booleans, text, binary, dates, timestamps of any unit, decimals of
    up to 128 bits) and structs, lists and maps of them; a map's keys text where it is written in
    Connect's form (``connect``: Connect maps have string keys), or any such scalar in Spark's."""
    if pa.types.is_struct(kind):
        return all(writable(f.type, connect=connect) for f in kind)
    if pa.types.is_map(kind):
        keys = kind.key_type
        text_keys = pa.types.is_string(keys) or pa.types.is_large_string(keys)
        fits = text_keys if connect else not nested(keys) and writable(keys, connect=connect)
        return fits and writable(kind.item_type, connect=connect)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return writable(kind.value_type, connect=connect)
    return any(
        check(kind)
        for check in (
            pa.types.is_signed_integer, pa.types.is_boolean, pa.types.is_float32, pa.types.is_float64,
            pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary,
            pa.types.is_date32, pa.types.is_timestamp, pa.types.is_decimal128,
        )
    )  # fmt: skip


def nested(kind: pa.DataType) -> bool:
    """Whether ``kind`` is a struct, a list or a map."""
    return (
        pa.types.is_struct(kind)
        or pa.types.is_map(kind)
        or pa.types.is_list(kind)
        or (pa.types.is_large_list(kind))
    )


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
            return values.cast(pa.timestamp("us"), safe=False).cast(pa.int64())
        text = values.cast(pa.timestamp("us", "UTC"), safe=False).cast(
            pa.string()
        )  # "2024-02-29 23:59:59.123456Z"
        return pc.replace_substring(text, " ", "T", max_replacements=1)
    if pa.types.is_date32(kind):
        return values.cast(pa.int32())
    if pa.types.is_decimal(kind):
        return base64_columns.texts(base64_columns.decimal_bytes(values))
    return values


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
    mark of a null value, before the fixed extra properties: the order earlier releases wrote)."""
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


def sharded(messages: pa.Table, queues: tuple[str, ...], pinned: Mapping[str, int] | None = None) -> pa.Table:
    """``messages`` with the ``queue`` each goes to (an index into ``queues``): its partition's
    where ``pinned`` names one, else ``crc32(key) % queues`` for a keyed message (its source
    partition's for a keyless one), and every queue for a barrier, each copy labelled ``<i>/<n>``
    with the list of queues sent to (connectors.barriers)."""
    count = len(queues)
    n = messages.num_rows
    if n == 0:
        return messages.append_column("queue", pa.array([], pa.int32()))
    keys = pc.coalesce(messages.column("keys"), messages.column("partition")).combine_chunks()
    slots = key_slots(keys, count).astype(np.int32)
    if pinned:
        names, indexes = zip(*sorted(pinned.items()), strict=True)
        partitions = messages.column("partition").combine_chunks()
        at = np.asarray(pc.fill_null(pc.index_in(partitions, value_set=pa.array(names, pa.string())), -1))
        slots = np.where(at >= 0, np.asarray(indexes, np.int32)[np.maximum(at, 0)], slots)
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
