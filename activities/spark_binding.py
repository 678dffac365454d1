"""Where connectors' Arrow meets Spark: the one module that runs a batch's stages in Spark tasks.

A batch is cut into shares, and each Spark task runs a side's stages (connectors.source_stages,
connectors.sink_stages) over its own share and returns one small typed outcome, pickled (counts,
dead letters, a staging handle); records never reach the driver.

- Source side (``SourceReadBinder.job``): a read's driver-built tables travel as compressed Arrow
  IPC and its splits as their reading functions; task ``i`` reads share ``i`` (``share_tasks``:
  each table or split alone, or all of them in order, in one task, where the order must be kept)
  and makes and sends its messages. A task whose batches have one layout (``read_layout``) builds
  the job once and binds each batch's read to it (#18); where nothing binds a job (Spark Connect),
  the read travels in the job (``inline_job``).
- Sink side (``sink_job``): task ``i`` pulls share ``i`` of the plan's queue ranges, decodes,
  transforms and stages or returns its records.

A chain's Spark SQL transform is Spark by nature: the chain runs over a DataFrame of the records
(``chain_frame``: its Arrow stages in ``mapInArrow``, the SQL as the DataFrame step it is), the
source's stages then in the tasks of its output (``frame_job``), a sink's write after it. The Spark
schema is derived from the Arrow one (``spark_schema``), so a source's Arrow types are the only
declaration of its record shape. The Delta and Iceberg sinks write a DataFrame made from the
stages' Arrow output (``table_frame``).
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


#: What a source share's task makes of the tables it read, in order: its typed outcome
#: (connectors.source_stages, then the send: activities.source_runner).
Consumer = Callable[[list["pa.Table"]], object]
#: The rows of a job of shares: each task's outcome, pickled, with its share's index.
OUTCOME_SCHEMA: Final = "share INT, outcome BINARY"


def share_tasks(layout: ReadLayout, together: bool) -> tuple[tuple[tuple[int, int], ...], ...]:
    """The pieces (a part's index, a task's index in it) each task of a read's job reads, in
    order: every piece by one task when the read's order must be kept (``together``), else one
    piece a task (a table, one split), all at once."""
    pieces = tuple((p, i) for p, (_, count) in enumerate(layout.parts) for i in range(count))
    return (pieces,) if together else tuple((piece,) for piece in pieces)


class SourceReadBinder:
    """Jobs of a layout whose tasks read the read bound to their job (``bound``).

    The read travels as a job's local property, which Spark keeps with the job's events (and
    writes to an event log where one is kept); a split's reading function holds the source's
    connection settings, so the read is sealed with a key only this binder's jobs hold (they
    travel pickled inside the job's plan, as an unbound job's functions do).
    """

    def __init__(self, spark: SparkSession) -> None:
        from cryptography.fernet import Fernet

        self.spark = spark
        self._key = Fernet.generate_key()
        self._fernet = Fernet(self._key)

    def job(self, layout: ReadLayout, together: bool, consume: Consumer) -> DataFrame:
        """The job whose tasks read their shares (``share_tasks``) of any read of ``layout``
        bound to it and return what ``consume`` makes of them (``job_outcomes``)."""
        return _shares_job(self.spark, partial(_bound_parts, self._key), layout, together, consume)

    @contextmanager
    def bound(self, parts: Sequence[ReadPart]) -> Iterator[None]:
        """Jobs this thread starts in the block read ``parts`` (``read_layout``'s)."""
        from pyspark import cloudpickle

        sealed = self._fernet.encrypt(cloudpickle.dumps(list(parts))).decode()
        with bound_to_jobs(self.spark, BOUND_READ_PROPERTY, sealed):
            yield


def inline_job(
    spark: SparkSession, layout: ReadLayout, parts: Sequence[ReadPart], together: bool, consume: Consumer
) -> DataFrame:
    """``SourceReadBinder.job`` where nothing binds a job (Spark Connect): the parts travel in
    the job's plan, built for this read alone."""
    return _shares_job(spark, partial(_given_parts, tuple(parts)), layout, together, consume)


def _shares_job(
    spark: SparkSession,
    parts_of: Callable[[], Sequence[ReadPart]],
    layout: ReadLayout,
    together: bool,
    consume: Consumer,
) -> DataFrame:
    shares = share_tasks(layout, together)
    body = partial(_share_task, parts_of, layout, shares, consume)
    return spark.range(0, len(shares), 1, max(len(shares), 1)).mapInArrow(body, OUTCOME_SCHEMA)


def frame_job(records: DataFrame, consume: Consumer) -> DataFrame:
    """What ``consume`` makes of each partition of ``records`` (a chain's Spark SQL output)."""
    return records.mapInArrow(partial(_frame_share, consume), OUTCOME_SCHEMA)


def job_outcomes(job: DataFrame) -> list[Any]:
    """Run a job of shares, planned afresh (a Dataset run twice would reuse its adaptive plan's
    finished stages, the last run's data): each task's outcome, in share order."""
    rows = job.select("*").collect()
    return [pickle.loads(r["outcome"]) for r in sorted(rows, key=lambda r: int(r["share"]))]


def _bound_parts(key: bytes) -> list[ReadPart]:
    """The read bound to the running job (``SourceReadBinder.bound``)."""
    from cryptography.fernet import Fernet

    sealed = job_value(BOUND_READ_PROPERTY)
    if sealed is None:  # never read nothing in silence: a job outside SourceReadBinder.bound is a bug
        raise RuntimeError("source read: this job has no read bound (spark_binding.SourceReadBinder)")
    parts: list[ReadPart] = pickle.loads(Fernet(key).decrypt(sealed.encode()))
    return parts


def _given_parts(parts: tuple[ReadPart, ...]) -> tuple[ReadPart, ...]:
    return parts


def _share_task(
    parts_of: Callable[[], Sequence[ReadPart]],
    layout: ReadLayout,
    shares: tuple[tuple[tuple[int, int], ...], ...],
    consume: Consumer,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of a job of shares: each input row is a share's index; its pieces are read
    in order (one part's pieces as one table) and consumed."""
    import pyarrow as pa

    parts = parts_of()
    for batch in batches:
        for index in batch.column(0).to_pylist():
            tables: list[tuple[int, list[pa.Table]]] = []
            for p, i in shares[int(index)]:
                part, (_, count) = parts[p], layout.parts[p]
                if (1 if part.read is None else len(part.splits)) != count:
                    raise RuntimeError(f"source read: part {p} does not fit its job's layout")
                if part.read is None:
                    piece = pa.ipc.open_stream(part.table).read_all()
                else:
                    piece = pa.Table.from_batches(list(part.read(part.splits[i])), schema=layout.schemas[p])
                if tables and tables[-1][0] == p:
                    tables[-1][1].append(piece)
                else:
                    tables.append((p, [piece]))
            pieces = [pa.concat_tables(same) for _, same in tables]
            yield _outcome_row(int(index), consume(pieces))


def _frame_share(consume: Consumer, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of ``frame_job``: the partition's records, whole, to ``consume``."""
    import pyarrow as pa
    from pyspark import TaskContext

    read = list(batches)
    context = TaskContext.get()
    index = context.partitionId() if context is not None else 0
    yield _outcome_row(index, consume([pa.Table.from_batches(read)] if read else []))


def _outcome_row(index: int, outcome: object) -> pa.RecordBatch:
    import pyarrow as pa

    return pa.RecordBatch.from_pydict(
        {"share": [index], "outcome": [pickle.dumps(outcome)]},
        schema=pa.schema([("share", pa.int32()), ("outcome", pa.binary())]),
    )


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
    return job_outcomes(spark.range(count, numPartitions=max(count, 1)).mapInArrow(body, OUTCOME_SCHEMA))


def _sink_share(
    read_share: Callable[[int], Iterable[pa.RecordBatch]],
    stages: SinkStages,
    stager: Callable[[pa.Table, int], Any] | None,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of ``sink_job``: each input row is a share's index."""
    from sluice.connectors.sink_stages import Staged
    from sluice.connectors.stage_outcomes import Made

    for batch in batches:
        for index in batch.column(0).to_pylist():
            outcome: Outcome | Staged = stages.run(read_share(int(index)))
            if stager is not None and isinstance(outcome, Made) and outcome.records is not None:
                outcome = Staged(stager(outcome.records, int(index)), outcome.dead)
            yield _outcome_row(int(index), outcome)


def batch_table(records: DataFrame) -> pa.Table:
    """A sink's batch collected on the driver, in the record columns as Spark's types map to Arrow.

    One Spark job (a batch is bounded by ``batch.max.records``); nothing is cached, since the
    sink's write starts no job of its own."""
    return records.toArrow()
