"""Connect JSON envelopes decoded in Arrow where the sink's stages read them.

A sink task that has met its topics' envelope schemas knows each body's prefix byte for byte
(``{"schema":…,"payload":``, envelopes.SeenPrefixes) and the type of every payload. Decoding such
a batch needs no JSON parser over the schema and no expression engine: the payloads are cut out
of the bodies in Arrow and parsed by Arrow's JSON reader against the payload's wire type
(connect_json.wire_type), then turned into Spark's types (Kafka's base64 decimals and bytes,
epoch days and micros, epoch-millis instants) column by column.

A record it cannot read is flagged in the error column (records.ERROR_COLUMN) with the text that
names why, its value null, and the runtime fails the task or dead-letters it
(connectors.sink_stages): a body that is not UTF-8, not an envelope, of a schema that is not a
Connect schema, or whose payload does not fit its type. Which payloads do not fit is found by
parsing halves of a group that failed, so a good batch is parsed in one go. An envelope laid out
otherwise than Kafka's JsonConverter writes it (keys in another order, whitespace) is rewritten in
that layout first (``relaid``; only such bodies pay a Python parse). A body of a schema not met
raises ``UnmetSchemaError``, and the stages learn its schema.

An instant is read in two forms: Kafka's epoch millis and the ISO-8601 form Sluice's converter
writes (zone as an offset or Z); another text form does not fit its type.

Pure pyarrow: the decoder is planned on the driver (``plan_decoder``, from Arrow types) and runs
where the stages run, in the worker or in a Spark task.
"""

from __future__ import annotations

import base64
import binascii
import json
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
from sluice.connectors.connect_schemas import PAYLOAD_KEY, SCHEMA_KEY
from sluice.connectors.record_tables import flagged
from sluice.connectors.records import ERROR_COLUMN

#: An instant as Sluice's converter writes it (connect_json's ISO form, zone as an offset or Z).
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


class _Unfit(ValueError):
    """Payloads that do not all fit their type (``EnvelopeDecoder._fitted`` finds which)."""


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
    #: how flags name the text (``body``, ``key``), the setting that asked for envelopes, the type
    what: str = "body"
    setting: str = "value.converter.schemas.enable"
    type_name: str = ""
    #: heads met whose schema is not a Connect schema, per topic, with why (their records are flagged)
    refused: tuple[tuple[str, bytes, str], ...] = ()
    #: the payloads are not objects: each is parsed as field ``v`` of an object around it
    wrapped: bool = False

    def decode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` with ``body`` replaced by ``value`` (null for tombstones, null bodies and
        flagged records) and the error column."""
        body = batch.column("body")
        texts, not_text = utf8_texts(body)
        live = pc.and_(pc.is_valid(body), pc.invert(self._tombstones(batch.column("properties"))))
        errors = flagged(None, pc.and_(live, not_text), f"json converter: {self.what} is not UTF-8")
        texts = relaid(texts)
        laid_out = pc.fill_null(is_laid_out(texts), False)
        errors = flagged(errors, pc.and_(live, pc.invert(laid_out)), self._not_an_envelope)
        live = pc.and_(live, laid_out)
        topics = batch.column("topic")
        matched = pa.array(np.zeros(len(batch), bool))
        groups: list[tuple[bytes, pa.Array]] = []
        for topic, head, reason in [(t, h, "") for t, h in self.heads] + list(self.refused):
            mask = pc.fill_null(
                pc.and_(pc.and_(live, pc.equal(topics, topic)), pc.starts_with(texts, head.decode("utf-8"))),
                False,
            )
            if pc.any(mask).as_py():
                matched = pc.or_(matched, mask)
                if reason:
                    errors = flagged(errors, mask, reason)
                else:
                    groups.append((head, mask))
        unmatched = pc.and_(live, pc.invert(matched))
        if pc.any(unmatched).as_py():  # the stages learn the batch's schemas and run it again
            raise UnmetSchemaError(Where(batch).first(unmatched))
        value, unfit = self._values(texts.cast(pa.binary()), groups, len(batch))
        errors = flagged(
            errors, unfit, f"json converter: {self.what} envelope does not parse as {self.type_name}"
        )
        names = [n for n in batch.schema.names if n != "body"]
        arrays = [batch.column(n) for n in names] + [value, errors]
        return pa.RecordBatch.from_arrays(arrays, names=[*names, "value", ERROR_COLUMN])

    @property
    def _not_an_envelope(self) -> str:
        return (
            f'json converter: {self.what} is not a Connect JSON envelope {{"schema", "payload"}}, as '
            f"{self.setting}=true expects (set it to false for plain JSON)"
        )

    @property
    def _value_type(self) -> pa.DataType:
        return self.value.field(0).type if self.wrapped else self.value

    def _tombstones(self, properties: pa.Array) -> pa.Array:
        marked = pc.map_lookup(properties, self.tombstone, "first")
        return pc.fill_null(pc.equal(marked, "true"), False)

    def _values(
        self, texts: pa.Array, groups: Sequence[tuple[bytes, pa.Array]], rows: int
    ) -> tuple[pa.Array, pa.Array]:
        """Each group's payloads parsed and converted, scattered back to their rows (null
        elsewhere), and which rows' payloads do not fit."""
        unfit = np.zeros(rows, bool)
        if not groups:
            return pa.nulls(rows, self._value_type), pa.array(unfit)
        parts, positions = [], []
        for head, mask in groups:
            payloads = pc.binary_slice(texts.filter(mask), len(head), -1)  # cut the envelope's final }
            values, failed = self._fitted(payloads)
            parts.append(values)
            where = pc.indices_nonzero(mask).to_numpy()
            positions.append(where)
            unfit[where[failed]] = True
        values = pa.concat_arrays(parts) if len(parts) > 1 else parts[0]
        order = np.concatenate(positions)
        if len(values) == rows and len(positions) == 1:
            return values, pa.array(unfit)
        # row r takes values[k] where order[k] == r; rows in no group stay null
        index = np.full(rows, -1, dtype=np.int64)
        index[order] = np.arange(len(order))
        return values.take(pa.array(index, mask=index < 0)), pa.array(unfit)

    def _fitted(self, payloads: pa.Array) -> tuple[pa.Array, np.ndarray]:
        """The payloads parsed and converted, and which do not fit (their values null): all at
        once, and only where that fails, by halves down to single payloads."""
        try:
            return self._parsed(payloads), np.zeros(len(payloads), bool)
        except _Unfit:
            if len(payloads) == 1:
                return pa.nulls(1, self._value_type), np.ones(1, bool)
        half = len(payloads) // 2
        (left, left_unfit), (right, right_unfit) = (
            self._fitted(payloads.slice(0, half)), self._fitted(payloads.slice(half))
        )  # fmt: skip
        return pa.concat_arrays([left, right]), np.concatenate([left_unfit, right_unfit])

    def _parsed(self, payloads: pa.Array) -> pa.Array:
        parts = (
            [pa.scalar(b'{"v":'), payloads, pa.scalar(b"}\n")]
            if self.wrapped
            else [payloads, pa.scalar(b"\n")]
        )
        lines = pc.binary_join_element_wise(*parts, pa.scalar(b""))
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
            raise _Unfit(str(exc)) from None
        if table.num_rows != len(payloads):  # a payload of several JSON values, or of none
            raise _Unfit("payloads are not one JSON object each")
        wire = pa.StructArray.from_arrays(
            [table.column(f.name).combine_chunks() for f in self.wire], fields=list(self.wire)
        )
        try:
            converted = _converted(wire, self.value)
        except (pa.ArrowInvalid, ValueError) as exc:  # a value out of its type's range
            raise _Unfit(str(exc)) from None
        return converted.field(0) if self.wrapped else converted


class Where:
    """Names a batch's record: its topic, queue and offset."""

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


def utf8_texts(bodies: pa.Array) -> tuple[pa.Array, pa.Array]:
    """The bodies as text, null where one is not UTF-8, and which are not (looked for body by
    body only once the whole column is known to hold one)."""
    try:
        return bodies.cast(pa.string()), pa.array(np.zeros(len(bodies), bool))  # validates UTF-8
    except pa.ArrowInvalid:
        pass

    def bad(body: bytes | None) -> bool:
        try:
            (body or b"").decode("utf-8")
        except UnicodeDecodeError:
            return True
        return False

    not_text = pa.array([bad(b) for b in bodies.to_pylist()])
    kept = pc.if_else(not_text, pa.scalar(None, bodies.type), pa.concat_arrays([bodies]))
    return kept.cast(pa.string()), not_text


def is_laid_out(texts: pa.Array) -> pa.Array:
    """Whether each text starts as Kafka's JsonConverter lays an envelope out: ``{"schema":``,
    then somewhere ``,"payload":`` (connect_schemas.envelope_schemas tells why that is exact)."""
    return pc.and_(
        pc.starts_with(texts, SCHEMA_KEY), pc.greater_equal(pc.find_substring(texts, PAYLOAD_KEY), 0)
    )


def relaid(texts: pa.Array) -> pa.Array:
    """``texts`` with each envelope laid out otherwise (keys in another order, whitespace, a line
    break) rewritten as Kafka's JsonConverter lays it out; a text that is no envelope stays as it is
    (the decoder flags it). Only such texts are parsed here, one by one."""
    odd = pc.fill_null(
        pc.or_(pc.invert(is_laid_out(texts)), pc.match_substring_regex(texts, "[\r\n]")), False
    )
    if not pc.any(odd).as_py():
        return texts
    rewritten = [_in_kafka_layout(text) for text in texts.filter(odd).to_pylist()]
    return pc.replace_with_mask(texts, odd, pa.array(rewritten, pa.string()))


def _in_kafka_layout(text: str) -> str:
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    if not isinstance(parsed, dict) or set(parsed) != {"schema", "payload"}:
        return text
    schema, payload = (
        json.dumps(parsed[k], separators=(",", ":"), ensure_ascii=False) for k in ("schema", "payload")
    )
    return f"{SCHEMA_KEY}{schema}{PAYLOAD_KEY}{payload}}}"


def _converted(wire: pa.Array, target: pa.DataType) -> pa.Array:
    """``wire`` (the payload as JSON typed it) as ``target`` (Spark's Arrow type); see
    ``plan_decoder`` for the pairs there are."""
    if wire.type == target:
        return wire
    if pa.types.is_struct(target):
        assert isinstance(wire, pa.StructArray)
        children = [_converted(wire.field(i), target.field(i).type) for i in range(target.num_fields)]
        return pa.StructArray.from_arrays(
            children, fields=[target.field(i) for i in range(target.num_fields)], mask=wire.is_null()
        )
    if pa.types.is_list(target):
        assert isinstance(wire, pa.ListArray)
        items = _converted(wire.flatten(), target.value_type)
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


def plan_decoder(
    heads: Sequence[tuple[str, str]],
    wire: pa.DataType,
    value: pa.DataType,
    tombstone: str,
    *,
    type_name: str,
    what: str = "body",
    setting: str = "value.converter.schemas.enable",
    refused: Sequence[tuple[str, str, str]] = (),
) -> EnvelopeDecoder | None:
    """A decoder for envelopes starting with ``heads`` (``(topic, schema prefix)`` pairs, as
    SeenPrefixes keeps them) whose payload's wire type is ``wire`` and Spark type ``value``, both
    in Arrow with every field nullable (as Spark's parse types a payload); ``refused``: prefixes
    whose schema is not a Connect schema, with why. A payload that is not an object (a Connect
    ``string`` or ``int64`` schema) is read as the one field of an object wrapped around it.
    None where Arrow's JSON reader cannot read the wire type: a map.
    ``tombstone``: the message property that marks a null value; ``type_name`` the value type
    as flags name it, ``what`` and ``setting`` the text and the setting that asked for envelopes."""
    wrapped = not pa.types.is_struct(value)
    if wrapped:
        wire, value = pa.struct([pa.field("v", wire)]), pa.struct([pa.field("v", value)])
    if not pa.types.is_struct(wire) or not _decodable(wire, value):
        return None
    assert isinstance(wire, pa.StructType) and isinstance(value, pa.StructType)

    def head(prefix: str) -> bytes:
        return (prefix + PAYLOAD_KEY).encode("utf-8")

    return EnvelopeDecoder(
        tuple((topic, head(prefix)) for topic, prefix in heads), wire, value, tombstone,
        what=what, setting=setting, type_name=type_name,
        refused=tuple((topic, head(prefix), reason) for topic, prefix, reason in refused),
        wrapped=wrapped,
    )  # fmt: skip


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
