"""Records to table rows: which columns, which key (``pk.mode``), which rows delete (tombstones).

Row shape: a struct ``value`` gives one column per field. Any other value (a string, JSON text,
bytes) is written with the record's coordinates ``topic, partition, offset, key, value,
timestamp`` (``value`` as text, or as bytes when it is binary). ``pk.mode`` (Kafka Connect's JDBC sink):

* ``none``: no key; only ``insert.mode=insert``.
* ``kafka``: ``__connect_topic, __connect_partition, __connect_offset`` columns are the key.
* ``record_value``: ``pk.fields`` of the value are the key.
* ``record_key``: the record key is the key: a struct key gives its fields (``pk.fields`` or all);
  a text key gives one column named by ``pk.fields`` (typed like the value's field of that name,
  if any; taken from the key when it is a JSON object with that field, as CDC sources write it),
  or several taken from a JSON object key. Key columns replace same-named value fields.

A null value is a tombstone: with ``delete.enabled`` it deletes its key (op ``d``); without it a
struct-valued topic skips it (nothing to write), a coordinates table stores it as a null value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sluice.connectors.jdbc.urls import Dialect
from sluice.connectors.jdbc.writes import OP_COLUMN, POSITION_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType, StructType

RECORD_FIELDS = ("topic", "partition", "offset", "key", "value", "timestamp")
KAFKA_FIELDS = ("__connect_topic", "__connect_partition", "__connect_offset")


class KeySpecError(ValueError):
    """The configured key cannot be taken from the records."""


@dataclass(frozen=True)
class KeySpec:
    mode: str  # none | kafka | record_key | record_value
    fields: tuple[str, ...]
    deletes: bool


@dataclass(frozen=True)
class Shaped:
    frame: DataFrame  # wire columns, then OP_COLUMN and the position columns; in record order
    fields: StructType  # the typed columns (auto.create / auto.evolve)
    pk: tuple[str, ...]


def _ref(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _key_columns(
    records: DataFrame, spec: KeySpec, value_types: dict[str, DataType]
) -> list[tuple[str, Column, DataType]]:
    # pyspark: config validation imports this module (the jdbc-sink class)
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructType

    key_type = records.schema["key"].dataType
    if isinstance(key_type, StructType):
        names = list(spec.fields) or key_type.fieldNames()
        missing = [n for n in names if n not in key_type.fieldNames()]
        if missing:
            raise KeySpecError(
                f"pk.fields {missing} are not fields of the record key {key_type.fieldNames()}"
            )
        return [(n, F.col("key")[n], key_type[n].dataType) for n in names]
    if not spec.fields:
        raise KeySpecError("pk.mode=record_key with a text key needs pk.fields naming the key column(s)")
    out: list[tuple[str, Column, DataType]] = []
    for n in spec.fields:
        dt = value_types.get(n, StringType())
        field = F.get_json_object(F.col("key"), f"$.{n}")
        # One field: a JSON object key that has it (a change event's key) gives it, else the whole key.
        raw = F.coalesce(field, F.col("key")) if len(spec.fields) == 1 else field
        out.append((n, raw if isinstance(dt, StringType) else raw.cast(dt), dt))
    return out


def shape(records: DataFrame, spec: KeySpec) -> Shaped:
    """The rows ``records`` become, before the dialect's load form (``wire``)."""
    # pyspark: config validation imports this module (the jdbc-sink class)
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

    value_type = records.schema["value"].dataType
    struct_value = isinstance(value_type, StructType)
    if struct_value:
        assert isinstance(value_type, StructType)
        cols = [(f.name, F.col("value")[f.name], f.dataType) for f in value_type.fields]
    else:  # binary values (value.converter=bytes) stay bytes: a BYTEA/BLOB column, byte for byte
        as_text = not isinstance(value_type, BinaryType)
        cols = [
            (c, F.col(c).cast("string") if c == "value" and as_text else F.col(c), records.schema[c].dataType)
            for c in RECORD_FIELDS
        ]
        cols = [(n, e, StringType() if n == "value" and as_text else t) for n, e, t in cols]
    types = {n: t for n, _, t in cols}
    pk: tuple[str, ...] = ()
    if spec.mode == "kafka":
        kafka = [
            (KAFKA_FIELDS[0], F.col("topic"), StringType()),
            (KAFKA_FIELDS[1], F.col("partition"), StringType()),
            (KAFKA_FIELDS[2], F.col("offset"), LongType()),
        ]
        cols, pk = kafka + cols, KAFKA_FIELDS
    elif spec.mode == "record_value":
        missing = [k for k in spec.fields if k not in types]
        if missing:
            raise KeySpecError(f"pk.fields {missing} are not fields of the records {list(types)}")
        pk = spec.fields
    elif spec.mode == "record_key":
        keys = _key_columns(records, spec, types)
        names = {n for n, _, _ in keys}
        cols = keys + [c for c in cols if c[0] not in names]
        pk = tuple(n for n, _, _ in keys)
    tombstone = F.col("value").isNull()
    if not spec.deletes and struct_value:
        records = records.where(~tombstone)
    op = F.when(tombstone, F.lit("d")).otherwise(F.lit("u")) if spec.deletes else F.lit("u")
    frame = records.orderBy("topic", "partition", "offset").select(
        *[e.alias(n) for n, e, _ in cols],
        op.alias(OP_COLUMN),
        F.col("topic").alias(POSITION_COLUMNS[0]),
        F.col("partition").alias(POSITION_COLUMNS[1]),
        F.col("offset").alias(POSITION_COLUMNS[2]),
    )
    fields = StructType([StructField(n, t, n not in pk) for n, _, t in cols])
    return Shaped(frame, fields, pk)


def wire(dialect: Dialect, shaped: Shaped, columns: Sequence[str]) -> DataFrame:
    """The frame in the load form of ``dialect``: text COPY (PostgreSQL) or LOAD DATA (MariaDB)
    can carry. PostgreSQL: nested values as JSON, binary as ``\\x<hex>``, the rest as Arrow
    writes it. MariaDB: everything as text — timestamps as UTC ``yyyy-MM-dd HH:mm:ss.SSSSSS``,
    booleans as 1/0, binary as hex (UNHEX-ed by the merge)."""
    from pyspark.sql import types as T  # pyspark: config validation imports this module (the jdbc-sink class)

    exprs: list[str] = []
    for name in columns:
        dt = shaped.fields[name].dataType
        ref = _ref(name)
        if isinstance(dt, T.ArrayType | T.MapType | T.StructType):
            e = f"to_json({ref})"
        elif isinstance(dt, T.BinaryType):
            e = f"concat('\\\\x', lower(hex({ref})))" if dialect is Dialect.POSTGRESQL else f"hex({ref})"
        elif dialect is Dialect.POSTGRESQL:
            e = ref
        elif isinstance(dt, T.BooleanType):
            e = f"CAST(CAST({ref} AS INT) AS STRING)"
        elif isinstance(dt, T.TimestampType | T.TimestampNTZType):
            e = f"date_format({ref}, 'yyyy-MM-dd HH:mm:ss.SSSSSS')"
        else:
            e = f"CAST({ref} AS STRING)"
        exprs.append(f"{e} AS {ref}")
    extra = [_ref(c) for c in (OP_COLUMN, *POSITION_COLUMNS)]
    return shaped.frame.selectExpr(*exprs, *extra)
