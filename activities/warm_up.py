"""A new worker's first jobs, run before it takes work, so a connector's first batch is fast.

A cold worker's first source batch took ~12 s and its first sink batch ~6 s where the tenth took
under 1 s: JIT compilation, code generation, the first Python workers and the Python data-source
planner are all paid on first use. ``warm_up`` pays them once at start-up, through the same paths a
batch takes (Arrow in, a Python function over Arrow batches, a Python data source read and
written, Arrow out), with a data source of its own so no service is touched.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

ROWS = 64
SCHEMA = "id long, text string"


def warm_up(session: SparkSession) -> None:
    """Run the paths every batch takes once (about 5 s on a cold two-core worker)."""
    session.dataSource.register(_WarmUpSource)
    frame = session.read.format(_WarmUpSource.name()).load()
    frame = frame.mapInArrow(_same_batches, frame.schema)
    frame.write.format(_WarmUpSource.name()).mode("append").save()
    session.createDataFrame(frame.toArrow()).toArrow()


def _same_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from batches


class _WarmUpSource(DataSource):
    """Reads ``ROWS`` rows in two partitions; writes nowhere."""

    @classmethod
    def name(cls) -> str:
        return "sluice_warm_up"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _Reader()

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return _Writer()


class _Reader(DataSourceReader):
    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(0), InputPartition(1)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        first = partition.value * ROWS // 2
        ids = list(range(first, first + ROWS // 2))
        yield pa.RecordBatch.from_pydict({"id": ids, "text": [str(i) for i in ids]})


class _Writer(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()
