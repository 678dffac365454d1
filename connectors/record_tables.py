"""What every record stage does to a batch of records in Arrow: flag a record, keep records, check
the record columns survived a stage, and rebuild a struct column.

A record table has the record columns of ``connectors.records`` (topic, partition, offset, key,
value, headers, timestamp) as Arrow types, plus the error column ``_sluice_error`` once a stage
flagged a record. Stages flag, never drop, what they cannot handle (``flag``), so the runtime can
fail naming the record's position or dead-letter it; a stage that filters keeps flagged records
(``keep``). Pure pyarrow: stages run wherever the batch runs, in the worker's process or in a
Spark task.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors.records import (
    ERROR_COLUMN,
    MAX_RECORD_ERROR_CHARS,
    RAW_COLUMN,
    RECORD_COLUMNS,
    RecordError,
)

#: The record columns whose Arrow type no stage may change (``check_record_table``).
FIXED_TYPES: Final = {
    "topic": pa.types.is_string,
    "partition": pa.types.is_string,
    "offset": pa.types.is_int64,
    "headers": lambda t: (
        pa.types.is_map(t) and pa.types.is_string(t.key_type) and pa.types.is_string(t.item_type)
    ),
    "timestamp": pa.types.is_timestamp,
}


def column(records: pa.Table, name: str) -> pa.Array:
    """One column as a single array (a table's column may be chunked)."""
    return records.column(name).combine_chunks()


def replaced(records: pa.Table, name: str, values: pa.Array) -> pa.Table:
    """``records`` with column ``name`` set to ``values`` (appended when it is new), its field
    typed as the values are."""
    index = records.schema.get_field_index(name)
    if index < 0:
        return records.append_column(pa.field(name, values.type), values)
    nullable = records.schema.field(index).nullable or values.null_count > 0
    return records.set_column(index, pa.field(name, values.type, nullable=nullable), values)


def flag(records: pa.Table, failed: pa.Array, message: str) -> pa.Table:
    """``records`` with ``message`` as the error of each record where ``failed`` holds, keeping an
    earlier error. The error column is added even when nothing failed, so a stage's output schema
    does not depend on its data (a Spark job declares it before any row is seen)."""
    earlier = column(records, ERROR_COLUMN) if ERROR_COLUMN in records.column_names else None
    return replaced(records, ERROR_COLUMN, flagged(earlier, failed, message))


def flagged(errors: pa.Array | None, failed: pa.Array, message: str) -> pa.Array:
    """An error column: ``message`` where ``failed`` holds, an earlier error (``errors``) kept."""
    text = message[:MAX_RECORD_ERROR_CHARS]
    new = pc.if_else(pc.fill_null(failed, False), pa.scalar(text, pa.string()), pa.scalar(None, pa.string()))
    return new if errors is None else pc.coalesce(errors, new)


def keep(records: pa.Table, condition: pa.Array) -> pa.Table:
    """The records where ``condition`` holds (null: not kept), and every flagged record: a stage
    that filters never makes a record vanish that the runtime must report or dead-letter."""
    kept = pc.fill_null(condition, False)
    if ERROR_COLUMN in records.column_names:
        kept = pc.or_(kept, pc.is_valid(column(records, ERROR_COLUMN)))
    return records.filter(kept)


def split_flagged(records: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The records no stage flagged, without the error columns, and the flagged ones as they are
    (for dead letters: their position, error and, from a source, their raw bytes)."""
    if ERROR_COLUMN not in records.column_names:
        return records, records.slice(0, 0)
    failed = pc.is_valid(column(records, ERROR_COLUMN))
    good = records.filter(pc.invert(failed))
    flags = [c for c in (ERROR_COLUMN, RAW_COLUMN) if c in good.column_names]
    return good.drop_columns(flags), records.filter(failed)


def check_record_table(records: pa.Table, where: str) -> None:
    """Raise naming ``where`` (a transform) when a stage's output lost record columns or changed the
    type of one that the runtime reads."""
    names = set(records.column_names)
    missing = [c for c in RECORD_COLUMNS if c not in names]
    if missing:
        raise RecordError(f"{where}: output lacks record column(s) {missing}; has {sorted(names)}")
    for name, fits in FIXED_TYPES.items():
        kind = records.schema.field(name).type
        if not fits(kind):
            raise RecordError(
                f"{where}: record column {name!r} has type {kind}, which the runtime cannot read"
            )


def struct_of(records: pa.Table, name: str, where: str) -> pa.StructArray:
    """Column ``name`` as a struct array, or a ValueError naming ``where`` that says what to do."""
    kind = records.schema.field(name).type
    if not pa.types.is_struct(kind):
        raise ValueError(
            f"{where}: needs a struct {name}, got {kind} "
            "(use a json converter with a schema, or a sql transform, first)"
        )
    values = column(records, name)
    assert isinstance(values, pa.StructArray)
    return values


def field_names(struct: pa.StructArray) -> list[str]:
    return [f.name for f in struct.type]


def child(struct: pa.StructArray, name: str) -> pa.Array:
    """A struct's field, null where the struct is (``StructArray.field`` ignores the parent's nulls)."""
    return pc.struct_field(struct, name)


def rebuilt(source: pa.Array, fields: Sequence[tuple[str, pa.Array]]) -> pa.StructArray:
    """A struct of ``fields`` that is null where ``source`` is null (a tombstone stays one)."""
    return struct_where(fields, pc.is_null(source))


def struct_where(fields: Sequence[tuple[str, pa.Array]], null: pa.Array) -> pa.StructArray:
    """A struct of ``fields``, null where ``null`` holds."""
    mask = pc.fill_null(null, False)
    if not fields:
        return pa.StructArray.from_arrays([], fields=[], mask=mask)
    names, arrays = zip(*fields, strict=True)
    return pa.StructArray.from_arrays(list(arrays), names=list(names), mask=mask)


def has_header(headers: pa.Array, name: str) -> pa.Array:
    """Per record, whether its headers hold the key ``name`` (whatever its value, null too)."""
    assert isinstance(headers, pa.MapArray)
    offsets = np.asarray(headers.offsets)
    first, count = int(offsets[0]), int(offsets[-1] - offsets[0])
    parents = np.repeat(np.arange(len(headers)), np.diff(offsets))
    hits = np.asarray(pc.fill_null(pc.equal(headers.keys.slice(first, count), name), False))
    found = np.bincount(parents[hits], minlength=len(headers)) > 0
    return pa.array(found, pa.bool_())


def headers_with(
    headers: pa.Array, *, dropped: Collection[str] = (), appended: Sequence[tuple[str, pa.Array]] = ()
) -> pa.MapArray:
    """``headers`` (a map column) without the entries named in ``dropped``, in their order, then
    each ``appended`` entry at the end of the rows where its value is not null: what Spark's
    ``map_concat(map_filter(headers, …), create_map(name, value))`` makes of each row. A name
    appended to a row that has it already replaces the row's own entry (the last one wins, as a
    RocketMQ property set twice does).
    """
    rows = len(headers)
    assert isinstance(headers, pa.MapArray)
    offsets = np.asarray(headers.offsets)
    first, count = int(offsets[0]), int(offsets[-1] - offsets[0])
    names, values = headers.keys.slice(first, count), headers.items.slice(first, count)
    parents = np.repeat(np.arange(rows), np.diff(offsets))
    if dropped:
        kept = np.asarray(pc.invert(pc.is_in(names, value_set=pa.array(list(dropped), pa.string()))))
        names, values, parents = names.filter(kept), values.filter(kept), parents[kept]
    for name, value in appended:
        present = np.asarray(pc.is_valid(value))
        if not present.any():
            continue
        own = np.asarray(pc.equal(names, name)) & np.isin(parents, np.flatnonzero(present))
        if own.any():
            names, values, parents = (
                names.filter(pa.array(~own)),
                values.filter(pa.array(~own)),
                parents[~own],
            )
        names = pa.concat_arrays([names, pa.repeat(pa.scalar(name), int(present.sum()))])
        values = pa.concat_arrays([values, value.filter(pa.array(present))])
        parents = np.concatenate([parents, np.flatnonzero(present)])
    if appended:
        order = np.argsort(parents, kind="stable")
        names, values, parents = names.take(pa.array(order)), values.take(pa.array(order)), parents[order]
    made = np.zeros(rows + 1, np.int32)
    np.cumsum(np.bincount(parents, minlength=rows), out=made[1:])
    return pa.MapArray.from_arrays(pa.array(made), names, values)
