"""Spark DDL read without a JVM (connectors.spark_ddl), as Spark reads the same text."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from pyspark.sql import types as T

from sluice.connectors.spark_ddl import parse_ddl

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


READS = [
        (
            "device STRING, seq BIGINT, temp DOUBLE, ts TIMESTAMP",
            T.StructType([
                T.StructField("device", T.StringType()), T.StructField("seq", T.LongType()),
                T.StructField("temp", T.DoubleType()), T.StructField("ts", T.TimestampType()),
            ]),
        ),
        ("a: int, b: string",
         T.StructType([T.StructField("a", T.IntegerType()), T.StructField("b", T.StringType())])),
        ("id int NOT NULL COMMENT 'the key'",
         T.StructType([T.StructField("id", T.IntegerType(), False, {"comment": "the key"})])),
        ("`odd name` decimal(12,2), `a``b` dec", T.StructType([
            T.StructField("odd name", T.DecimalType(12, 2)), T.StructField("a`b", T.DecimalType(10, 0))])),
        ("array<int>", T.ArrayType(T.IntegerType())),
        ("map<string, array<bigint>>", T.MapType(T.StringType(), T.ArrayType(T.LongType()))),
        ("s struct<x: smallint, y tinyint>, n VARCHAR(20), d date, t timestamp_ntz, b binary, f float",
         T.StructType([
             T.StructField("s", T.StructType([
                 T.StructField("x", T.ShortType()), T.StructField("y", T.ByteType())])),
             T.StructField("n", T.VarcharType(20)), T.StructField("d", T.DateType()),
             T.StructField("t", T.TimestampNTZType()), T.StructField("b", T.BinaryType()),
             T.StructField("f", T.FloatType()),
         ])),
        ("string STRING, date DATE", T.StructType([
            T.StructField("string", T.StringType()), T.StructField("date", T.DateType())])),
        ("BOOLEAN", T.BooleanType()),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), READS)
def test_ddl_reads_as_expected(text: str, expected: T.DataType) -> None:
    assert parse_ddl(text) == expected


def test_ddl_reads_as_spark_itself_reads_it(spark: SparkSession) -> None:
    from pyspark.sql.types import _parse_datatype_string

    for text, _ in READS:
        assert parse_ddl(text) == _parse_datatype_string(text), text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty schema"),
        ("a INTEGR", "unknown type 'integr'"),
        ("a array<int", "expected '>'"),
        ("a int,", "expected 'more'"),
        ("a int; drop", "unexpected ';"),
        ("a decimal(10,", "expected 'more'"),
    ],
)
def test_ddl_errors_say_what_was_not_read(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        parse_ddl(text)
