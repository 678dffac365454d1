"""Spark schema JSON (``StructType.json()``) as Arrow types, without PySpark.

The json converter names each record's own schema in a header, as Spark schema JSON
(connectors.converters: a batch merges the schemas of several topics into one struct, and a sink
narrows each table's records back to their own fields, ``own_struct``). A sink
reads that JSON in Arrow, as ``pyspark.sql.pandas.types.to_arrow_type(StructType.fromJson(...),
timezone="UTC")`` would type it (the workers' session zone is UTC, activities.spark).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import pyarrow as pa

_DECIMAL: Final = re.compile(r"decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)")
#: Spark's default decimal, ``decimal`` without precision and scale.
_DEFAULT_DECIMAL: Final = (10, 0)


def struct_fields(schema_json: str) -> list[pa.Field]:
    """The fields of a Spark ``struct`` schema's JSON, typed in Arrow."""
    import pyarrow as pa

    struct = arrow_type(json.loads(schema_json))
    if not pa.types.is_struct(struct):
        raise TypeError(f"not a Spark struct schema: {schema_json[:200]!r}")
    return list(struct)


def arrow_type(spark_type: str | Mapping[str, Any]) -> pa.DataType:
    """The Arrow type of one Spark type in schema JSON: a simple type's name (``"long"``,
    ``"decimal(10,2)"``) or a ``struct``, ``array`` or ``map`` object."""
    import pyarrow as pa

    if isinstance(spark_type, str):
        return _simple_type(spark_type)
    kind = spark_type.get("type")
    if kind == "struct":
        return pa.struct(
            [
                pa.field(f["name"], arrow_type(f["type"]), nullable=bool(f.get("nullable", True)))
                for f in spark_type["fields"]
            ]
        )
    if kind == "array":
        element = arrow_type(spark_type["elementType"])
        return pa.list_(pa.field("element", element, nullable=bool(spark_type.get("containsNull", True))))
    if kind == "map":
        key = pa.field("key", arrow_type(spark_type["keyType"]), nullable=False)
        nullable = bool(spark_type.get("valueContainsNull", True))
        return pa.map_(key, pa.field("value", arrow_type(spark_type["valueType"]), nullable=nullable))
    raise TypeError(f"no Arrow type for the Spark type {json.dumps(spark_type)[:200]}")


def _simple_type(name: str) -> pa.DataType:
    import pyarrow as pa

    simple = {
        "string": pa.string(),
        "binary": pa.binary(),
        "boolean": pa.bool_(),
        "byte": pa.int8(),
        "short": pa.int16(),
        "integer": pa.int32(),
        "long": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
        "date": pa.date32(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "timestamp_ntz": pa.timestamp("us"),
    }
    if name in simple:
        return simple[name]
    if name == "decimal":
        return pa.decimal128(*_DEFAULT_DECIMAL)
    found = _DECIMAL.fullmatch(name)
    if found:
        return pa.decimal128(int(found.group(1)), int(found.group(2)))
    raise TypeError(f"no Arrow type for the Spark type {name!r}")


def own_struct(records: pa.Table, column: str, own_json: str) -> pa.Table:
    """``value`` or ``key`` narrowed to its topic's own fields and types (the json converter merged
    the schemas of several topics into one struct for the batch; connect_schemas.merge_schemas), so
    a table or index gets its own columns and, with ``pk.mode=record_key``, its own key fields."""
    import pyarrow as pa
    import pyarrow.compute as pc

    merged = records.column(column).combine_chunks()
    by_name = {merged.type.field(i).name: child for i, child in enumerate(merged.flatten())}
    children, fields = [], []
    for f in struct_fields(own_json):  # Spark's schema JSON, typed as the session (UTC) types it
        child = by_name.get(f.name)
        children.append(pa.nulls(len(merged), f.type) if child is None else pc.cast(child, f.type))
        fields.append(pa.field(f.name, f.type))
    narrowed = pa.StructArray.from_arrays(children, fields=fields, mask=pc.is_null(merged))
    return records.set_column(records.schema.get_field_index(column), column, narrowed)


def own_schema_parts(records: pa.Table) -> list[pa.Table]:
    """A batch split by topic, each part narrowed to its topic's own value and key schema where the
    json converter named one (``sluice.value.schema``/``sluice.key.schema`` headers), record order
    kept within a part. One part, unchanged, when no record names an own schema."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from sluice.connectors.converters import KEY_SCHEMA_HEADER, VALUE_SCHEMA_HEADER

    headers = records.column("headers")
    own = {h: pc.map_lookup(headers, pa.scalar(h), "first") for h in (VALUE_SCHEMA_HEADER, KEY_SCHEMA_HEADER)}
    if all(column.null_count == len(column) for column in own.values()):
        return [records]
    parts = []
    topics = records.column("topic")
    for topic in sorted({t for t in topics.to_pylist() if t is not None}):
        part = records.filter(pc.equal(topics, topic))
        for column, header in (("value", VALUE_SCHEMA_HEADER), ("key", KEY_SCHEMA_HEADER)):
            named = [s for s in own[header].filter(pc.equal(topics, topic)).to_pylist() if s]
            if named:
                part = own_struct(part, column, named[0])
        parts.append(part)
    return parts
