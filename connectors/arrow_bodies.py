"""Bodies that are not Connect envelopes, decoded in Arrow: the ``string`` converter's UTF-8 text
and the ``bytes`` converter's raw bytes (connectors.converters), as a sink's stages read them.

A body becomes the record's ``value``: a tombstone's (the message property ``sluice.tombstone=true``)
is null, never an empty value. A body that is not UTF-8 for the string converter is flagged in the
error column (records.ERROR_COLUMN), its value null, as the envelope decoder flags what it cannot
read.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors.arrow_envelopes import utf8_texts
from sluice.connectors.record_tables import flagged
from sluice.connectors.records import ERROR_COLUMN


@dataclass(frozen=True)
class BodyDecoder:
    """Decodes a reader batch's ``body`` into ``value``: text (``text``) or the bytes as they are."""

    text: bool
    #: the message property that marks a null value (converters.TOMBSTONE_PROPERTY)
    tombstone: str

    def decode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        body = batch.column("body")
        # if_else over a sliced binary array makes its offsets invalid (pyarrow 21): unsliced first
        body = pa.concat_arrays([body]) if body.offset else body
        marked = pc.map_lookup(batch.column("properties"), self.tombstone, "first")
        tombstone = pc.fill_null(pc.equal(marked, "true"), False)
        value = pc.if_else(tombstone, pa.scalar(None, body.type), body)
        errors = pa.nulls(len(batch), pa.string())
        if self.text:
            value, not_text = utf8_texts(value)
            errors = flagged(None, not_text, "string converter: body is not UTF-8")
        names = [n for n in batch.schema.names if n != "body"]
        arrays = [batch.column(n) for n in names] + [value, errors]
        return pa.RecordBatch.from_arrays(arrays, names=[*names, "value", ERROR_COLUMN])
