"""Connect JSON envelopes of schemas already met, decoded in Arrow where the sink's read pulls them.

A sink task that has met its topics' envelope schemas knows each body's prefix byte for byte
(``{"schema":…,"payload":``, envelopes.SeenPrefixes) and the type of every payload. Decoding such
a batch needs no JSON parser over the schema and none of Spark's expression engine: the payloads
are cut out of the bodies in Arrow and parsed by Arrow's JSON reader against the payload's wire
type (connect_json.wire_type), then turned into Spark's types (Kafka's base64 decimals and bytes,
epoch days and micros, epoch-millis instants) column by column.

The decoder only ever *declines*: a body it cannot decode exactly as Spark's parse would (not
UTF-8, a payload that does not fit the wire type, an instant in a text form other than Sluice's)
raises ``DeclinedError`` naming the first such record, and the sink's stages say so with a typed
outcome (connectors.sink_stages.Declined): the runner decodes the batch through Spark, which
flags or reads it as it always did. A body of a schema not met raises ``UnmetSchemaError``, and
the stages learn its schema. So it adds no semantics of its own;
``tests/connectors/test_arrow_envelopes.py`` checks that what it decodes equals Spark's decode.

Pure pyarrow: the decoder is planned on the driver (``plan_decoder``, from Arrow types) and runs
inside the read's Spark task, where pyspark's types are not needed.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from sluice.connectors import base64_columns
from sluice.connectors.connect_json import decimal_from_text
from sluice.connectors.connect_schemas import PAYLOAD_KEY
from sluice.connectors.records import LeftToSpark

#: An instant as Sluice's converter writes it (connect_json's ISO form, zone as an offset or Z): the
#: one text form whose reading Arrow and Spark agree on; others are left to Spark.
_ISO_INSTANT: Final = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})$"
)
#: Bytes Arrow's JSON reader takes in one block: a batch's payloads are parsed in one go.
_BLOCK_BYTES: Final = 1 << 26


class UnmetSchemaError(RuntimeError):
    """A body of an envelope schema not met before, naming the first such record (the sink's
    stages catch it: connectors.sink_stages.Unmet)."""

    def __init__(self, where: str) -> None:
        super().__init__(f"an envelope schema not met in earlier batches (first at {where})")


class DeclinedError(LeftToSpark):
    """A batch the Arrow decode leaves to Spark's, saying why and naming a record."""


@dataclass(frozen=True)
class EnvelopeDecoder:
    """Decodes a reader batch's ``body`` into a typed ``value`` column (see the module docstring).

    ``heads``: per topic, the texts its bodies start with up to their payload (one per schema
    met); ``wire``: the payload's JSON types; ``value``: the Arrow form of the Spark value type.
    """

    heads: tuple[tuple[str, bytes], ...]
    wire: pa.StructType
    value: pa.StructType
    #: the message property that marks a null value (converters.TOMBSTONE_PROPERTY)
    tombstone: str

    def decode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` with ``body`` replaced by ``value`` (null for tombstones and null bodies)."""
        body = batch.column("body")
        where = Where(batch)
        try:
            texts = body.cast(pa.string())  # validates UTF-8
        except pa.ArrowInvalid:
            raise DeclinedError(f"a body is not UTF-8 ({where.first(not_utf8(body))})") from None
        live = pc.and_(pc.is_valid(body), pc.invert(self._tombstones(batch.column("properties"))))
        topics = batch.column("topic")
        matched = pa.array([False] * len(batch))
        groups: list[tuple[bytes, pa.Array]] = []
        for topic, head in self.heads:
            mask = pc.and_(
                pc.and_(live, pc.equal(topics, topic)), pc.starts_with(texts, head.decode("utf-8"))
            )
            mask = pc.fill_null(mask, False)
            if pc.any(mask).as_py():
                groups.append((head, mask))
                matched = pc.or_(matched, mask)
        unmatched = pc.and_(live, pc.invert(matched))
        if pc.any(unmatched).as_py():  # the sink searches the batch's schemas, as for Spark's decode
            raise UnmetSchemaError(where.first(unmatched))
        value = self._values(body, groups, where, len(batch))
        names = [n for n in batch.schema.names if n != "body"]
        return pa.RecordBatch.from_arrays([batch.column(n) for n in names] + [value], names=[*names, "value"])

    def _tombstones(self, properties: pa.Array) -> pa.Array:
        marked = pc.map_lookup(properties, self.tombstone, "first")
        return pc.fill_null(pc.equal(marked, "true"), False)

    def _values(
        self, body: pa.Array, groups: Sequence[tuple[bytes, pa.Array]], where: Where, rows: int
    ) -> pa.Array:
        """Each group's payloads parsed and converted, scattered back to their rows (null elsewhere)."""
        if not groups:
            return pa.nulls(rows, self.value)
        parts, positions = [], []
        for head, mask in groups:
            payloads = pc.binary_slice(body.filter(mask), len(head), -1)  # cut the envelope's final }
            parts.append(self._parsed(payloads, where, mask))
            positions.append(pc.indices_nonzero(mask))
        values = pa.concat_arrays(parts) if len(parts) > 1 else parts[0]
        order = pa.concat_arrays(positions) if len(positions) > 1 else positions[0]
        if len(values) == rows and len(positions) == 1:
            return values
        # row r takes values[k] where order[k] == r; rows in no group stay null
        index = np.full(rows, -1, dtype=np.int64)
        index[order.to_numpy()] = np.arange(len(order))
        return values.take(pa.array(index, mask=index < 0))

    def _parsed(self, payloads: pa.Array, where: Where, mask: pa.Array) -> pa.Array:
        lines = pc.binary_join_element_wise(payloads, pa.scalar(b"\n"), pa.scalar(b""))
        _, offset_buffer, data = lines.buffers()
        offsets = np.frombuffer(offset_buffer, np.int32, len(lines) + 1, lines.offset * 4)
        start, end = int(offsets[0]), int(offsets[-1])
        options = pj.ParseOptions(
            explicit_schema=pa.schema(list(self.wire)), unexpected_field_behavior="ignore"
        )
        try:
            table = pj.read_json(
                pa.BufferReader(data.slice(start, end - start) if data is not None else b""),
                read_options=pj.ReadOptions(use_threads=False, block_size=_BLOCK_BYTES),
                parse_options=options,
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise DeclinedError(
                f"a payload does not parse as its wire type (among {where.first(mask)} on): {exc}"
            ) from None
        if table.num_rows != len(payloads):  # a payload of several JSON values, or of none
            raise DeclinedError(f"payloads are not one JSON object each ({where.first(mask)})")
        wire = pa.StructArray.from_arrays(
            [table.column(f.name).combine_chunks() for f in self.wire], fields=list(self.wire)
        )
        try:
            return _converted(wire, self.value, where, mask)
        except pa.ArrowInvalid as exc:  # a value out of its type's range
            raise DeclinedError(f"a payload value does not convert ({where.first(mask)}): {exc}") from None


class Where:
    """Names a batch's record for a decline: its topic, queue and offset."""

    def __init__(self, batch: pa.RecordBatch) -> None:
        self.batch = batch

    def first(self, mask: pa.Array) -> str:
        hits = pc.indices_nonzero(pc.fill_null(mask, False))
        if len(hits) == 0:
            return "no record named"
        row = hits[0].as_py()
        b = self.batch
        return (
            f"topic {b.column('topic')[row].as_py()!r} queue {b.column('partition')[row].as_py()!r} "
            f"offset {b.column('queue_offset')[row].as_py()}"
        )


def not_utf8(bodies: pa.Array) -> pa.Array:
    """Which bodies are not UTF-8 (only looked for once a chunk is known to hold one)."""

    def bad(body: bytes | None) -> bool:
        try:
            (body or b"").decode("utf-8")
        except UnicodeDecodeError:
            return True
        return False

    return pa.array([bad(b) for b in bodies.to_pylist()])


def _converted(wire: pa.Array, target: pa.DataType, where: Where, mask: pa.Array) -> pa.Array:
    """``wire`` (the payload as JSON typed it) as ``target`` (Spark's Arrow type); see
    ``plan_decoder`` for the pairs there are."""
    if wire.type == target:
        return wire
    if pa.types.is_struct(target):
        assert isinstance(wire, pa.StructArray)
        children = [
            _converted(wire.field(i), target.field(i).type, where, mask) for i in range(target.num_fields)
        ]
        return pa.StructArray.from_arrays(
            children, fields=[target.field(i) for i in range(target.num_fields)], mask=wire.is_null()
        )
    if pa.types.is_list(target):
        assert isinstance(wire, pa.ListArray)
        items = _converted(wire.flatten(), target.value_type, where, mask)
        offsets = pc.subtract(wire.offsets, wire.offsets[0])
        return pa.ListArray.from_arrays(offsets, items, type=target, mask=wire.is_null())
    if pa.types.is_timestamp(target) and pa.types.is_integer(wire.type):  # zone-less: epoch micros
        return wire.cast(pa.int64()).cast(target)
    if pa.types.is_date32(target):  # epoch days
        return wire.cast(target)
    if pa.types.is_timestamp(target):  # an instant: Kafka's epoch millis, or ISO-8601 as Sluice writes it
        digits = pc.match_substring_regex(wire, r"^-?[0-9]+$")
        iso = pc.match_substring_regex(wire, _ISO_INSTANT)
        if not pc.all(pc.or_kleene(pc.or_(digits, iso), pc.is_null(wire))).as_py():
            raise DeclinedError(f"an instant in another form ({where.first(mask)})")
        text = pa.scalar(None, pa.string())
        millis = pc.if_else(digits, wire, text).cast(pa.int64()).cast(pa.timestamp("ms", tz=target.tz))
        return pc.if_else(digits, millis.cast(target), pc.if_else(iso, wire, text).cast(target))
    if pa.types.is_binary(target):
        fast = base64_columns.binaries(wire)
        return (
            fast
            if fast is not None
            else pa.array([_unbase64(t, where, mask) for t in wire.to_pylist()], target)
        )
    if pa.types.is_decimal(target):
        return _decimals(wire, target, where, mask)
    raise DeclinedError(f"no Arrow decode of {wire.type} as {target}")  # plan_decoder refuses these


def _unbase64(text: str | None, where: Where, mask: pa.Array) -> bytes | None:
    if text is None:
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise DeclinedError(f"bytes that are not base64 ({where.first(mask)})") from None


def _decimals(wire: pa.Array, target: pa.Decimal128Type, where: Where, mask: pa.Array) -> pa.Array:
    """Kafka's Decimal payloads as ``target`` (connect_json.decimal_from_text, as Spark's decode):
    column-wise (base64_columns), or value by value where that declines, naming the value."""
    fast = base64_columns.decimals(wire, target)
    if fast is not None:
        return fast
    out: list[Decimal | None] = []
    for text in wire.to_pylist():
        value = None if text is None else decimal_from_text(text, target.precision, target.scale)
        if text is not None and value is None:
            _unbase64(text, where, mask)  # declines for text that is not base64, as for bytes
            raise DeclinedError(f"a decimal that does not fit {target} ({where.first(mask)})")
        out.append(value)
    return pa.array(out, target)


def plan_decoder(
    heads: Sequence[tuple[str, str]], wire: pa.DataType, value: pa.DataType, tombstone: str
) -> EnvelopeDecoder | None:
    """A decoder for envelopes starting with ``heads`` (``(topic, schema prefix)`` pairs, as
    SeenPrefixes keeps them) whose payload's wire type is ``wire`` and Spark type ``value``, both
    in Arrow with every field nullable (as Spark's parse types a payload). None where Arrow's JSON
    reader cannot read the wire type as Spark's parse would: a value that is not a struct, a map.
    ``tombstone``: the message property that marks a null value."""
    if not (pa.types.is_struct(wire) and pa.types.is_struct(value)) or not _decodable(wire, value):
        return None
    assert isinstance(wire, pa.StructType) and isinstance(value, pa.StructType)
    encoded = tuple((topic, (prefix + PAYLOAD_KEY).encode("utf-8")) for topic, prefix in heads)
    return EnvelopeDecoder(encoded, wire, value, tombstone)


def _decodable(wire: pa.DataType, value: pa.DataType) -> bool:
    if pa.types.is_struct(value):
        return (
            pa.types.is_struct(wire)
            and wire.num_fields == value.num_fields
            and all(
                wire.field(i).name == value.field(i).name
                and _decodable(wire.field(i).type, value.field(i).type)
                for i in range(value.num_fields)
            )
        )
    if pa.types.is_list(value):
        return pa.types.is_list(wire) and _decodable(wire.value_type, value.value_type)
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
