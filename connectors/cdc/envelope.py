"""Debezium's change-event envelope as Arrow records, for every change-capture source.

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

Records are built on the driver as Arrow tables (connectors.source_reads): no PySpark here, so the
envelope is tested without a JVM; the runtime hands the tables to Spark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from sluice.connectors.barriers import BARRIER_HEADER, BARRIER_MARK
from sluice.connectors.jdbc.types import MappedColumn, arrow_type
from sluice.connectors.records import OP_TRUNCATE
from sluice.connectors.source_reads import headers_where, record_table

if TYPE_CHECKING:
    import pyarrow as pa

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


def envelope_type(columns: Sequence[MappedColumn], source_fields: Sequence[tuple[str, str]]) -> pa.DataType:
    """The Arrow type of the envelope for a table's ``columns``; ``source_fields`` (name, Spark DDL)
    are the connector's ``source`` block. The JSON converter writes the Connect schemas' ``optional``
    flags from its nullability, so that is spelled out here: ``source``, ``op`` and the source's
    ``connector`` and ``name`` are required, everything else optional."""
    import pyarrow as pa  # pyarrow: config validation imports this module (the CDC connector classes)

    row = _arrow_struct([(c.name, c.spark_ddl) for c in columns])
    source = pa.struct(
        [
            pa.field(name, arrow_type(ddl), nullable=name not in ("connector", "name"))
            for name, ddl in source_fields
        ]
    )
    return pa.struct(
        [
            pa.field("before", row),
            pa.field("after", row),
            pa.field("source", source, nullable=False),
            pa.field("op", pa.string(), nullable=False),
            pa.field("ts_ms", pa.int64()),
        ]
    )


def _arrow_struct(fields: Sequence[tuple[str, str]]) -> pa.DataType:
    """A struct of nullable fields (a row's and a key's columns are all optional in the envelope)."""
    import pyarrow as pa  # pyarrow: config validation imports this module (the CDC connector classes)

    return pa.struct([pa.field(name, arrow_type(ddl)) for name, ddl in fields])


def change_table(
    records: Sequence[ChangeRecord],
    *,
    columns: Sequence[MappedColumn],
    key_columns: Sequence[str],
    source_fields: Sequence[tuple[str, str]],
    topic: str,
    partition: str,
) -> pa.Table:
    """Record columns (connectors.records) of one table's change records, in Arrow: ``key`` the
    primary key struct (typed, so a key converter with schemas can describe it), ``value`` the
    envelope struct. A truncate is ordered against every key of its table, so it carries the
    barrier header (connectors.barriers)."""
    import pyarrow as pa  # pyarrow: config validation imports this module (the CDC connector classes)

    by_name = {c.name: c for c in columns}
    truncates = [r.value is not None and r.value["op"] == OP_TRUNCATE for r in records]
    return record_table(
        partition,
        [r.offset for r in records],
        [None if r.value is None else dict(r.value) for r in records],
        topic=topic,
        keys=[None if r.key is None else dict(r.key) for r in records],
        headers=headers_where(truncates, BARRIER_HEADER, BARRIER_MARK),
        timestamps=pa.array([r.timestamp_us for r in records], pa.timestamp("us", tz="UTC")),
        value_type=envelope_type(columns, source_fields),
        key_type=_arrow_struct([(k, by_name[k].spark_ddl) for k in key_columns]),
    )


def read_table(
    values: Sequence[Sequence[Any]],
    *,
    columns: Sequence[MappedColumn],
    key_columns: Sequence[str],
    source: Mapping[str, Any],
    ts_ms: int,
    offsets: Sequence[int],
    timestamp_us: int,
    source_fields: Sequence[tuple[str, str]],
    topic: str,
    partition: str,
) -> pa.Table:
    """Op ``r`` records of rows read from a table (a snapshot chunk; ``values``: a list per column,
    in ``columns``' order), every one with the same ``source`` block and times: the table
    ``change_table`` makes of their envelopes, built a column at a time. A snapshot chunk is
    thousands of rows of one shape, and an envelope, a key and a record per row, then Arrow's
    conversion of those nested dicts, were most of the source task's own work for it (#18); here
    each column becomes one Arrow array and the key reuses the row's arrays."""
    import pyarrow as pa  # pyarrow: config validation imports this module (the CDC connector classes)

    n = len(offsets)
    value_type = envelope_type(columns, source_fields)
    row_type, source_type = value_type.field("after").type, value_type.field("source").type
    fields = [row_type.field(i) for i in range(row_type.num_fields)]
    by_name = {c.name: column for c, column in zip(columns, values, strict=True)}
    arrays = {f.name: pa.array(by_name[f.name], f.type) for f in fields}
    key_fields = [row_type.field(k) for k in key_columns]
    block = [source_type.field(i) for i in range(source_type.num_fields)]
    value = pa.StructArray.from_arrays(
        [
            pa.nulls(n, row_type),
            pa.StructArray.from_arrays([arrays[f.name] for f in fields], fields=fields),
            pa.StructArray.from_arrays(
                [pa.array([source.get(f.name)] * n, f.type) for f in block], fields=block
            ),
            pa.array([OP_READ] * n, pa.string()),
            pa.array([ts_ms] * n, pa.int64()),
        ],
        fields=[value_type.field(i) for i in range(value_type.num_fields)],
    )
    return record_table(
        partition,
        offsets,
        value,
        topic=topic,
        keys=pa.StructArray.from_arrays([arrays[f.name] for f in key_fields], fields=key_fields),
        timestamps=pa.array([timestamp_us] * n, pa.timestamp("us", tz="UTC")),
        value_type=value_type,
        key_type=pa.struct(key_fields),
    )
