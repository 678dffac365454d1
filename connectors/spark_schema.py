"""Spark schema JSON (``StructType.json()``) as Arrow types, without PySpark.

The json converter names each record's own schema in a header, as Spark schema JSON
(connectors.converters: a batch merges the schemas of several topics into one struct, and a sink
narrows each table's records back to their own fields, connectors.jdbc.sink.own_struct). A sink
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
