"""A source's encode of records in tests: the messages its converter makes of them in Arrow
(connectors.arrow_messages), as a source's stages make them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from sluice.connectors.converters import Converter


def messages_of(
    converter: Converter, *records: DataFrame | pa.Table, extra: Mapping[str, str] | None = None
) -> pa.Table:
    """The messages of ``records`` (Arrow tables, or frames of records.make_records), each part
    encoded by its own shape's encoder, in the order given; the error column kept where a record
    is flagged."""
    parts = []
    for part in records:
        table = part if isinstance(part, pa.Table) else arrow_records(part)
        parts.append(converter.arrow_encoder(table.schema).encode(table, extra))
    return pa.concat_tables(parts, promote_options="permissive")


def arrow_records(frame: DataFrame) -> pa.Table:
    """A frame's rows in Arrow, typed as its schema says, nullability included. Spark's
    ``toArrow`` refuses a frame whose non-nullable field sits in a struct that is null in a row
    (a change event's ``source`` in a tombstone): its cast checks the field's values where the
    struct hides them. Such a frame's batches are retyped without that check."""
    try:
        return frame.toArrow()
    except pa.ArrowInvalid:
        pass
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(frame.schema, error_on_duplicated_field_names_in_struct=True)
    collected = pa.Table.from_batches(frame._collect_as_arrow(empty_list_if_zero_records=False))
    columns = [_retyped(collected.column(f.name).combine_chunks(), f.type) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def _retyped(values: pa.Array, kind: pa.DataType) -> pa.Array:
    """``values`` as ``kind``, which differs at most in its fields' nullability, built from the
    same buffers (no check of a non-nullable field's values)."""
    if values.type == kind:
        return values
    values = pa.concat_arrays([values]) if values.offset else values
    validity = values.buffers()[:1]
    if pa.types.is_struct(kind):
        children = [_retyped(values.field(i), kind.field(i).type) for i in range(kind.num_fields)]
        return pa.Array.from_buffers(kind, len(values), validity, values.null_count, children=children)
    if pa.types.is_map(kind) or pa.types.is_list(kind):
        child_type = (
            pa.struct([kind.key_field, kind.item_field]) if pa.types.is_map(kind) else kind.value_type
        )
        child = _retyped(values.values, child_type)
        buffers = values.buffers()[:2]
        return pa.Array.from_buffers(kind, len(values), buffers, values.null_count, children=[child])
    return values.cast(kind)
