"""What a source's read returns: record batches in Arrow, with no Spark in sight.

Sources speak Arrow (#18): ``SourceTask.read(ranges)`` returns a :class:`SourceRead`, and one
runtime module (``sluice.activities.spark_binding``) makes it the input of the batch's one Spark
job. A read has two kinds of parts:

- **tables** built on the driver — a change log decoded during planning, a file's lines — handed to
  Spark as they are;
- **splits** read *inside* Spark tasks, one task per split, so the driver never holds the rows and
  a cluster reads them on its executors (jdbc-source's key ranges). The reading function and the
  splits are pickled into the tasks.

Every part has the record columns of ``sluice.connectors.records`` (``topic``, ``partition``,
``offset``, ``key``, ``value``, ``headers``, ``timestamp``, and the error columns when a source
flags records); the Spark types are derived from the Arrow ones (``pa.timestamp("us", "UTC")`` is
Spark's ``TIMESTAMP``, without a zone ``TIMESTAMP_NTZ``, a non-nullable field stays non-nullable).

Because a read is plain Arrow, a source is tested without a JVM: :meth:`SourceRead.to_table` reads
the splits in-process, as the Spark tasks would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sluice.connectors.records import ERROR_COLUMN, RAW_COLUMN, RECORD_COLUMNS, Record

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class ArrowSplits:
    """Record batches read inside Spark tasks: ``read(split)`` for each of ``splits``, each in its
    own task. ``read`` and the splits must pickle (a module function, a ``functools.partial``);
    every batch ``read`` yields has ``schema``."""

    schema: pa.Schema
    splits: tuple[Any, ...]
    read: Callable[[Any], Iterable[pa.RecordBatch]]


@dataclass(frozen=True)
class SourceRead:
    """The records of one read: driver-built ``tables`` and task-read ``splits``, in that order."""

    tables: tuple[pa.Table, ...] = ()
    splits: tuple[ArrowSplits, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.splits and all(t.num_rows == 0 for t in self.tables)

    def to_table(self) -> pa.Table:
        """Every record of the read in one table, the splits read here (tests, tools; the runtime
        reads through Spark). Columns missing from a part are null, as Spark's union by name does."""
        import pyarrow as pa

        parts = list(self.tables)
        for s in self.splits:
            parts += [pa.Table.from_batches(list(s.read(split)), schema=s.schema) for split in s.splits]
        if not parts:
            return record_table("", [], [])
        return pa.concat_tables(parts, promote_options="permissive")


def no_headers(n: int) -> pa.Array:
    """``n`` empty header maps (no Python object per row)."""
    import numpy as np
    import pyarrow as pa

    return pa.MapArray.from_arrays(
        pa.array(np.zeros(n + 1, np.int32)), pa.array([], pa.string()), pa.array([], pa.string())
    )


def headers_where(mask: Sequence[bool], name: str, value: str) -> pa.Array:
    """Header maps holding ``{name: value}`` where ``mask`` is true and nothing elsewhere."""
    import numpy as np
    import pyarrow as pa

    flags = np.asarray(mask, dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum(flags)]).astype(np.int32)
    count = int(flags.sum())
    return pa.MapArray.from_arrays(
        pa.array(offsets), pa.array([name] * count, pa.string()), pa.array([value] * count, pa.string())
    )


def record_table(
    partition: str,
    offsets: Sequence[int] | pa.Array,
    values: Sequence[Any] | pa.Array,
    *,
    topic: str | None = None,
    keys: Sequence[Any] | pa.Array | None = None,
    headers: pa.Array | None = None,
    timestamps: pa.Array | None = None,
    value_type: pa.DataType | None = None,
    key_type: pa.DataType | None = None,
    errors: Sequence[str | None] | None = None,
    raw: Sequence[bytes | None] | None = None,
) -> pa.Table:
    """One source partition's records as an Arrow table of the record columns.

    ``value_type`` and ``key_type`` default to string. ``errors`` (with ``raw``, the bytes a source
    could not decode) flags records as the error columns, left out when nothing is flagged.
    """
    import pyarrow as pa

    n = len(values)
    key_type = key_type or pa.string()
    columns = {
        "topic": pa.array([topic] * n, pa.string()) if topic else pa.nulls(n, pa.string()),
        "partition": pa.array([partition] * n, pa.string()),
        "offset": pa.array(offsets, pa.int64()),
        "key": pa.nulls(n, key_type) if keys is None else pa.array(keys, key_type),
        "value": pa.array(values, value_type or pa.string()),
        "headers": no_headers(n) if headers is None else headers,
        "timestamp": pa.nulls(n, pa.timestamp("us", tz="UTC")) if timestamps is None else timestamps,
    }
    schema = record_arrow_schema(columns["value"].type, key_type)
    if errors is not None and any(e is not None for e in errors):
        columns[ERROR_COLUMN] = pa.array(errors, pa.string())
        columns[RAW_COLUMN] = pa.array(raw or [None] * n, pa.binary())
        schema = schema.append(pa.field(ERROR_COLUMN, pa.string())).append(pa.field(RAW_COLUMN, pa.binary()))
    return pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema)


def records_table(
    records: Iterable[Record], value_type: pa.DataType | None = None, key_type: pa.DataType | None = None
) -> pa.Table:
    """Driver-side records (of any partitions and topics) as an Arrow table of the record columns,
    in the order given; Arrow's twin of ``records.make_records`` (modest sizes, tests)."""
    import pyarrow as pa

    rows = [dict(zip(RECORD_COLUMNS, r.as_row(), strict=True)) for r in records]
    for row in rows:
        row["headers"] = list(row["headers"].items())
    return pa.Table.from_pylist(rows, schema=record_arrow_schema(value_type or pa.string(), key_type))


def record_arrow_schema(value_type: pa.DataType, key_type: pa.DataType | None = None) -> pa.Schema:
    """The record columns' Arrow schema (``partition`` and ``offset`` never null)."""
    import pyarrow as pa

    types = {
        "topic": pa.string(),
        "partition": pa.string(),
        "offset": pa.int64(),
        "key": key_type or pa.string(),
        "value": value_type,
        "headers": pa.map_(pa.string(), pa.string()),
        "timestamp": pa.timestamp("us", tz="UTC"),
    }
    return pa.schema(
        [pa.field(c, types[c], nullable=c not in ("partition", "offset")) for c in RECORD_COLUMNS]
    )
