"""Where connectors' Arrow meets Spark, both ways: the one place the record path binds to PySpark.

On the way in, sources return a ``SourceRead`` (``sluice.connectors.source_reads``) and import no
PySpark; this module turns it into the record DataFrame that the batch's one Spark job (read →
transforms → converter → RocketMQ writer) starts from:

- a driver-built table becomes a local relation through Arrow (``createDataFrame``; with
  ``spark.sql.execution.arrow.localRelationThreshold=0`` the optimizer never evaluates it row by
  row, activities.spark);
- splits become ``spark.range(n, numPartitions=n).mapInArrow(...)``: split ``i`` is read by task
  ``i``, wherever the cluster runs it.

The Spark schema is derived from the Arrow one (``spark_schema``), so the source's Arrow
types are the only declaration of its record shape.

A source task whose batches have one layout (``read_layout``) builds that frame once: its tasks
take each batch's read from the job (``SourceReadBinder``), so the batch's Spark job is planned
once instead of per batch (#18).

On the way out, a sink's batch (read, decoded, transformed and checked in one Spark job) is
collected into one Arrow table (``batch_table``) that ``SinkTask.write`` takes: sinks import no
PySpark either.

In between, a chain of transforms runs in the batch's job (``chain_frame``): its Arrow stages
(connectors.transforms.ArrowTransform) in the tasks, over the records' Arrow batches
(``mapInArrow``), and a Spark SQL stage as the DataFrame step it is.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial, reduce
from typing import TYPE_CHECKING, Any, Final

from pyspark.sql.pandas.types import from_arrow_schema

from sluice.connectors.job_properties import bound_to_jobs, job_value
from sluice.connectors.records import check_record_columns, empty_records
from sluice.connectors.transforms import ArrowTransform, SparkTransform, Transform, apply_chain

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from sluice.connectors.sink_stages import Outcome, SinkStages, Staged
    from sluice.connectors.source_reads import ArrowSplits, SourceRead


def source_frame(spark: SparkSession, read: SourceRead) -> DataFrame:
    """The read's records as one DataFrame (parts united by column name; a column only some parts
    have, such as the error columns of a range with undecodable records, is null elsewhere)."""
    frames = [table_frame(spark, t) for t in read.tables]
    frames += [_split_frame(spark, s) for s in read.splits]
    if not frames:
        return empty_records(spark)
    return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)


def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark types of an Arrow schema; a timestamp without a time zone (a DATETIME column) is
    ``timestamp_ntz``, as it is, not an instant in the session's zone (Spark 4.1 maps it to
    ``timestamp`` unless asked)."""
    return from_arrow_schema(schema, prefer_timestamp_ntz=True)


def chain_frame(chain: Sequence[Transform], records: DataFrame) -> DataFrame:
    """``records`` through the chain, in the job that computes them: each run of Arrow stages is
    one ``mapInArrow`` over the records' batches, each Spark SQL stage its own DataFrame step.

    A ``mapInArrow`` declares its output schema before any row is seen: it is what the stages make
    of an empty table of the input's Arrow schema (a stage's output schema depends on its input
    schema alone: connectors.transforms.ArrowTransform), so a chain that cannot apply to these
    records (a field it names is missing) fails here, on the driver, naming the transform."""
    from pyspark.sql.pandas.types import to_arrow_schema

    stages: list[ArrowTransform] = []
    for transform in [*chain, None]:
        if isinstance(transform, ArrowTransform):
            stages.append(transform)
            continue
        if stages:
            schema = to_arrow_schema(records.schema)
            made = apply_chain(stages, schema.empty_table()).schema
            records = records.mapInArrow(partial(_chained, tuple(stages), made), spark_schema(made))
            stages = []
        if isinstance(transform, SparkTransform):
            records = transform.apply_frame(records)
            check_record_columns(records, transform.where)
    return records


def _chained(
    stages: tuple[ArrowTransform, ...], made: pa.Schema, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of ``chain_frame``: each batch through the stages, as the declared schema."""
    import pyarrow as pa

    for batch in batches:
        out = apply_chain(stages, pa.Table.from_batches([batch]))
        yield from out.select(made.names).cast(made).to_batches()


def table_frame(spark: SparkSession, table: pa.Table) -> DataFrame:
    """A driver-built Arrow table of records as a DataFrame, its Spark types derived from Arrow's."""
    return spark.createDataFrame(table, schema=spark_schema(table.schema))


def _split_frame(spark: SparkSession, splits: ArrowSplits) -> DataFrame:
    count = len(splits.splits)
    tasks = spark.range(0, count, 1, count)
    return tasks.mapInArrow(partial(_read_splits, splits.splits, splits.read), spark_schema(splits.schema))


def _read_splits(
    splits: tuple[Any, ...],
    read: Callable[[Any], Iterable[pa.RecordBatch]],
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: each input row is a split's index; read that split."""
    for batch in batches:
        for index in batch.column(0).to_pylist():
            yield from read(splits[int(index)])


#: The Spark local property through which a bound frame's tasks get their batch's read.
BOUND_READ_PROPERTY: Final = "sluice.source.read"
#: The most bytes of driver-built tables, as compressed Arrow IPC, a read may hold to be bound:
#: Spark sends a job's local properties with each of its tasks, sealed and in base64 (a third
#: more), and warns of a task over 1,000 KiB (a larger read builds its own frame; its plan is then
#: a small share of its cost). Compressed, a CDC batch of 2,000 change records is ~160 KB, not the
#: 900 KB it holds in memory: the batches of a steady stream of changes stay bound (#18).
BOUND_READ_MAX_BYTES: Final = 640 * 1024


#: What a consumed read's task does with its table, yielding rows of its own.
Consumer = Callable[["pa.Table"], Iterator["pa.RecordBatch"]]


@dataclass(frozen=True)
class ReadLayout:
    """What a bound frame fits: each part's Arrow schema and task count, in order (driver-built
    tables with one schema that follow each other are one part, read by one task)."""

    parts: tuple[tuple[bytes, int], ...]
    schemas: tuple[pa.Schema, ...] = field(compare=False, hash=False)


@dataclass(frozen=True)
class ReadPart:
    """One part of a bound read: a table's Arrow IPC stream, or splits and their reading function."""

    table: bytes = b""
    splits: tuple[Any, ...] = ()
    read: Callable[[Any], Iterable[pa.RecordBatch]] | None = None


def read_layout(read: SourceRead) -> tuple[ReadLayout, list[ReadPart]] | None:
    """The read's layout and its parts as a bound frame's tasks take them; None when it has nothing
    to read or its tables, compressed, are over ``BOUND_READ_MAX_BYTES``."""
    tables = _neighbours_joined(read.tables)
    # A read far over the bound in memory is not compressed to find out (under 1 ms a MB). Messages
    # made in Arrow repeat their envelope's schema in every body and compress ~40-fold: 5,000
    # Debezium change events are 12.6 MB in memory and 318 KB compressed.
    if not (tables or read.splits) or sum(t.nbytes for t in tables) > 64 * BOUND_READ_MAX_BYTES:
        return None
    parts = [ReadPart(table=_ipc(t)) for t in tables]
    if sum(len(p.table) for p in parts) > BOUND_READ_MAX_BYTES:
        return None
    parts += [ReadPart(splits=s.splits, read=s.read) for s in read.splits]
    schemas = tuple(t.schema for t in tables) + tuple(s.schema for s in read.splits)
    counts = [1] * len(tables) + [len(s.splits) for s in read.splits]
    return _layout(schemas, counts), parts


def table_chunks(
    tables: Sequence[pa.Table], max_bytes: int = BOUND_READ_MAX_BYTES
) -> Iterator[tuple[ReadLayout, list[ReadPart]]]:
    """Driver-built tables, in order, as one-part reads of at most about ``max_bytes`` of
    compressed Arrow IPC each: a read too large to bind whole (``read_layout``) runs as a few jobs
    of one bound plan rather than as a local relation (a 40,000-event CDC batch took 6 s to cross
    Py4J that way, #18). Neighbours of one schema are joined first; a chunk holds one schema."""
    for table in _neighbours_joined(tables):
        layout = _layout((table.schema,), [1])
        for stream in _ipc_chunks(table, max_bytes):
            yield layout, [ReadPart(table=stream)]


def _neighbours_joined(tables: Sequence[pa.Table]) -> list[pa.Table]:
    """Tables that follow each other with one schema, as one (one part, read by one task)."""
    import pyarrow as pa

    joined: list[pa.Table] = []
    for t in tables:
        if joined and joined[-1].schema.equals(t.schema, check_metadata=True):
            joined[-1] = pa.concat_tables([joined[-1], t])
        else:
            joined.append(t)
    return joined


def _layout(schemas: Sequence[pa.Schema], counts: Sequence[int]) -> ReadLayout:
    parts = tuple((s.serialize().to_pybytes(), n) for s, n in zip(schemas, counts, strict=True))
    return ReadLayout(parts, tuple(schemas))


def _ipc(table: pa.Table) -> bytes:
    """``table`` as an Arrow IPC stream compressed with zstd (a few ms for a batch of thousands of
    change records, a fifth of their size), which the task's ``open_stream`` reads as it is."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_ipc_options()) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def _ipc_chunks(table: pa.Table, max_bytes: int) -> Iterator[bytes]:
    """``table`` as consecutive IPC streams (``_ipc``'s), each closed before the next slice would
    take it over ``max_bytes``; a slice holds rows of at most an eighth of that in memory, so
    each stream has several (one slice over ``max_bytes`` alone is a stream of its own)."""
    import pyarrow as pa

    rows_per_slice = max(1, table.num_rows * (max_bytes // 8) // max(table.nbytes, 1))
    sink: pa.BufferOutputStream | None = None
    writer: pa.ipc.RecordBatchStreamWriter | None = None
    last_slice = 0
    for batch in table.to_batches(max_chunksize=rows_per_slice):
        if sink is not None and writer is not None and sink.tell() + last_slice > max_bytes:
            writer.close()
            yield bytes(sink.getvalue().to_pybytes())
            sink = writer = None
        if sink is None or writer is None:
            sink = pa.BufferOutputStream()
            writer = pa.ipc.new_stream(sink, table.schema, options=_ipc_options())
        before = sink.tell()
        writer.write_batch(batch)
        last_slice = sink.tell() - before
    if sink is not None and writer is not None:
        writer.close()
        yield bytes(sink.getvalue().to_pybytes())


def _ipc_options() -> pa.ipc.IpcWriteOptions:
    """zstd-compressed IPC (made where pyarrow is loaded: this module is imported without it)."""
    import pyarrow as pa

    return pa.ipc.IpcWriteOptions(compression="zstd")


class SourceReadBinder:
    """Source frames of a layout whose tasks read the read bound to their job (``bound``).

    The read travels as a job's local property, which Spark keeps with the job's events (and
    writes to an event log where one is kept); a split's reading function holds the source's
    connection settings, so the read is sealed with a key only this binder's frames hold (they
    travel pickled inside the job's plan, as the unbound frame's functions do).
    """

    def __init__(self, spark: SparkSession) -> None:
        from cryptography.fernet import Fernet

        self.spark = spark
        self._key = Fernet.generate_key()
        self._fernet = Fernet(self._key)

    def frame(self, layout: ReadLayout) -> DataFrame:
        """The records of any read of ``layout`` bound to the job that runs it."""
        frames = [
            self.spark.range(0, count, 1, max(count, 1)).mapInArrow(
                partial(_read_bound_part, self._key, index, count), spark_schema(schema)
            )
            for index, ((_, count), schema) in enumerate(zip(layout.parts, layout.schemas, strict=True))
        ]
        return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)

    def consumed(self, layout: ReadLayout, consume: Consumer, schema: str) -> DataFrame:
        """What ``consume`` makes of each task's share of a one-part read of ``layout`` bound to
        the job (a table, or one of its splits), in the task that reads it: a job whose rows never
        cross into Spark (messages made in Arrow and sent by the tasks that read them; ``schema``
        is what ``consume`` yields, as Spark DDL)."""
        ((_, count),) = layout.parts
        read = partial(_read_bound_part, self._key, 0, count)
        consuming = partial(_consume, read, layout.schemas[0], consume)
        return self.spark.range(0, count, 1, max(count, 1)).mapInArrow(consuming, schema)

    @contextmanager
    def bound(self, parts: Sequence[ReadPart]) -> Iterator[None]:
        """Jobs this thread starts in the block read ``parts`` (``read_layout``'s) through a frame."""
        from pyspark import cloudpickle

        sealed = self._fernet.encrypt(cloudpickle.dumps(list(parts))).decode()
        with bound_to_jobs(self.spark, BOUND_READ_PROPERTY, sealed):
            yield


def _read_bound_part(
    key: bytes, index: int, count: int, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of a bound frame's part ``index``: each input row is a task's index into
    the part of the read bound to this job."""
    import pyarrow as pa
    from cryptography.fernet import Fernet

    sealed = job_value(BOUND_READ_PROPERTY)
    if sealed is None:  # never read nothing in silence: a job outside SourceReadBinder.bound is a bug
        raise RuntimeError("source read: this job has no read bound (spark_binding.SourceReadBinder)")
    part: ReadPart = pickle.loads(Fernet(key).decrypt(sealed.encode()))[index]
    tasks = 1 if part.read is None else len(part.splits)
    if tasks != count:
        raise RuntimeError(f"source read: bound part {index} has {tasks} tasks, its frame {count}")
    for batch in batches:
        for task in batch.column(0).to_pylist():
            if part.read is None:
                yield from pa.ipc.open_stream(part.table).read_all().to_batches()
            else:
                yield from part.read(part.splits[int(task)])


def _consume(
    read: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
    schema: pa.Schema,
    consume: Consumer,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of ``SourceReadBinder.consumed``: the task's share of the bound read,
    whole, to ``consume``."""
    import pyarrow as pa

    yield from consume(pa.Table.from_batches(list(read(batches)), schema=schema))


def sink_job(
    spark: SparkSession,
    count: int,
    read_share: Callable[[int], Iterable[pa.RecordBatch]],
    stages: SinkStages,
    stager: Callable[[pa.Table, int], Any] | None,
) -> list[Outcome | Staged]:
    """A sink batch larger than the worker's local bound, as one Spark job of ``count`` tasks: task
    ``i`` reads share ``i`` (``read_share``) and runs the sink's stages on it
    (connectors.sink_stages), then stages the records it made (``stager``: they never leave the
    task) or returns them. Each task returns one typed result; they come back in share order."""
    body = partial(_sink_share, read_share, stages, stager)
    tasks = spark.range(count, numPartitions=max(count, 1))
    rows = tasks.mapInArrow(body, "share INT, outcome BINARY").collect()
    return [pickle.loads(r["outcome"]) for r in sorted(rows, key=lambda r: int(r["share"]))]


def _sink_share(
    read_share: Callable[[int], Iterable[pa.RecordBatch]],
    stages: SinkStages,
    stager: Callable[[pa.Table, int], Any] | None,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of ``sink_job``: each input row is a share's index."""
    import pyarrow as pa

    from sluice.connectors.sink_stages import Made, Staged

    for batch in batches:
        for index in batch.column(0).to_pylist():
            outcome: Outcome | Staged = stages.run(read_share(int(index)))
            if stager is not None and isinstance(outcome, Made) and outcome.records is not None:
                outcome = Staged(stager(outcome.records, int(index)), outcome.dead)
            yield pa.RecordBatch.from_pydict(
                {"share": [int(index)], "outcome": [pickle.dumps(outcome)]},
                schema=pa.schema([("share", pa.int32()), ("outcome", pa.binary())]),
            )


def batch_table(records: DataFrame) -> pa.Table:
    """A sink's batch collected on the driver, in the record columns as Spark's types map to Arrow.

    One Spark job (a batch is bounded by ``batch.max.records``); nothing is cached, since the
    sink's write starts no job of its own."""
    return records.toArrow()
