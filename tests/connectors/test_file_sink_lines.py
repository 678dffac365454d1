"""The file sink's lines, made in Arrow, are byte for byte what earlier releases wrote with Spark's
``to_json(value, {"ignoreNullFields": "false"})`` and ``CAST(value AS STRING)`` (connectors.file.sink.
value_line): a file written across the upgrade reads as one."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pytest

from sluice.connectors.file.sink import value_line

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

_TS = datetime(2024, 2, 29, 23, 59, 59, 123450)
_ESCAPED = 'q"b\\s/\b\f\n\r\t\x01\x1f é €'
#: name: (Spark type of the value, values)
CASES: dict[str, tuple[str, list[Any]]] = {
    "nested struct": (
        "struct<id:int,inner:struct<a:string,b:double>,note:string>",
        [
            {"id": 1, "inner": {"a": "x", "b": 1.5}, "note": None},
            {"id": None, "inner": None, "note": "n"},
            {"id": 2, "inner": {"a": None, "b": None}, "note": _ESCAPED},
            None,
        ],
    ),
    "arrays": (
        "struct<tags:array<string>,nums:array<bigint>,rows:array<struct<x:int,y:string>>>",
        [
            {"tags": ["a", None, "c"], "nums": [], "rows": [{"x": 1, "y": None}, None]},
            {"tags": None, "nums": [-(2**63), 2**63 - 1], "rows": []},
        ],
    ),
    "maps": (
        "struct<m:map<string,int>,n:map<int,struct<v:string>>>",
        [
            {"m": {"k": 1, "z": None, 'e"sc': 2}, "n": {1: {"v": None}, 2: None}},
            {"m": None, "n": {}},
        ],
    ),
    "top-level array": ("array<struct<a:int,b:array<int>>>", [[{"a": 1, "b": [None, 2]}, None], [], None]),
    "top-level map": ("map<string,array<string>>", [{"a": ["x", None], "b": None}, {}, None]),
    "decimals": (
        "struct<small:decimal(5,2),zero:decimal(12,10),big:decimal(38,10)>",
        [
            {
                "small": Decimal("-0.01"),
                "zero": Decimal(0),
                "big": Decimal("-1234567890123456789012345678.0123456789"),
            },
            {"small": Decimal("999.99"), "zero": Decimal("1E-10"), "big": None},
        ],
    ),
    "timestamps and dates": (
        "struct<ts:timestamp,ntz:timestamp_ntz,d:date>",
        [
            {"ts": _TS, "ntz": _TS, "d": date(2024, 2, 29)},
            {"ts": datetime(1, 1, 1), "ntz": datetime(9999, 12, 31, 23, 59, 59, 999999), "d": date(1, 1, 1)},
            {"ts": None, "ntz": None, "d": None},
        ],
    ),
    "doubles and floats": (
        "struct<d:double,f:float,nested:array<double>>",
        [
            {"d": 0.1, "f": 1.1, "nested": [1e10, -0.0, float("nan"), float("inf"), 1e-5, 1e7]},
            {"d": -1.5e-300, "f": float("-inf"), "nested": None},
        ],
    ),
    "binary and booleans": (
        "struct<b:binary,ok:boolean,t:tinyint,s:smallint>",
        [
            {"b": b"\x00\xff\xfe", "ok": True, "t": -128, "s": 32767},
            {"b": b"", "ok": False, "t": None, "s": None},
        ],
    ),
    "strings": ("string", [_ESCAPED, "", None, "line"]),
    "bytes": ("binary", [b"caf\xe9", b"", None]),
    "longs": ("bigint", [-(2**63), 0, None]),
    "booleans": ("boolean", [True, False, None]),
    "doubles": ("double", [0.1, 1e10, 1e-5, 1e7, 123456.789, float("nan"), float("-inf"), -0.0, None]),
    "floats": ("float", [1.1, 3.4e38, None]),
    "decimal": ("decimal(12,10)", [Decimal(0), Decimal("12.5"), Decimal("-0.0000000001"), None]),
    "timestamp": ("timestamp", [_TS, datetime(2024, 2, 29), datetime(2024, 2, 29, 0, 0, 0, 100000), None]),
    "timestamp_ntz": ("timestamp_ntz", [_TS, datetime(1, 1, 1), None]),
    "date": ("date", [date(2024, 2, 29), date(1, 1, 1), None]),
}


def spark_line(df: DataFrame) -> Column:
    """The file sink's line of earlier releases (its ``value_line``, in Spark)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructType

    data_type = df.schema["value"].dataType
    value = F.col("value")
    if isinstance(data_type, BinaryType):
        return F.coalesce(value, F.lit(b"null"))
    if isinstance(data_type, StructType | ArrayType | MapType):
        text = F.to_json(value, {"ignoreNullFields": "false"})
    elif isinstance(data_type, StringType):
        text = value
    else:
        text = value.cast("string")
    return F.encode(F.coalesce(text, F.lit("null")), "UTF-8")


@pytest.mark.parametrize("name", list(CASES))
def test_arrow_lines_equal_sparks(spark: SparkSession, name: str) -> None:
    value_type, values = CASES[name]
    df = spark.createDataFrame([(i, v) for i, v in enumerate(values)], f"i int, value {value_type}")
    table = df.select("i", "value", spark_line(df).alias("line")).orderBy("i").toArrow()
    expected = [bytes(b) for b in table.column("line").to_pylist()]
    assert [bytes(b) for b in value_line(table.column("value")).to_pylist()] == expected
