"""Debezium's change-event envelope as Spark records, for every change-capture source.

A change event's value is ``{before, after, source, op, ts_ms}`` (Debezium's envelope): ``before``
and ``after`` are the row before and after the change (one of them null for creates and deletes),
``source`` says where it happened (connector-specific fields: PostgreSQL's LSN and transaction id,
MySQL's binlog file and position), ``op`` is ``c`` create, ``u`` update, ``d`` delete, ``r`` read
(a snapshot row) or ``t`` truncate (the whole table emptied: ``before`` and ``after`` null and no
record key, as Debezium sends it). The record key is the primary key as a struct; a tombstone
(null value, same key) may follow a delete so a compacting consumer forgets the key. The JSON
converter writes the value with or without Kafka's ``{schema, payload}`` wrapper
(``value.converter.schemas.enable``).

Debezium stamps ``ts_ms`` with the time the connector processed the event; Sluice uses the source's
commit time instead, so re-reading a range gives byte-identical records (exactly-once replay).

Rows are built on the driver and handed to Spark through Arrow (connectors.records explains why).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from sluice.connectors.barriers import BARRIER_HEADER, BARRIER_MARK
from sluice.connectors.jdbc.read import arrow_type
from sluice.connectors.jdbc.types import MappedColumn
from sluice.connectors.records import OP_TRUNCATE, empty_records

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

OP_CREATE: Final = "c"
OP_UPDATE: Final = "u"
OP_DELETE: Final = "d"
OP_READ: Final = "r"
ENVELOPE_FIELDS: Final = ("before", "after", "source", "op", "ts_ms")


@dataclass(frozen=True)
class ChangeRecord:
    """One record of a change stream: an envelope, or a tombstone (``value`` None) after a delete."""

    offset: int  # ordered within the batch's partition (the runtime sends in this order)
    key: Mapping[str, Any] | None  # None: a truncate (it concerns no one row)
    value: Mapping[str, Any] | None
    timestamp_us: int


def envelope(
    op: str,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
    source: Mapping[str, Any],
    ts_ms: int,
) -> dict[str, Any]:
    """The envelope value of one change."""
    if op not in (OP_CREATE, OP_UPDATE, OP_DELETE, OP_READ, OP_TRUNCATE):
        raise ValueError(f"unknown change operation {op!r}")
    return {"before": before, "after": after, "source": dict(source), "op": op, "ts_ms": ts_ms}


def _struct_json(fields: Sequence[tuple[str, str]], nullable: bool = True) -> dict[str, Any]:
    # pyspark: config validation imports this module (the CDC connector classes)
    from pyspark.sql.types import _parse_datatype_string

    return {
        "type": "struct",
        "fields": [
            {
                "name": name,
                "type": _parse_datatype_string(ddl).jsonValue(),
                "nullable": nullable,
                "metadata": {},
            }
            for name, ddl in fields
        ],
    }


def envelope_spark_type(
    columns: Sequence[MappedColumn], source_fields: Sequence[tuple[str, str]]
) -> StructType:
    """The Spark type of the envelope for a table's ``columns``; ``source_fields`` (name, Spark DDL)
    are the connector's ``source`` block."""
    # pyspark: config validation imports this module (the CDC connector classes)
    from pyspark.sql.types import StructType

    row = _struct_json([(c.name, c.spark_ddl) for c in columns])
    source = _struct_json(source_fields)
    source["fields"] = [dict(f, nullable=f["name"] not in ("connector", "name")) for f in source["fields"]]
    return StructType.fromJson(
        {
            "type": "struct",
            "fields": [
                {"name": "before", "type": row, "nullable": True, "metadata": {}},
                {"name": "after", "type": row, "nullable": True, "metadata": {}},
                {"name": "source", "type": source, "nullable": False, "metadata": {}},
                {"name": "op", "type": "string", "nullable": False, "metadata": {}},
                {"name": "ts_ms", "type": "long", "nullable": True, "metadata": {}},
            ],
        }
    )


def _arrow_struct(fields: Sequence[tuple[str, str]]) -> pa.DataType:
    import pyarrow as pa  # pyarrow: config validation imports this module (the CDC connector classes)

    return pa.struct([pa.field(name, arrow_type(ddl)) for name, ddl in fields])


def union_frames(spark: SparkSession, frames: Sequence[DataFrame]) -> DataFrame:
    """One DataFrame of a read's per-range frames (the runtime's empty records when there are none)."""
    if not frames:
        return empty_records(spark)
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def record_frame(
    spark: SparkSession,
    records: Sequence[ChangeRecord],
    *,
    columns: Sequence[MappedColumn],
    key_columns: Sequence[str],
    source_fields: Sequence[tuple[str, str]],
    topic: str,
    partition: str,
) -> DataFrame:
    """Record columns (connectors.records) of one table's change records: ``key`` the primary key
    struct (typed, so a key converter with schemas can describe it), ``value`` the envelope struct."""
    # pyspark, pyarrow: config validation imports this module (the CDC connector classes)
    import pyarrow as pa
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    row = [(c.name, c.spark_ddl) for c in columns]
    by_name = {c.name: c for c in columns}
    key_fields = [(k, by_name[k].spark_ddl) for k in key_columns]
    value_type = pa.struct(
        [
            pa.field("before", _arrow_struct(row)),
            pa.field("after", _arrow_struct(row)),
            pa.field("source", _arrow_struct(source_fields)),
            pa.field("op", pa.string()),
            pa.field("ts_ms", pa.int64()),
        ]
    )
    table = pa.table(
        {
            "offset": pa.array([r.offset for r in records], pa.int64()),
            "k": pa.array(
                [None if r.key is None else dict(r.key) for r in records], _arrow_struct(key_fields)
            ),
            "value": pa.array([None if r.value is None else dict(r.value) for r in records], value_type),
            "timestamp": pa.array([r.timestamp_us for r in records], pa.timestamp("us", tz="UTC")),
        }
    )
    schema = StructType.fromJson(
        {
            "type": "struct",
            "fields": [
                {"name": "offset", "type": "long", "nullable": False, "metadata": {}},
                {"name": "k", "type": _struct_json(key_fields), "nullable": True, "metadata": {}},
                {
                    "name": "value",
                    "type": envelope_spark_type(columns, source_fields).jsonValue(),
                    "nullable": True,
                    "metadata": {},
                },
                {"name": "timestamp", "type": "timestamp", "nullable": True, "metadata": {}},
            ],
        }
    )
    frame = spark.createDataFrame(table, schema=schema)
    return frame.select(
        F.lit(topic).alias("topic"),
        F.lit(partition).alias("partition"),
        F.col("offset"),
        F.col("k").alias("key"),
        F.col("value"),
        # A truncate is ordered against every key of its table: a barrier (connectors.barriers).
        F.when(
            F.col("value.op") == F.lit(OP_TRUNCATE), F.create_map(F.lit(BARRIER_HEADER), F.lit(BARRIER_MARK))
        )
        .otherwise(F.create_map())
        .cast("map<string,string>")
        .alias("headers"),
        F.col("timestamp"),
    )
