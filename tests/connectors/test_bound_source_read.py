"""A source task's frame built once per read layout: each job reads exactly the read bound to it,
as ``source_frame`` reads that read, and never reads nothing in silence."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest
from pyspark import cloudpickle

from sluice.activities.spark_binding import (
    BOUND_READ_MAX_BYTES,
    BOUND_READ_PROPERTY,
    SourceReadBinder,
    read_layout,
    source_frame,
    table_chunks,
)
from sluice.connectors.source_reads import ArrowSplits, SourceRead, record_arrow_schema, record_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SECRET = "s3cret-password"
# this module's split reader travels by value: Spark's Python workers cannot import a test module
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _lines(password: str, split: tuple[str, int, int]) -> Iterator[pa.RecordBatch]:
    """A split reader holding a connection secret, as jdbc-source's does."""
    assert password == SECRET
    partition, start, end = split
    values = [f"{partition}-{i}" for i in range(start, end)]
    yield from record_table(partition, range(start, end), values).to_batches()


def _read(start: int, flagged: bool = False) -> SourceRead:
    """Two tables of one schema, one with a flagged record when ``flagged``, and three splits."""
    errors = [None, "line is not utf-8"] if flagged else None
    raw = [None, b"\xff"] if flagged else None
    tables = (
        record_table("a.txt", [start, start + 1], ["x", "y"]),
        record_table("b.txt", [start, start + 2], ["z", None if flagged else "w"], errors=errors, raw=raw),
    )
    splits = ArrowSplits(
        record_arrow_schema(pa.string()),
        tuple((f"t{i}", start, start + i + 1) for i in range(3)),
        partial(_lines, SECRET),
    )
    return SourceRead(tables=tables, splits=(splits,))


def _rows(frame) -> list[tuple[object, ...]]:  # type: ignore[no-untyped-def]
    return sorted(tuple(r) for r in frame.select("partition", "offset", "value").collect())


def test_one_frame_reads_each_jobs_own_read(spark: SparkSession) -> None:
    binder = SourceReadBinder(spark)
    first, second = read_layout(_read(0)), read_layout(_read(100))
    assert first is not None and second is not None
    assert first[0] == second[0]
    assert [count for _, count in first[0].parts] == [1, 3]  # neighbouring tables of one schema: one part
    frame = binder.frame(first[0])
    for read, (_, parts) in ((_read(0), first), (_read(100), second)):
        with binder.bound(parts):
            sealed = spark.sparkContext.getLocalProperty(BOUND_READ_PROPERTY)
            ours = _rows(frame.select("*"))
        assert ours == _rows(source_frame(spark, read))
        assert SECRET not in sealed  # the split's reader travels sealed
    assert ("t2", 100, "t2-100") in ours and ("b.txt", 102, "w") in ours


def test_a_flagged_record_makes_another_layout(spark: SparkSession) -> None:
    clean, flagged = read_layout(_read(0)), read_layout(_read(0, flagged=True))
    assert clean is not None and flagged is not None
    assert clean[0] != flagged[0]
    binder = SourceReadBinder(spark)
    with binder.bound(flagged[1]):
        ours = binder.frame(flagged[0]).select("partition", "offset", "_sluice_error").collect()
    assert sorted((r[0], r[1], r[2]) for r in ours if r[0] == "b.txt") == [
        ("b.txt", 0, None),
        ("b.txt", 2, "line is not utf-8"),
    ]


def test_a_frame_refuses_to_run_unbound_or_bound_to_another_layout(spark: SparkSession) -> None:
    binder = SourceReadBinder(spark)
    layout = read_layout(_read(0))
    assert layout is not None
    frame = binder.frame(layout[0])
    with pytest.raises(Exception, match="no read bound"):
        frame.select("*").collect()
    one_split = ArrowSplits(record_arrow_schema(pa.string()), (("t0", 0, 1),), partial(_lines, SECRET))
    fewer = SourceRead(tables=_read(0).tables, splits=(one_split,))
    other = read_layout(fewer)
    assert other is not None and other[0] != layout[0]
    with binder.bound(other[1]), pytest.raises(Exception, match="bound part 1 has 1 tasks, its frame 3"):
        frame.select("*").collect()


def test_reads_that_are_not_bound() -> None:
    assert read_layout(SourceRead()) is None
    # compressed, as bound reads travel: one value repeated is small, random ones are not
    rows = BOUND_READ_MAX_BYTES // 1024 + 1
    repeated = ["v" * 2048] * rows
    assert read_layout(SourceRead(tables=(record_table("p", range(rows), repeated),))) is not None
    random = [os.urandom(1024).hex() for _ in range(rows)]  # 1 KiB of entropy each
    assert read_layout(SourceRead(tables=(record_table("p", range(rows), random),))) is None


def _chunk_rows(chunks: list[bytes]) -> pa.Table:
    return pa.concat_tables(pa.ipc.open_stream(c).read_all() for c in chunks)


def test_a_read_too_large_to_bind_whole_is_bound_in_ordered_chunks() -> None:
    """Driver-built tables over the bound travel as several one-part reads, each under it, whose
    rows in order are the tables' own; neighbours of one schema share a layout."""
    max_bytes = 64 * 1024
    first = record_table("a", range(300), [os.urandom(256).hex() for _ in range(300)])
    second = record_table("a", range(300, 500), [os.urandom(256).hex() for _ in range(200)])
    other = record_table("b", range(3), [1, 2, 3], value_type=pa.int64())  # another schema
    chunks = list(table_chunks([first, second, other], max_bytes))

    assert len(chunks) > 2  # "a" is more than one chunk
    assert all(len(parts) == 1 and len(parts[0].table) <= max_bytes for _, parts in chunks)
    layouts = [layout for layout, _ in chunks]
    assert len(set(layouts[:-1])) == 1 and layouts[-1] != layouts[0]
    assert layouts[-1].schemas == (other.schema,)
    joined = _chunk_rows([parts[0].table for layout, parts in chunks[:-1]])
    assert joined.equals(pa.concat_tables([first, second]))
    assert _chunk_rows([chunks[-1][1][0].table]).equals(other)


def test_a_small_read_is_one_chunk_of_its_bound_layout() -> None:
    table = record_table("a", range(3), ["x", "y", "z"])
    ((layout, parts),) = table_chunks([table])
    bound = read_layout(SourceRead(tables=(table,)))
    assert bound is not None and layout == bound[0]
    assert _chunk_rows([parts[0].table]).equals(table)
