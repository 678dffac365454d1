"""The ``json`` converter's bodies that are not envelopes of met schemas, decoded in Arrow as Spark's
decode (now gone) read them: schemaless text (``JsonTextDecoder``) and a declared
``value.converter.schema`` (``DeclaredJsonDecoder``). The source side checks and parses a text value
with the same kernels before writing it (``not_json``, ``DeclaredJsonDecoder.parse``:
connectors.arrow_messages), so what a source sends a sink reads.

Each body becomes a line ``{"v":<body>}`` of one buffer, which Arrow's JSON reader reads in one block
against an explicit schema (raw newlines stay: inside a string Arrow refuses one, as Jackson does).
A read that fails is halved until its bad records stand alone, and only those are looked at one by
one: a good batch is one read, k bad records O(k log n). A record that does not decode is flagged
in the error column with Spark's words, its value null (schemaless: its text, as Spark keeps it).

Schemaless text is checked by that read alone, nothing kept: 1.0-1.4M records/s for 100k records of
108 bytes (one thread), against 0.39M/s for a loop of ``_value_end``, 0.18M/s for ``json.loads``
(no orjson installed) and 0.05-0.15M/s for Spark's decode (``try_parse_json``). As Jackson reads a
body in Spark and in Kafka's JsonConverter, it is JSON when it starts with one JSON value
(``{"a":1} x`` is); what Arrow reads otherwise (NaN, Infinity, a root number then a comma) goes to
``_value_end``.

Differences from Spark's decode, chosen as Kafka's JsonConverter decides where it checks at all:
- schemaless, duplicate keys are JSON (Kafka keeps the last; Spark's variant refuses them);
- declared, flagged where Spark reads a value by coercion or as null, since Arrow's reader does not
  coerce (a flag is reported, a value silently changed is not): duplicate keys (Spark keeps the
  last), a non-string for a string (Spark keeps its JSON text, Kafka reads null), more fraction
  digits than a decimal's scale (Spark rounds), "NaN" text for a float, an instant neither epoch
  millis nor ISO-8601 with a zone (Spark casts other forms or fails the batch; Kafka takes only
  millis), base64 that is not canonical (Spark reads b"" or null; Kafka refuses it), an envelope's
  decimal as a JSON number (Spark reads null, Kafka the number); a flagged value is null, not a
  struct of nulls;
- Jackson's read limits (nesting deeper than 1000, numbers of over 1000 digits) do not apply.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors.arrow_bodies import live_texts
from sluice.connectors.arrow_json import by_halves, converted, decodable, json_lines, read_lines, read_types
from sluice.connectors.record_tables import flagged
from sluice.connectors.records import ERROR_COLUMN

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

NOT_UTF8: Final = "json converter: body is not UTF-8"
NOT_JSON: Final = "json converter: body is not valid JSON"
_WS: Final = " \t\n\r"
#: What Arrow reads and Jackson refuses (their texts go to ``_value_end``), looked for per text only
#: once the batch's buffer holds one.
_NOT_JACKSON: Final = ("NaN", "Infinity")
#: A root number and a comma, which in ``{"v":…}`` would read as a following field.
_ROOT_NUMBER_COMMA: Final = "^[ \t\n\r]*-?[0-9][0-9.eE+-]*,"


@dataclass(frozen=True)
class JsonTextDecoder:
    """Schemaless JSON (schemas off, no declared schema): the value is the body's text."""

    tombstone: str  # the message property that marks a null value (converters.TOMBSTONE_PROPERTY)

    def decode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        texts, not_utf8 = live_texts(batch, self.tombstone)
        return _finished(batch, texts, not_utf8, not_json(texts), NOT_JSON)


def not_json(texts: pa.Array) -> np.ndarray:
    """Which of ``texts`` (a string array; null ones are not looked at) are not one JSON value as
    Jackson reads a root value (see the module docstring): the check of schemaless bodies, and of
    a source's text values the json converter sends as they are (connectors.arrow_messages)."""
    live = pc.is_valid(texts)
    odd = pc.match_substring_regex(texts, _ROOT_NUMBER_COMMA)
    data = texts.buffers()[2]
    everything = b"" if data is None else data.to_pybytes()  # one scan: faster than a regex per text
    if any(token.encode() in everything for token in _NOT_JACKSON):
        odd = pc.or_(odd, pc.match_substring_regex(texts, "|".join(_NOT_JACKSON)))
    odd = pc.and_(live, odd)

    def block(chunk: pa.Array) -> pa.Array | None:
        return None if read_lines(json_lines(chunk), pa.schema([])) is None else pa.nulls(len(chunk))

    def alone(text: str) -> pa.Array | None:
        return None if _value_end(text) is None else pa.nulls(1)

    _, failed = by_halves(texts, pc.and_(live, pc.invert(odd)), block, pa.null(), alone)
    for row in pc.indices_nonzero(odd).to_pylist():  # rare: a Python check each
        failed[row] = _value_end(texts[row].as_py()) is None
    return failed


@dataclass(frozen=True)
class DeclaredJsonDecoder:
    """JSON of a declared type: the whole body (``envelope=False``, decimals as JSON numbers) or an
    envelope's ``payload`` (``envelope=True``, decimals as Kafka's base64). Made by ``plan``."""

    wire: pa.DataType  # the JSON types (connect_json.wire_type), in Arrow
    reads: tuple[pa.DataType, ...]  # the types the reader is given: arrow_json.read_types of ``wire``
    value: pa.DataType  # the Spark type, in Arrow
    envelope: bool
    problem: str  # the flag of a record that does not fit, as Spark's parse worded it
    tombstone: str  # the message property that marks a null value (converters.TOMBSTONE_PROPERTY)

    @classmethod
    def plan(
        cls, data_type: DataType, *, envelope: bool, tombstone: str, what: str | None = None
    ) -> DeclaredJsonDecoder | None:
        """The decoder of ``data_type`` (Spark's); None where Arrow does not read it (a map).
        ``what`` names the text in the flag (a body by default: ``body``, ``body envelope``)."""
        from pyspark.sql.pandas.types import to_arrow_type

        from sluice.connectors.connect_json import nullable_type, wire_type

        nullable = nullable_type(data_type)  # as from_json types it: anything may be null
        try:
            wire, value = to_arrow_type(wire_type(nullable, not envelope)), to_arrow_type(nullable)
        except TypeError:
            return None
        if not decodable(to_arrow_type(wire_type(nullable)), value):  # decimals as base64 there
            return None
        reads = read_types(wire, value)
        what = what or ("body envelope" if envelope else "body")
        problem = f"json converter: {what} does not parse as {data_type.simpleString()}"
        return cls(wire, reads, value, envelope, problem, tombstone)

    def decode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        texts, not_utf8 = live_texts(batch, self.tombstone)
        values, failed = self.parse(texts)
        return _finished(batch, values, not_utf8, failed, self.problem)

    def parse(self, texts: pa.Array) -> tuple[pa.Array, np.ndarray]:
        """``texts`` (a string array) read as the declared type: the values (null where a text is
        null or does not fit) and which do not fit. A sink's bodies, and a source's text values
        under a declared schema (connectors.arrow_messages)."""
        # the declared parse reads an envelope and a struct from the body's first value (a null one
        # does not fit), other types as a bare value
        first_value = self.envelope or pa.types.is_struct(self.value)

        def block(chunk: pa.Array) -> pa.Array | None:
            lines = json_lines(chunk)
            for wire in self.reads:
                kind = pa.struct([pa.field("payload", wire)]) if self.envelope else wire
                table = read_lines(lines, pa.schema([pa.field("v", kind)]))
                if table is not None:
                    break
            else:
                return None
            body = table.column("v").combine_chunks()
            if first_value and body.null_count:
                return None
            payload = body.field("payload") if self.envelope else body
            try:
                return converted(payload.cast(self.wire), self.value)
            except (ValueError, pa.ArrowInvalid):  # a value out of its type's range or form
                return None

        def alone(text: str) -> pa.Array | None:
            end = _value_end(text) if first_value else None
            return None if end is None or not text[end:].strip(_WS) else block(pa.array([text[:end]]))

        return by_halves(texts, pc.is_valid(texts), block, self.value, alone)


def _refuse(token: str) -> None:
    raise ValueError(f"{token}: Jackson's default refuses it (Spark's parse_json, Kafka's readTree)")


_DECODER: Final = json.JSONDecoder(parse_constant=_refuse)


def _value_end(text: str) -> int | None:
    """Where the first JSON value of ``text`` ends, as Jackson reads a root value: what follows is
    not read, but a root number must end in whitespace and a literal not run into a name. None
    when no value starts it."""
    start = len(text) - len(text.lstrip(_WS))
    try:
        _, end = _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        return None
    after = text[end : end + 1]
    if text[start] in "-0123456789":
        return end if after in ("", *_WS) else None
    if text[start] in "tfn" and after >= "0" and after not in "]}" and ("_" + after).isidentifier():
        return None
    return end


def _finished(
    batch: pa.RecordBatch, value: pa.Array, not_utf8: pa.Array, failed: np.ndarray, problem: str
) -> pa.RecordBatch:
    """``batch`` with ``value`` for ``body`` and the error column (an earlier flag kept)."""
    earlier = batch.column(ERROR_COLUMN) if ERROR_COLUMN in batch.schema.names else None
    errors = flagged(flagged(earlier, not_utf8, NOT_UTF8), pa.array(failed), problem)
    names = [n for n in batch.schema.names if n not in ("body", ERROR_COLUMN)]
    arrays = [batch.column(n) for n in names] + [value, errors]
    return pa.RecordBatch.from_arrays(arrays, names=[*names, "value", ERROR_COLUMN])
