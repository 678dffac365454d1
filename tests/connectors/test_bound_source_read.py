"""A source task's job built once per read layout: each run reads exactly the read bound to it, a
task per share (or one task, in order, where the order must be kept), and never reads nothing in
silence."""

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
    inline_job,
    job_outcomes,
    read_layout,
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


def _rows_read(pieces: list[pa.Table]) -> list[tuple[object, ...]]:
    """A share's consumer: the rows its task read, in order, with their flags."""
    rows = []
    for piece in pieces:
        errors = piece.column("_sluice_error").to_pylist() if "_sluice_error" in piece.column_names else None
        for i, (p, o, v) in enumerate(
            zip(*(piece.column(c).to_pylist() for c in ("partition", "offset", "value")), strict=True)
        ):
            rows.append((p, o, v, errors[i] if errors else None))
    return rows


def _expected(read: SourceRead) -> list[tuple[object, ...]]:
    return _rows_read([read.to_table()])


def test_one_job_reads_each_jobs_own_read(spark: SparkSession) -> None:
    binder = SourceReadBinder(spark)
    first, second = read_layout(_read(0)), read_layout(_read(100))
    assert first is not None and second is not None
    assert first[0] == second[0]
    assert [count for _, count in first[0].parts] == [1, 3]  # neighbouring tables of one schema: one part
    job = binder.job(first[0], False, _rows_read)
    for read, (_, parts) in ((_read(0), first), (_read(100), second)):
        with binder.bound(parts):
            sealed = spark.sparkContext.getLocalProperty(BOUND_READ_PROPERTY)
            shares = job_outcomes(job)
        assert len(shares) == 4  # the tables' part and each split: a task each
        assert sorted(row for share in shares for row in share) == sorted(_expected(read))
        assert SECRET not in sealed  # the split's reader travels sealed
    assert ("t2", 100, "t2-100", None) in shares[3]


def test_a_read_whose_order_is_kept_is_one_task_reading_in_order(spark: SparkSession) -> None:
    binder = SourceReadBinder(spark)
    layout = read_layout(_read(0))
    assert layout is not None
    with binder.bound(layout[1]):
        (share,) = job_outcomes(binder.job(layout[0], True, _rows_read))
    assert share == _expected(_read(0))
    # where nothing binds a job (Spark Connect), the parts travel in the job: the same shares
    (inline,) = job_outcomes(inline_job(spark, layout[0], layout[1], True, _rows_read))
    assert inline == share


def test_a_flagged_record_makes_another_layout(spark: SparkSession) -> None:
    clean, flagged = read_layout(_read(0)), read_layout(_read(0, flagged=True))
    assert clean is not None and flagged is not None
    assert clean[0] != flagged[0]
    binder = SourceReadBinder(spark)
    with binder.bound(flagged[1]):
        shares = job_outcomes(binder.job(flagged[0], False, _rows_read))
    assert [row for share in shares for row in share if row[0] == "b.txt"] == [
        ("b.txt", 0, "z", None),
        ("b.txt", 2, None, "line is not utf-8"),
    ]


def test_a_job_refuses_to_run_unbound_or_bound_to_another_layout(spark: SparkSession) -> None:
    binder = SourceReadBinder(spark)
    layout = read_layout(_read(0))
    assert layout is not None
    job = binder.job(layout[0], False, _rows_read)
    with pytest.raises(Exception, match="no read bound"):
        job_outcomes(job)
    one_split = ArrowSplits(record_arrow_schema(pa.string()), (("t0", 0, 1),), partial(_lines, SECRET))
    fewer = SourceRead(tables=_read(0).tables, splits=(one_split,))
    other = read_layout(fewer)
    assert other is not None and other[0] != layout[0]
    with binder.bound(other[1]), pytest.raises(Exception, match="part 1 does not fit its job's layout"):
        job_outcomes(job)


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
