"""A sink's decode of messages in tests: what its stages make of a batch (connectors.sink_stages),
learning the batch's envelope schemas first as the sink runner does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from sluice.connectors.arrow_records import empty_records
from sluice.connectors.converters import TOMBSTONE_PROPERTY, Converter
from sluice.connectors.sink_stages import envelope_prefixes_of
from sluice.connectors.transforms import apply_chain, arrow_head, value_read

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def records_of(
    converter: Converter,
    messages: DataFrame | pa.Table | Sequence[pa.RecordBatch],
    chain: Sequence[Any] = (),
    *,
    barriers_once: bool = False,
) -> pa.Table:
    """The records of reader ``messages`` (a DataFrame of READ_SCHEMA, a table or batches) through
    the chain's Arrow stages, in offset order, flagged records kept (the error column, when a
    stage flagged one). ``converter`` learns the batch's envelope schemas, as a sink task does."""
    if isinstance(messages, pa.Table):
        batches = messages.to_batches()
    elif isinstance(messages, Sequence):
        batches = list(messages)
    else:
        batches = messages.toArrow().to_batches()
    if converter.discovers_envelopes or converter.key_envelopes:
        found = envelope_prefixes_of(batches, keys=converter.key_envelopes, tombstone=TOMBSTONE_PROPERTY)
        converter.seen_prefixes.remember(found)
    made = converter.arrow_records(value_read(list(chain))).records(batches, barriers_once=barriers_once)
    records = apply_chain(arrow_head(list(chain)), made if made is not None else empty_records())
    return records.sort_by([("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")])
