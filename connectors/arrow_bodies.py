"""Bodies that are not Connect envelopes, decoded in Arrow: the ``string`` converter's UTF-8 text
and the ``bytes`` converter's raw bytes (connectors.converters), as a sink's stages read them.

A body becomes the record's ``value``: a tombstone's (the message property ``sluice.tombstone=true``)
is null, never an empty value. A body that is not UTF-8 for the string converter is flagged in the
error column (records.ERROR_COLUMN), its value null, as the JSON decoders flag what they cannot
read; they take their texts from here too (``live_texts``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors.record_tables import flagged
from sluice.connectors.records import ERROR_COLUMN


@dataclass(frozen=True)
class BodyDecoder:
    """Decodes a reader batch's ``body`` into ``value``: text (``text``) or the bytes as they are."""

    text: bool
    #: the message property that marks a null value (converters.TOMBSTONE_PROPERTY)
    tombstone: str

    def decode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        value, errors = tombstoned(batch, self.tombstone), pa.nulls(len(batch), pa.string())
        if self.text:
            value, not_text = utf8_texts(value)
            errors = flagged(None, not_text, "string converter: body is not UTF-8")
        names = [n for n in batch.schema.names if n != "body"]
        arrays = [batch.column(n) for n in names] + [value, errors]
        return pa.RecordBatch.from_arrays(arrays, names=[*names, "value", ERROR_COLUMN])


def tombstoned(batch: pa.RecordBatch, tombstone: str) -> pa.Array:
    """The batch's bodies, null where the ``tombstone`` property marks a null value."""
    body = batch.column("body")
    marked = pc.fill_null(
        pc.equal(pc.map_lookup(batch.column("properties"), tombstone, "first"), "true"), False
    )
    if not pc.any(marked).as_py():
        return body
    body = pa.concat_arrays([body]) if body.offset else body  # if_else over a sliced binary (pyarrow 21)
    return pc.if_else(marked, pa.scalar(None, body.type), body)


def live_texts(batch: pa.RecordBatch, tombstone: str) -> tuple[pa.Array, pa.Array]:
    """The bodies as text, null for tombstones, null bodies and bodies not UTF-8, and which are not
    UTF-8 (``utf8_texts``)."""
    return utf8_texts(tombstoned(batch, tombstone))


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
