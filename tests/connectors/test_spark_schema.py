"""Spark schema JSON typed in Arrow without PySpark (connectors.spark_schema) types it as PySpark's
own ``to_arrow_type(StructType.fromJson(...), timezone="UTC")`` does (pyspark's types need no JVM)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from sluice.connectors.spark_schema import struct_fields

_NESTED = T.StructType(
    [
        T.StructField("a", T.IntegerType()),
        T.StructField(
            "b",
            T.StructType(
                [
                    T.StructField("c", T.StringType(), nullable=False),
                    T.StructField("d", T.ArrayType(T.DecimalType(10, 2), containsNull=False)),
                ]
            ),
        ),
    ]
)
#: Each field's Spark type, from simple names to nested and not-nullable ones.
TYPES: dict[str, T.DataType] = {
    "string": T.StringType(),
    "binary": T.BinaryType(),
    "boolean": T.BooleanType(),
    "byte": T.ByteType(),
    "short": T.ShortType(),
    "integer": T.IntegerType(),
    "long": T.LongType(),
    "float": T.FloatType(),
    "double": T.DoubleType(),
    "date": T.DateType(),
    "timestamp": T.TimestampType(),
    "timestamp_ntz": T.TimestampNTZType(),
    "decimal(38,10)": T.DecimalType(38, 10),
    "decimal(5,0)": T.DecimalType(5, 0),
    "decimal": T.DecimalType(),
    "nested struct": _NESTED,
    "array": T.ArrayType(T.IntegerType()),
    "array of structs": T.ArrayType(T.StructType([T.StructField("x", T.TimestampType())])),
    "map": T.MapType(T.StringType(), T.LongType()),
    "nested map": T.MapType(
        T.IntegerType(), T.ArrayType(T.MapType(T.StringType(), T.DateType(), valueContainsNull=False))
    ),
    "empty struct": T.StructType([]),
}


@pytest.mark.parametrize("name", list(TYPES))
def test_arrow_types_equal_pysparks(name: str) -> None:
    schema = T.StructType([T.StructField("v", TYPES[name]), T.StructField("w", T.IntegerType(), False)])
    own_json = schema.json()
    expected = to_arrow_type(T.StructType.fromJson(json.loads(own_json)), timestamp_utc=True)
    fields = struct_fields(own_json)
    assert pa.struct(fields) == expected
    assert [f.nullable for f in fields] == [f.nullable for f in expected]


def test_not_a_struct_or_an_unknown_type_is_refused() -> None:
    with pytest.raises(TypeError, match="not a Spark struct schema"):
        struct_fields('"long"')
    with pytest.raises(TypeError, match="no Arrow type for the Spark type 'interval'"):
        struct_fields('{"type":"struct","fields":[{"name":"i","type":"interval","nullable":true}]}')
