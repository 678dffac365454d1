"""JSON in Arrow, the kernels a sink's decoders share (connectors.arrow_envelopes, arrow_json_bodies).

Texts are read by Arrow's JSON reader in one block, each as the line ``{"v":<text>}`` (the reader
reads objects only, and a buffer that starts with a bare ``null`` crashes pyarrow 21's), against an
explicit schema; ``by_halves`` reads a batch's texts at once and, only where that fails, halves
of them, so a good batch is one read and k bad texts cost O(k log n) reads. ``converted`` turns
the JSON wire forms of Connect's types (connect_json.wire_type: base64 decimals and bytes, epoch
days and micros, instants as epoch millis or ISO-8601) into the record's Arrow types, column by
column. Pure pyarrow and numpy.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from sluice.connectors import base64_columns
from sluice.connectors.connect_json import decimal_from_text

#: An instant as Sluice's converter writes it (connect_json's ISO form, zone as an offset or Z).
_ISO_INSTANT: Final = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})$"
)


def json_lines(texts: pa.Array) -> pa.Array:
    """Each text (string or binary) as the line ``{"v":<text>}``, back to back in one buffer."""
    head, tail, none = ('{"v":', "}\n", "") if pa.types.is_string(texts.type) else (b'{"v":', b"}\n", b"")
    return pc.binary_join_element_wise(head, texts, tail, none)


def read_lines(lines: pa.Array, schema: pa.Schema) -> pa.Table | None:
    """``json_lines`` read in one block against ``schema`` (other fields ignored); None unless they
    read as one JSON object each."""
    _, offsets, data = lines.buffers()
    start, end = (int(o) for o in np.frombuffer(offsets, np.int32, len(lines) + 1, lines.offset * 4)[[0, -1]])
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    try:
        table = pj.read_json(
            pa.BufferReader(data.slice(start, end - start) if data is not None else b""),
            read_options=pj.ReadOptions(use_threads=False, block_size=end - start + 1),
            parse_options=options,
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return table if table.num_rows == len(lines) else None


#: What a decoder makes of texts in one go, or of one text alone: values, or None when they fail.
Block = Callable[[pa.Array], "pa.Array | None"]
Alone = Callable[[Any], "pa.Array | None"]


def by_halves(
    texts: pa.Array, read: pa.Array, block: Block, kind: pa.DataType, alone: Alone | None = None
) -> tuple[pa.Array, np.ndarray]:
    """``block`` over the ``read`` texts, halving where it fails; a text that fails alone gets
    ``alone``, and fails if that fails too. The values at their rows (null elsewhere), and which
    rows failed."""
    whole = read.null_count == 0 and pc.all(read).as_py()  # every text: no filter, no scatter
    chosen = texts if whole else texts.filter(read)
    pieces: list[pa.Array] = []
    bad: list[int] = []
    todo = [(0, len(chosen))]
    while todo:
        start, stop = todo.pop()
        got = block(chosen.slice(start, stop - start)) if stop > start else pa.nulls(0, kind)
        if got is None and stop - start == 1:
            got = alone(chosen[start].as_py()) if alone is not None else None
            if got is None:
                bad.append(start)
                got = pa.nulls(1, kind)
        if got is None:
            middle = (start + stop) // 2
            todo += [(middle, stop), (start, middle)]  # the first half next: pieces stay in order
        else:
            pieces.append(got)
    values = pa.concat_arrays(pieces) if len(pieces) > 1 else pieces[0]
    failed = np.zeros(len(texts), bool)
    if whole:
        failed[bad] = True
        return values, failed
    rows = pc.indices_nonzero(read).to_numpy()
    failed[rows[bad]] = True
    index = np.full(len(texts), -1, np.int64)
    index[rows] = np.arange(len(rows))
    return values.take(pa.array(index, mask=index < 0)), failed


def read_types(wire: pa.DataType, value: pa.DataType) -> tuple[pa.DataType, ...]:
    """The types the reader is given for ``wire`` (read in turn until one reads a chunk, then cast
    to ``wire``): instants as text, then as numbers (Kafka's Timestamp is epoch millis, a JSON
    number; Sluice writes ISO text), and decimals of 38 digits (the reader does not check their
    precision, the cast to ``wire`` does)."""
    return tuple(dict.fromkeys(_read_type(wire, value, millis) for millis in (False, True)))


def _read_type(wire: pa.DataType, value: pa.DataType, millis: bool) -> pa.DataType:
    """``wire`` as the reader is told it: decimals of 38 digits (it does not check their precision,
    the cast to ``wire`` does), and where ``millis`` instants as numbers (Kafka's Timestamp; they
    cast back to their digits)."""
    if pa.types.is_struct(value):
        return pa.struct(
            [w.with_type(_read_type(w.type, v.type, millis)) for w, v in zip(wire, value, strict=True)]
        )
    if pa.types.is_list(value):
        return pa.list_(wire.value_field.with_type(_read_type(wire.value_type, value.value_type, millis)))
    if pa.types.is_map(value):
        return pa.map_(wire.key_type, _read_type(wire.item_type, value.item_type, millis))
    if pa.types.is_decimal(wire):
        return pa.decimal128(38, wire.scale)
    return pa.int64() if millis and pa.types.is_timestamp(value) and value.tz is not None else wire


def converted(wire: pa.Array, target: pa.DataType) -> pa.Array:
    """``wire`` (the payload as JSON typed it) as ``target`` (the record's Arrow type); raises
    ValueError (or ArrowInvalid) for a value that does not convert. ``decodable`` tells the pairs."""
    if wire.type == target:
        return wire
    if pa.types.is_struct(target):
        assert isinstance(wire, pa.StructArray)
        children = [converted(wire.field(i), target.field(i).type) for i in range(target.num_fields)]
        return pa.StructArray.from_arrays(
            children, fields=[target.field(i) for i in range(target.num_fields)], mask=wire.is_null()
        )
    if pa.types.is_list(target):
        assert isinstance(wire, pa.ListArray)
        items = converted(wire.flatten(), target.value_type)
        offsets = pc.subtract(wire.offsets, wire.offsets[0])
        return pa.ListArray.from_arrays(offsets, items, type=target, mask=wire.is_null())
    if pa.types.is_map(target):
        assert isinstance(wire, pa.MapArray)
        start, end = wire.offsets[0].as_py(), wire.offsets[-1].as_py()
        items = converted(wire.items.slice(start, end - start), target.item_type)
        offsets = pc.subtract(wire.offsets, start)
        keys = wire.keys.slice(start, end - start)
        return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=wire.is_null())
    if pa.types.is_timestamp(target) and pa.types.is_integer(wire.type):  # zone-less: epoch micros
        return wire.cast(pa.int64()).cast(target)
    if pa.types.is_date32(target):  # epoch days
        return wire.cast(target)
    if pa.types.is_timestamp(target):  # an instant: Kafka's epoch millis, or ISO-8601 as Sluice writes it
        digits = pc.match_substring_regex(wire, r"^-?[0-9]+$")
        iso = pc.match_substring_regex(wire, _ISO_INSTANT)
        if pc.any(pc.invert(pc.fill_null(pc.or_(digits, iso), True))).as_py():  # no pc.all: null when empty
            raise ValueError("an instant in another form")
        text = pa.scalar(None, pa.string())
        millis = pc.if_else(digits, wire, text).cast(pa.int64()).cast(pa.timestamp("ms", tz=target.tz))
        return pc.if_else(digits, millis.cast(target), pc.if_else(iso, wire, text).cast(target))
    if pa.types.is_binary(target):
        fast = base64_columns.binaries(wire)
        return fast if fast is not None else pa.array([_unbase64(t) for t in wire.to_pylist()], target)
    if pa.types.is_decimal(target):
        return _decimals(wire, target)
    raise ValueError(f"no Arrow decode of {wire.type} as {target}")  # plan_decoder refuses these


def _unbase64(text: str | None) -> bytes | None:
    if text is None:
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("bytes that are not base64") from None


def _decimals(wire: pa.Array, target: pa.Decimal128Type) -> pa.Array:
    """Kafka's Decimal payloads as ``target`` (connect_json.decimal_from_text, as Spark's decode):
    column-wise (base64_columns), or value by value where that declines, naming the value."""
    fast = base64_columns.decimals(wire, target)
    if fast is not None:
        return fast
    out: list[Decimal | None] = []
    for text in wire.to_pylist():
        value = None if text is None else decimal_from_text(text, target.precision, target.scale)
        if text is not None and value is None:
            _unbase64(text)  # text that is not base64 is said so, as for bytes
            raise ValueError(f"a decimal that does not fit {target}")
        out.append(value)
    return pa.array(out, target)


def decodable(wire: pa.DataType, value: pa.DataType, *, maps: bool = False) -> bool:
    """Whether Arrow's JSON reader reads ``wire`` as ``_converted`` turns it into ``value``; with
    ``maps``, maps of text keys too (which only a parse per payload reads: ``holds_map``)."""
    if pa.types.is_map(value):
        return (
            maps and pa.types.is_map(wire) and pa.types.is_string(wire.key_type)
            and decodable(wire.item_type, value.item_type, maps=maps)
        )  # fmt: skip
    if pa.types.is_struct(value):
        return (
            pa.types.is_struct(wire)
            and wire.num_fields == value.num_fields
            and all(
                wire.field(i).name == value.field(i).name
                and decodable(wire.field(i).type, value.field(i).type, maps=maps)
                for i in range(value.num_fields)
            )
        )
    if pa.types.is_list(value):
        return pa.types.is_list(wire) and decodable(wire.value_type, value.value_type, maps=maps)
    if wire == value:
        return (
            pa.types.is_integer(value) or pa.types.is_floating(value) or pa.types.is_boolean(value)
            or pa.types.is_string(value)
        )  # fmt: skip
    if pa.types.is_timestamp(value):
        return pa.types.is_int64(wire) if value.tz is None else pa.types.is_string(wire)
    if pa.types.is_date32(value):
        return pa.types.is_int32(wire)
    return (pa.types.is_binary(value) or pa.types.is_decimal(value)) and pa.types.is_string(wire)


def holds_map(kind: pa.DataType) -> bool:
    """Whether a type has a map anywhere in it."""
    if pa.types.is_map(kind):
        return True
    if pa.types.is_struct(kind):
        return any(holds_map(kind.field(i).type) for i in range(kind.num_fields))
    return pa.types.is_list(kind) and holds_map(kind.value_type)
