"""The record DataFrame every stage passes on (source read -> transforms -> converter -> writer, and back).

Columns (Kafka Connect's ConnectRecord as Spark columns):

========== ======================= ==========================================================
topic      string, nullable        RocketMQ topic (target for sources, origin for sinks)
partition  string                  source partition key, or a queue key ``"broker-a:0"``
offset     long                    source position / queue offset of the record
key        string, nullable        message key (a struct after ValueToKey-like transforms)
value      string | binary | any   the payload; a struct after a converter or transform
headers    map<string,string>      user properties
timestamp  timestamp, nullable     event/born time
========== ======================= ==========================================================

``(partition, offset)`` identifies a record's position: errors name it, sinks order by it. No
module-level pyspark import so this module stays importable from workflows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from sluice.connectors.errors import ConnectorDataError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

RECORD_COLUMNS: Final = ("topic", "partition", "offset", "key", "value", "headers", "timestamp")
ERROR_COLUMN: Final = "_sluice_error"
#: A flagged record's original bytes (binary; only where a source could not decode them), so a
#: dead letter keeps exactly what the source held.
RAW_COLUMN: Final = "_sluice_raw"
#: Longest error text kept per record (the dead letter's property and the task's error).
MAX_RECORD_ERROR_CHARS: Final = 500
#: Debezium's truncate operation. Past ``ExtractNewRecordState`` (``drop.truncates=false``) a
#: truncate is a record with null key and value whose header ``OP_HEADER`` (Debezium's
#: ``add.headers=op`` name) is ``t``; jdbc-sink's ``truncate.enabled`` acts on it. Here, not in
#: connectors.cdc, because sinks and transforms read it without depending on the CDC sources.
OP_TRUNCATE: Final = "t"
OP_HEADER: Final = "__op"
#: Header the json converter sets when one batch's topics carry different schemas: the record's own
#: topic's value type (Spark's JSON form; merge_schemas), so a sink writes each table its own columns
#: with their own types. Here, not in connectors.converters, since transforms rewrite it too.
VALUE_SCHEMA_HEADER: Final = "sluice.value.schema"
#: The same for record keys read from Connect envelopes (``key.converter`` JSON with schemas).
KEY_SCHEMA_HEADER: Final = "sluice.key.schema"
RECORD_DDL: Final = (
    "topic STRING, partition STRING NOT NULL, offset BIGINT NOT NULL, key STRING, value STRING, "
    "headers MAP<STRING, STRING>, timestamp TIMESTAMP"
)


class RecordError(ConnectorDataError):
    """Records that are malformed; the message names topic/partition/offset of (some of) them."""


@dataclass(frozen=True)
class Record:
    """A driver-side record, for sources that read on the driver and for tests."""

    partition: str
    offset: int
    value: Any
    topic: str | None = None
    key: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timestamp: datetime | None = None

    def as_row(self) -> tuple[Any, ...]:
        return (
            self.topic,
            self.partition,
            self.offset,
            self.key,
            self.value,
            dict(self.headers),
            self.timestamp,
        )


def position(topic: str | None, partition: str, offset: int) -> str:
    """How errors name a record: ``topic 't' partition 'p' offset 7``."""
    where = f"topic {topic!r} " if topic else ""
    return f"{where}partition {partition!r} offset {offset}"


def record_schema(value_type: DataType | None = None) -> StructType:
    """The record schema with ``value`` of ``value_type`` (string by default)."""
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql.types import (
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    return StructType(
        [
            StructField("topic", StringType(), True),
            StructField("partition", StringType(), False),
            StructField("offset", LongType(), False),
            StructField("key", StringType(), True),
            StructField("value", value_type or StringType(), True),
            StructField("headers", MapType(StringType(), StringType(), True), True),
            StructField("timestamp", TimestampType(), True),
        ]
    )


def make_records(
    spark: SparkSession, records: Iterable[Record], value_type: DataType | None = None
) -> DataFrame:
    """A record DataFrame from driver-side records (modest sizes: everything passes through the driver)."""
    return spark.createDataFrame([r.as_row() for r in records], schema=record_schema(value_type))


def empty_records(spark: SparkSession, value_type: DataType | None = None) -> DataFrame:
    return spark.createDataFrame([], schema=record_schema(value_type))


def check_record_columns(df: DataFrame, where: str) -> None:
    """Raise naming ``where`` (connector/transform) when a stage's output lost record columns or types."""
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql.types import LongType, MapType, StringType, TimestampType

    schema = df.schema
    names = set(schema.fieldNames())
    missing = [c for c in RECORD_COLUMNS if c not in names]
    if missing:
        raise RecordError(f"{where}: output lacks record column(s) {missing}; has {sorted(names)}")
    expected = {
        "topic": StringType(),
        "partition": StringType(),
        "offset": LongType(),
        "headers": MapType(StringType(), StringType()),
        "timestamp": TimestampType(),
    }
    for name, want in expected.items():
        got = schema[name].dataType
        if type(got) is not type(want) or (
            isinstance(want, MapType) and got.simpleString() != want.simpleString()
        ):
            raise RecordError(
                f"{where}: record column {name!r} must be {want.simpleString()}, got {got.simpleString()}"
            )


def good_arrow_records(table: pa.Table, where: str) -> pa.Table:
    """A collected batch without the error columns, or RecordError naming its first flagged record
    in record order (topic, partition, offset).

    For sinks, which write Arrow (connectors.api.SinkTask): the batch is collected in one job
    anyway, and a ``raise_error`` filter in that job would be pushed below the converter's parse,
    which Spark then evaluates twice (measured: twice the decode time per batch).
    """
    # pyarrow: workflows import this module; only the sink runner calls this
    import pyarrow.compute as pc

    if ERROR_COLUMN in table.column_names:
        flagged = table.filter(pc.is_valid(table[ERROR_COLUMN]))
        if flagged.num_rows:
            order = [("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")]
            first = flagged.sort_by(order).slice(0, 1).to_pylist()[0]
            at = position(first["topic"], first["partition"], first["offset"])
            raise RecordError(f"{where}: bad record at {at}: {first[ERROR_COLUMN]}")
    return table.drop_columns([c for c in (ERROR_COLUMN, RAW_COLUMN) if c in table.column_names])


def keep_where(df: DataFrame, condition: Column) -> DataFrame:
    """``df.where(condition)`` that never drops a flagged record (a null condition drops the row).

    A record that did not decode (its value null) or that a transform could not handle is the
    runtime's to report or dead-letter; a transform that filters must not make it vanish, as
    ``ExtractNewRecordState`` did when it took a body that did not parse for a tombstone to drop.
    """
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import functions as F

    if ERROR_COLUMN in df.columns:
        return df.where(F.coalesce(condition, F.lit(False)) | F.col(ERROR_COLUMN).isNotNull())
    return df.where(condition)
