"""Rows of a jdbc-source split -> records, in Arrow, inside the Spark task that read them.

A record's ``value`` is the struct of the row's columns, its ``key`` the struct of the primary-key
columns (a null string without a key), ``timestamp`` the first non-null timestamp column in the
timestamp modes, and ``offset`` the incrementing id (incrementing mode on an integer column) or a
63-bit hash of the row's position and key, computed as earlier releases' Spark expression did
(connectors.jdbc.offsets: offsets identify the records a re-run must not send again).

No pyarrow at import (config validation imports the jdbc-source class, which imports this).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sluice.connectors.jdbc.types import MappedColumn, arrow_type
from sluice.connectors.source_reads import record_arrow_schema

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class RecordShape:
    """How one partition's rows become records (pickled into the Spark tasks with the read)."""

    topic: str
    partition: str
    keys: tuple[str, ...]  # the primary key's columns; () without one
    timestamps: tuple[str, ...]  # the timestamp columns, coalesced (timestamp modes); else ()
    incrementing: str  # the incrementing column (incrementing modes); else ""
    id_offset: bool  # the offset is the incrementing id itself (incrementing mode, integer column)


def record_schema(columns: Sequence[MappedColumn], shape: RecordShape) -> pa.Schema:
    """The records' Arrow schema: the value and key structs typed by the columns' mapping."""
    import pyarrow as pa  # pyarrow: config validation imports this module (the jdbc-source class)

    fields = {c.name: pa.field(c.name, arrow_type(c.spark_ddl)) for c in columns}
    key_type = pa.struct([fields[k] for k in shape.keys]) if shape.keys else None
    return record_arrow_schema(pa.struct(list(fields.values())), key_type)


def to_records(rows: pa.RecordBatch, schema: pa.Schema, shape: RecordShape) -> pa.RecordBatch:
    """One batch of rows (typed as ``record_schema`` says) as records of ``schema``."""
    import pyarrow as pa  # pyarrow: config validation imports this module (the jdbc-source class)

    from sluice.connectors.source_reads import no_headers

    n = rows.num_rows
    key = _struct(rows, shape.keys) if shape.keys else pa.nulls(n, pa.string())
    columns = {
        "topic": pa.repeat(pa.scalar(shape.topic, pa.string()), n),
        "partition": pa.repeat(pa.scalar(shape.partition, pa.string()), n),
        "offset": _offsets(rows, shape),
        "key": key,
        "value": _struct(rows, rows.schema.names),
        "headers": no_headers(n),
        "timestamp": _timestamp(rows, shape) if shape.timestamps else pa.nulls(n, pa.timestamp("us", "UTC")),
    }
    return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)


def _struct(rows: pa.RecordBatch, names: Sequence[str]) -> pa.Array:
    import pyarrow as pa  # pyarrow: config validation imports this module (the jdbc-source class)

    return pa.StructArray.from_arrays(
        [rows.column(n) for n in names], fields=[rows.schema.field(n) for n in names]
    )


def _timestamp(rows: pa.RecordBatch, shape: RecordShape) -> pa.Array:
    """The first non-null timestamp column as an instant (a ``TIMESTAMP_NTZ`` read as UTC, as
    Spark's session zone did)."""
    import pyarrow as pa  # pyarrow: config validation imports this module (the jdbc-source class)
    import pyarrow.compute as pc

    stamps = [rows.column(c).cast(pa.timestamp("us", "UTC")) for c in shape.timestamps]
    return pc.coalesce(*stamps)


def _offsets(rows: pa.RecordBatch, shape: RecordShape) -> pa.Array:
    """The id (cast to long), or the hash of the timestamp, the id and the key's (else the row's)
    JSON, in that order, as earlier releases computed it."""
    import pyarrow as pa  # pyarrow: config validation imports this module (the jdbc-source class)

    from sluice.connectors.jdbc.offsets import hashed_offsets
    from sluice.connectors.spark_json import json_objects

    if shape.id_offset:
        return rows.column(shape.incrementing).cast(pa.int64())
    parts = [_timestamp(rows, shape)] if shape.timestamps else []
    parts += [rows.column(shape.incrementing)] if shape.incrementing else []
    named = shape.keys or rows.schema.names
    parts.append(json_objects([(name, rows.column(name)) for name in named]))
    return hashed_offsets(parts)
