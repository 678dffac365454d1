"""A batch's records as a lake table's rows: which columns, which key, which rows delete.

Spark column expressions only, so the shaping is part of the batch's one write job. A struct
``value`` (a converter's records, ``ExtractNewRecordState``'s rows) gives one column per field;
any other value is written with the record's coordinates (``topic, partition, offset, key, value,
timestamp``), as jdbc-sink does. In upsert mode the key columns are ``pk.fields`` or the record
key's fields; a key field is taken from the value, or from the key when the value has none (a
tombstone's). Within a batch the last record of a key wins (by queue offset: one key lives in one
queue), so one MERGE applies the batch as the records would one by one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sluice.connectors.config import ConfigError, FieldError
from sluice.connectors.lake.config import UPSERT
from sluice.connectors.records import OP_HEADER

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: The upsert rows' delete flag (a MERGE's ``WHEN MATCHED AND … THEN DELETE``); never a table column.
DELETE_COLUMN = "_sluice_delete"
COORDINATES = ("topic", "partition", "offset", "key", "value", "timestamp")
#: Debezium's markers of a delete that ``ExtractNewRecordState`` kept as a row
#: (``delete.handling.mode=rewrite`` adds ``__deleted``; ``add.fields=op`` adds ``__op``).
DELETED_FIELD = "__deleted"
OP_FIELD = "__op"


@dataclass(frozen=True)
class RowRules:
    mode: str
    pk_fields: tuple[str, ...]
    deletes: bool
    owner: str  # "connector 'x'", for errors


@dataclass(frozen=True)
class TableRows:
    """The rows to write and, in upsert mode, the key columns (``DELETE_COLUMN`` among the rows)."""

    rows: DataFrame
    keys: tuple[str, ...]

    @property
    def columns(self) -> list[str]:
        return [c for c in self.rows.columns if c != DELETE_COLUMN]


def table_rows(records: DataFrame, rules: RowRules) -> TableRows:
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    value_type = records.schema["value"].dataType
    key_type = records.schema["key"].dataType
    key_fields = [f.name for f in key_type.fields] if isinstance(key_type, StructType) else []
    if not isinstance(value_type, StructType):
        key = F.to_json("key") if key_fields else F.col("key")
        rows = records.select(*[key.alias("key") if c == "key" else F.col(c) for c in COORDINATES])
        if rules.mode == UPSERT:
            raise _upsert_error(rules, "its values are not structs (set a converter with schemas)")
        return TableRows(rows, ())
    value_fields = [f.name for f in value_type.fields]
    if rules.mode != UPSERT:
        return TableRows(records.where(F.col("value").isNotNull()).select("value.*"), ())
    keys = rules.pk_fields or tuple(key_fields)
    if not keys:
        raise _upsert_error(rules, "pk.fields is empty and the record keys are not structs")
    unknown = [k for k in keys if k not in value_fields and k not in key_fields]
    if unknown:
        raise _upsert_error(rules, f"pk.fields {unknown} are fields of neither the value nor the key")
    columns = [_column(f, f in key_fields) for f in value_fields]
    columns += [F.col(f"key.`{k}`").alias(k) for k in key_fields if k in keys and k not in value_fields]
    if rules.deletes:
        deleted = _deleted(records, value_fields)
    else:  # a tombstone is skipped, a kept delete is a row like any other
        records, deleted = records.where(F.col("value").isNotNull()), F.lit(False)
    rows = records.select(*columns, deleted.alias(DELETE_COLUMN), "offset")
    latest = Window.partitionBy(*[F.col(f"`{k}`") for k in keys]).orderBy(F.col("offset").desc())
    rows = rows.withColumn("_sluice_rank", F.row_number().over(latest)).where("_sluice_rank = 1")
    return TableRows(rows.drop("_sluice_rank", "offset"), tuple(keys))


def _column(name: str, also_in_key: bool) -> Column:
    from pyspark.sql import functions as F

    value = F.col(f"value.`{name}`")
    return (F.coalesce(value, F.col(f"key.`{name}`")) if also_in_key else value).alias(name)


def _deleted(records: DataFrame, value_fields: list[str]) -> Column:
    """A tombstone, a kept delete (``__deleted=true``, ``__op=d``) or a delete by header ``__op``."""
    from pyspark.sql import functions as F

    flag = F.col("value").isNull() | F.coalesce(F.col("headers")[OP_HEADER] == "d", F.lit(False))
    if DELETED_FIELD in value_fields:
        marked = F.lower(F.col(f"value.`{DELETED_FIELD}`").cast("string")) == "true"
        flag = flag | F.coalesce(marked, F.lit(False))
    if OP_FIELD in value_fields:
        flag = flag | F.coalesce(F.col(f"value.`{OP_FIELD}`") == "d", F.lit(False))
    return flag


def _upsert_error(rules: RowRules, why: str) -> ConfigError:
    return ConfigError([FieldError("insert.mode", f"{rules.owner}: insert.mode=upsert needs a key: {why}")])
