"""Bodies that are not Connect envelopes, decoded in Arrow: the ``string`` converter's UTF-8 text
and the ``bytes`` converter's raw bytes (connectors.converters), as a sink's stages read them.

A body becomes the record's ``value`` as Spark's decode makes it: a tombstone's (the message
property ``sluice.tombstone=true``) is null, never an empty value. Like the envelope decoder it
only declines: a body that is not UTF-8 for the string converter raises ``DeclinedError`` naming
the record, and the batch goes to Spark's decode, which flags it as a bad record.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors.arrow_envelopes import DeclinedError, Where, not_utf8


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
        if self.text:
            try:
                value = value.cast(pa.string())  # validates UTF-8
            except pa.ArrowInvalid:
                raise DeclinedError(f"a body is not UTF-8 ({Where(batch).first(not_utf8(body))})") from None
        names = [n for n in batch.schema.names if n != "body"]
        return pa.RecordBatch.from_arrays([batch.column(n) for n in names] + [value], names=[*names, "value"])
