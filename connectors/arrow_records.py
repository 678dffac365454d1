"""A sink batch's records made in Arrow, from the messages the ``rocketmq`` reader pulls.

The records (topic, partition, offset, key, value, headers, timestamp; connectors.records) of the
reader's Arrow batches, by the converter's decoders: Connect envelopes of the schemas met
(connectors.arrow_envelopes), schemaless or declared JSON (arrow_json_bodies), or the string or
bytes converter's bodies (arrow_bodies). Values (and keys) of topics that differ in type are
decoded as their merge, each record naming its own type in a header (records.VALUE_SCHEMA_HEADER,
KEY_SCHEMA_HEADER), so a sink writes each table its own columns.

Why: a small sink batch's Spark job (pull in a Python worker, decode, transforms, collect) costs
0.4-0.9 s whatever its size, which was most of a change's latency at 1,000 changes/s. The same
work in Arrow where the sink writes, with the chain's transforms (Arrow stages,
connectors.transforms) after it, takes tens of milliseconds. A record the decoders cannot read is
flagged in the error column, naming why, for the stages to fail or dead-letter.
``tests/connectors/test_arrow_records.py`` checks that its records equal Spark's.

Pure pyarrow: it is planned from Arrow types (``Converter.arrow_records``) and runs wherever the
sink's write does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors.arrow_envelopes import EnvelopeDecoder
from sluice.connectors.barriers import BARRIER_HEADER
from sluice.connectors.record_tables import headers_with
from sluice.connectors.records import ERROR_COLUMN


class Decoder(Protocol):
    """A converter's decode of the reader's ``body`` into ``value`` (and the error column):
    connectors.arrow_envelopes, arrow_bodies and arrow_json_bodies."""

    def decode(self, batch: pa.RecordBatch) -> pa.RecordBatch: ...


#: The record columns, in ``Converter.to_records``' order.
RECORD_COLUMNS = ("topic", "partition", "offset", "key", "value", "headers", "timestamp")


@dataclass(frozen=True)
class RecordsPlan:
    """Makes records of reader batches (rocketmq.arrow_decode.READ_COLUMNS); see the module docstring.

    ``value``: the decoder of the values (their envelopes, or the string or bytes converter's
    bodies: connectors.arrow_bodies); ``key``: of the keys' envelopes, or None when
    keys are read as text (keys of several types are Spark's to decode). ``tombstone``: the
    property that marks a null value (dropped from the headers, as Spark's records drop it);
    ``tags_header``: the header the message's tags become.
    """

    value: Decoder
    key: EnvelopeDecoder | None
    tombstone: str
    tags_header: str
    #: per header (the value's and the key's own schema: records.VALUE_SCHEMA_HEADER), each
    #: topic's own type as Spark JSON where the topics met differ in type (the decoder's type is
    #: their merge): each record names its own in that header
    own_types: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()

    def records(self, batches: Iterable[pa.RecordBatch], *, barriers_once: bool) -> pa.Table | None:
        """The records of the messages in ``batches`` (None when there are none: nothing to make
        a typed empty batch from). ``barriers_once``: a barrier's copies after the first are
        dropped, as the sink runner's ``once_per_barrier`` does for a task that does not order
        barriers. Records the decoders could not read are flagged in ``ERROR_COLUMN``; a schema not
        met raises the decoder's ``UnmetSchemaError``."""
        made = []
        for batch in batches:
            if barriers_once:
                batch = batch.filter(_not_a_later_copy(batch.column("properties")))
            if batch.num_rows:
                made.append(self._records(batch))
        return pa.Table.from_batches(made) if made else None

    def _records(self, messages: pa.RecordBatch) -> pa.RecordBatch:
        decoded = self.value.decode(messages)
        errors = decoded.column(ERROR_COLUMN)
        key = _empty_as_null(messages.column("keys"))  # an empty KEYS property is no key
        if self.key is not None:
            keys = self._keys(messages, key)
            key, errors = keys.column("value"), pc.coalesce(errors, keys.column(ERROR_COLUMN))
        appended = [(self.tags_header, _empty_as_null(messages.column("tags")))]
        for header, types in self.own_types:  # each record's own type, where topics met differ
            topics, owns = zip(*types, strict=True)
            where = pc.index_in(messages.column("topic"), value_set=pa.array(topics, pa.string()))
            appended.append((header, pa.array(owns, pa.string()).take(where)))
        properties = messages.column("properties")
        headers = headers_with(properties, dropped=[self.tombstone], appended=appended)
        arrays = [
            messages.column("topic"),
            messages.column("partition"),
            messages.column("queue_offset"),
            key,
            decoded.column("value"),
            headers,
            messages.column("born_timestamp"),
            errors,
        ]
        # Spark types the headers map as never null (to_records coalesces it), Arrow's fields as nullable.
        names = zip((*RECORD_COLUMNS, ERROR_COLUMN), arrays, strict=True)
        fields = [pa.field(n, a.type, nullable=n != "headers") for n, a in names]
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))

    def _keys(self, messages: pa.RecordBatch, texts: pa.Array) -> pa.RecordBatch:
        """The keys' envelopes decoded as the values' are (a key is never a tombstone)."""
        assert self.key is not None
        no_properties = pa.MapArray.from_arrays(
            pa.array(np.zeros(len(texts) + 1, np.int32)), pa.array([], pa.string()), pa.array([], pa.string())
        )
        keys = pa.RecordBatch.from_arrays(
            [
                messages.column("topic"), messages.column("partition"), messages.column("queue_offset"),
                texts.cast(pa.binary()), no_properties,
            ],
            names=["topic", "partition", "queue_offset", "body", "properties"],
        )  # fmt: skip
        return self.key.decode(keys)


def _empty_as_null(texts: pa.Array) -> pa.Array:
    # if_else of a null scalar over a sliced string array makes its offsets invalid (pyarrow 21):
    # an unsliced copy of a slice (a share read in chunks) first
    texts = pa.concat_arrays([texts]) if texts.offset else texts
    return pc.if_else(pc.equal(texts, ""), pa.scalar(None, pa.string()), texts)


def _not_a_later_copy(properties: pa.Array) -> pa.Array:
    """Messages but a barrier's copies after the first (connectors.barriers: copy ``0/…`` is kept)."""
    label = pc.map_lookup(properties, BARRIER_HEADER, "first")
    return pc.or_(pc.is_null(label), pc.fill_null(pc.starts_with(label, "0/"), False))


def empty_records() -> pa.Table:
    """A batch of no records, for a sink batch whose messages made none (all barrier copies, or
    all bad and tolerated): its write still commits the batch's positions."""
    text, headers = pa.string(), pa.map_(pa.string(), pa.string())
    kinds = (text, text, pa.int64(), text, text, headers, pa.timestamp("us"))
    return pa.schema(list(zip(RECORD_COLUMNS, kinds, strict=True))).empty_table()
