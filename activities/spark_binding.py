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

On the way out, a sink's batch (read, decoded, transformed and checked in one Spark job) is
collected into one Arrow table (``batch_table``) that ``SinkTask.write`` takes: sinks import no
PySpark either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial, reduce
from typing import TYPE_CHECKING, Any

from pyspark.sql.pandas.types import from_arrow_schema

from sluice.connectors.records import empty_records

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

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


def table_frame(spark: SparkSession, table: pa.Table) -> DataFrame:
    """A driver-built Arrow table of records as a DataFrame, its Spark types derived from Arrow's."""
    return spark.createDataFrame(table, schema=spark_schema(table.schema))


def _split_frame(spark: SparkSession, splits: ArrowSplits) -> DataFrame:
    count = len(splits.splits)
    tasks = spark.range(0, count, 1, count)
    return tasks.mapInArrow(
        partial(_read_splits, splits.splits, splits.read), spark_schema(splits.schema)
    )


def _read_splits(
    splits: tuple[Any, ...],
    read: Callable[[Any], Iterable[pa.RecordBatch]],
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: each input row is a split's index; read that split."""
    for batch in batches:
        for index in batch.column(0).to_pylist():
            yield from read(splits[int(index)])


#: A column of the decoded records that keeps a sink chain's filters above the converter's parse
#: (``parsed_once``); ``batch_table`` drops it.
PARSE_BARRIER = "_sluice_parsed_once"


def parsed_once(decoded: DataFrame) -> DataFrame:
    """``decoded`` (a converter's records) with a column Spark cannot push a filter below.

    Spark pushes a transform's filter (``ExtractNewRecordState`` drops deletes and tombstones by
    ``value.op``) below the projection that parses the message, inlining the parse into the
    filter's condition once per use of the value, where it is evaluated outside whole-stage code
    generation. A non-deterministic column (the partition id, free) in that projection stops the
    push, so each message is parsed once: 30,000 Debezium events, decode, unwrap and collect,
    1.6-4.6 s with the push and 0.9-2.2 s without it (alternating, on a busy machine). The
    column reaches the collect, so column pruning keeps it, and ``batch_table`` drops it there.
    """
    from pyspark.sql import functions as F

    return decoded.withColumn(PARSE_BARRIER, F.spark_partition_id())


def batch_table(records: DataFrame) -> pa.Table:
    """A sink's batch collected on the driver, in the record columns as Spark's types map to Arrow.

    One Spark job (a batch is bounded by ``batch.max.records``); nothing is cached, since the
    sink's write starts no job of its own."""
    table = records.toArrow()
    if PARSE_BARRIER in table.column_names:
        table = table.drop_columns([PARSE_BARRIER])
    return table
