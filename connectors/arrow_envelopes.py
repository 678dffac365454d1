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

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors.arrow_bodies import live_texts
from sluice.connectors.arrow_json import (
    by_halves,
    converted,
    decodable,
    holds_map,
    json_lines,
    read_lines,
    read_types,
)
from sluice.connectors.connect_schemas import PAYLOAD_KEY, SCHEMA_KEY
from sluice.connectors.record_tables import flagged
from sluice.connectors.records import ERROR_COLUMN


class UnmetSchemaError(RuntimeError):
    """A body of an envelope schema not met before, naming the first such record (the sink's
    stages catch it: connectors.sink_stages.Unmet)."""

    def __init__(self, where: str) -> None:
        super().__init__(f"an envelope schema not met in earlier batches (first at {where})")


@dataclass(frozen=True)
class EnvelopeDecoder:
    """Decodes a reader batch's ``body`` into a typed ``value`` column (see the module docstring).

    ``heads``: per topic, the texts its bodies start with up to their payload (one per schema
    met); ``wire``: the payload's JSON types; ``value``: the Arrow form of the Spark value type.
    """

    heads: tuple[tuple[str, str], ...]
    wire: pa.DataType
    value: pa.DataType
    #: the message property that marks a null value (converters.TOMBSTONE_PROPERTY)
    tombstone: str
    #: how flags name the text (``body``, ``key``), the setting that asked for envelopes, the type
    what: str = "body"
    setting: str = "value.converter.schemas.enable"
    type_name: str = ""
    #: the types the JSON reader is given for ``wire``, in turn (arrow_json.read_types)
    reads: tuple[pa.DataType, ...] = ()
    #: heads met whose schema is not a Connect schema, per topic, with why (their records are flagged)
    refused: tuple[tuple[str, str, str], ...] = ()

    def decode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` with ``body`` replaced by ``value`` (null for tombstones, null bodies and
        flagged records) and the error column."""
        texts, not_text = live_texts(batch, self.tombstone)
        errors = flagged(None, not_text, f"json converter: {self.what} is not UTF-8")
        live, topics = pc.is_valid(texts), batch.column("topic")
        matched, groups, refused = self._groups(topics, texts, live)
        rest = pc.and_(live, pc.invert(matched))
        if pc.any(rest).as_py():  # bodies laid out otherwise, of a schema not met, or no envelope: rare
            texts = relaid(texts, rest)
            matched, groups, refused = self._groups(topics, texts, live)
            rest = pc.and_(live, pc.invert(matched))
            laid_out = pc.fill_null(is_laid_out(texts), False)
            errors = flagged(errors, pc.and_(rest, pc.invert(laid_out)), self._not_an_envelope)
            unmet = pc.and_(rest, laid_out)
            if pc.any(unmet).as_py():  # the stages learn the batch's schemas and run it again
                raise UnmetSchemaError(Where(batch).first(unmet))
        for reason, mask in refused:
            errors = flagged(errors, mask, reason)
        value, unfit = self._values(texts, groups, len(batch))
        errors = flagged(
            errors, unfit, f"json converter: {self.what} envelope does not parse as {self.type_name}"
        )
        names = [n for n in batch.schema.names if n != "body"]
        arrays = [batch.column(n) for n in names] + [value, errors]
        return pa.RecordBatch.from_arrays(arrays, names=[*names, "value", ERROR_COLUMN])

    def _groups(
        self, topics: pa.Array, texts: pa.Array, live: pa.Array
    ) -> tuple[pa.Array, list[tuple[str, pa.Array]], list[tuple[str, pa.Array]]]:
        """Which live texts start with a head met (a byte comparison), the rows of each head read
        (``(head, mask)``) and of each refused one (``(why, mask)``)."""
        matched = pa.array(np.zeros(len(texts), bool))
        groups: list[tuple[str, pa.Array]] = []
        refused: list[tuple[str, pa.Array]] = []
        for topic, head, reason in [(t, h, "") for t, h in self.heads] + list(self.refused):
            mask = pc.fill_null(
                pc.and_(pc.and_(live, pc.equal(topics, topic)), pc.starts_with(texts, head)), False
            )
            if pc.any(mask).as_py():
                matched = pc.or_(matched, mask)
                (refused if reason else groups).append((reason or head, mask))
        return matched, groups, refused

    @property
    def _not_an_envelope(self) -> str:
        return (
            f'json converter: {self.what} is not a Connect JSON envelope {{"schema", "payload"}}, as '
            f"{self.setting}=true expects (set it to false for plain JSON)"
        )

    def _values(
        self, texts: pa.Array, groups: Sequence[tuple[str, pa.Array]], rows: int
    ) -> tuple[pa.Array, pa.Array]:
        """Each group's payloads parsed and converted at their rows (null elsewhere), and which
        rows' payloads do not fit."""
        value, unfit = pa.nulls(rows, self.value), np.zeros(rows, bool)
        data = texts.cast(pa.binary())  # the same buffers: sliced by bytes, not by characters
        for head, mask in groups:
            payloads = pc.binary_slice(data, len(head.encode()), -1)  # cut the envelope's final }
            values, failed = by_halves(payloads, mask, self._parsed, self.value, self._alone)
            value = values if len(groups) == 1 else pc.if_else(mask, values, value)
            unfit |= failed
        return value, pa.array(unfit)

    def _alone(self, payload: bytes) -> pa.Array | None:
        """A payload that does not read alone, read once more written compact: a line break (in
        valid JSON only whitespace) makes the reader take each line for a record."""
        try:
            compact = json.dumps(json.loads(payload), separators=(",", ":"), ensure_ascii=False)
        except (ValueError, RecursionError):
            return None
        return self._parsed(pa.array([compact.encode()], pa.binary()))

    def _parsed(self, payloads: pa.Array) -> pa.Array | None:
        """Payloads as their value type, or None when one does not fit: read as each of ``reads``
        in turn (arrow_json.read_types), then converted."""
        for kind in self.reads:
            wire = self._read(payloads, kind)
            if wire is not None:
                break
        else:
            return None
        try:
            return converted(wire.cast(self.wire), self.value)
        except (pa.ArrowInvalid, ValueError):  # a value out of its type's range or form
            return None

    def _read(self, payloads: pa.Array, kind: pa.DataType) -> pa.Array | None:
        """Payloads read as ``kind``; a type holding a map payload by payload (Arrow's JSON reader
        has no map type)."""
        if holds_map(kind):
            try:
                parsed = [json.loads(p) for p in payloads.to_pylist()]
                return pa.array(parsed, kind) if all(_fits(v, kind) for v in parsed) else None
            except (ValueError, TypeError, pa.ArrowInvalid, pa.ArrowTypeError):
                return None
        table = read_lines(json_lines(payloads), pa.schema([pa.field("v", kind)]))
        return None if table is None else table.column("v").combine_chunks()


def _fits(value: object, kind: pa.DataType) -> bool:
    """Whether a parsed JSON value is of ``kind`` as Arrow's JSON reader takes it (``pa.array``
    alone would truncate 1.5 into an integer): a type holding a map is read this way."""
    if value is None:
        return True
    if pa.types.is_struct(kind):
        fields = {kind.field(i).name: kind.field(i).type for i in range(kind.num_fields)}
        return isinstance(value, dict) and all(_fits(v, fields[k]) for k, v in value.items() if k in fields)
    if pa.types.is_list(kind):
        return isinstance(value, list) and all(_fits(v, kind.value_type) for v in value)
    if pa.types.is_map(kind):
        return isinstance(value, dict) and all(_fits(v, kind.item_type) for v in value.values())
    if pa.types.is_integer(kind):
        return isinstance(value, int) and not isinstance(value, bool)
    if pa.types.is_floating(kind):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if pa.types.is_boolean(kind):
        return isinstance(value, bool)
    return isinstance(value, str)


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


def is_laid_out(texts: pa.Array) -> pa.Array:
    """Whether each text starts as Kafka's JsonConverter lays an envelope out: ``{"schema":``,
    then somewhere ``,"payload":`` (connect_schemas.envelope_schemas tells why that is exact)."""
    return pc.and_(
        pc.starts_with(texts, SCHEMA_KEY), pc.greater_equal(pc.find_substring(texts, PAYLOAD_KEY), 0)
    )


def relaid(texts: pa.Array, rows: pa.Array) -> pa.Array:
    """``texts`` with each of ``rows`` that is an envelope laid out otherwise (keys in another
    order, whitespace, a line break) rewritten as Kafka's JsonConverter lays it out; a text that is
    no envelope stays as it is (the decoder flags it). Only such texts are parsed, one by one."""
    at = pc.indices_nonzero(pc.fill_null(rows, False))
    if not len(at):
        return texts
    chosen = texts.take(at)
    odd = pc.fill_null(
        pc.or_(pc.invert(is_laid_out(chosen)), pc.match_substring_regex(chosen, "[\r\n]")), False
    )
    if not pc.any(odd).as_py():
        return texts
    rewritten = [_in_kafka_layout(text) for text in chosen.filter(odd).to_pylist()]
    mask = np.zeros(len(texts), bool)
    mask[at.to_numpy()[np.asarray(odd)]] = True
    return pc.replace_with_mask(texts, pa.array(mask), pa.array(rewritten, pa.string()))


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
    ``string`` or ``int64`` schema) is read as well as an object.
    A Connect map (text keys) is read by a parse per payload, which Arrow's JSON reader has no
    map type for; None for a type it does not read.
    ``tombstone``: the message property that marks a null value; ``type_name`` the value type
    as flags name it, ``what`` and ``setting`` the text and the setting that asked for envelopes."""
    if not decodable(wire, value, maps=True):
        return None

    def head(prefix: str) -> str:
        return prefix + PAYLOAD_KEY

    return EnvelopeDecoder(
        tuple((topic, head(prefix)) for topic, prefix in heads), wire, value, tombstone,
        what=what, setting=setting, type_name=type_name, reads=read_types(wire, value),
        refused=tuple((topic, head(prefix), reason) for topic, prefix, reason in refused),
    )  # fmt: skip
