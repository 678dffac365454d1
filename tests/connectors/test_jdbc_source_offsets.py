"""jdbc-source's Arrow record offsets against the Spark expression they replace, type by type.

Offsets identify records (the runtime's re-run de-duplication matches a re-run's records to the
messages an earlier attempt sent by partition and offset), so the Arrow framing of
connectors.jdbc.records must give exactly what the Spark expression of earlier releases gave:
``xxhash64(coalesce(timestamps), incrementing, to_json(key or row)) & (2^63 - 1)``.
:func:`old_frame` is that expression, kept here as the reference; each case runs it and the new
framing on the same rows, for every column type jdbc-source maps and every mode. FLOAT and DOUBLE
match except where JDK 17's ``toString`` is not the shortest decimal (connectors.jdbc.offsets):
the values below are ones it renders shortest, and the last test pins the difference down.
"""

from __future__ import annotations

import random
import struct
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from sluice.connectors.jdbc.records import RecordShape, record_schema, to_records
from sluice.connectors.jdbc.types import MappedColumn, arrow_type
from sluice.connectors.spark_json import java_float_text, json_objects

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

MASK = (1 << 63) - 1
COLUMN = 'c "\\ü'  # the column under test: its name needs JSON escapes too
CONTROLS = "".join(chr(i) for i in range(32))
TYPES: dict[str, tuple[str, list[Any]]] = {
    "tinyint": ("TINYINT", [-128, -1, 0, 127, None]),
    "smallint": ("SMALLINT", [-32768, -1, 0, 32767, None]),
    "int": ("INT", [-(2**31), -1, 0, 2**31 - 1, None]),
    "bigint": ("BIGINT", [-(2**63), -1, 0, 2**63 - 1, None]),
    "decimal small": ("DECIMAL(5,2)", [Decimal("-0.01"), Decimal("0.00"), Decimal("999.99"), None]),
    "decimal long": ("DECIMAL(18,4)", [Decimal("-99999999999999.9999"), Decimal("0.0001"), Decimal(0), None]),
    "decimal large": (
        "DECIMAL(38,10)",
        [
            Decimal("-1234567890123456789012345678.0123456789"),
            Decimal("1E-10"),
            Decimal("0.0000001"),
            Decimal(0),
            Decimal("12.5"),
            None,
        ],
    ),  # fmt: skip
    "decimal unsigned bigint": ("DECIMAL(20,0)", [Decimal(0), Decimal(2**64 - 1), Decimal(2**63), None]),
    "double": (
        "DOUBLE",
        [
            1.5,
            0.1,
            -0.0,
            0.0,
            1e7,
            9999999.5,
            1e-3,
            1e-4,
            123456.789,
            -2.5e-300,
            1e300,
            5e-324,
            2.2250738585072014e-308,
            1.7976931348623157e308,
            float("nan"),
            float("inf"),
            float("-inf"),
            None,
        ],
    ),  # fmt: skip
    "float": ("FLOAT", [0.1, 1.5, -2.5, 1e-3, 1234567.0, 3.4e38, 1.1754944e-37, float("nan"), None]),
    "boolean": ("BOOLEAN", [True, False, None]),
    "string": (
        "STRING",
        ['say "hi"', "back\\slash", CONTROLS, "\x7f/\u2028é😀 ü", "", "plain", None],
    ),
    "string plain": ("STRING", ["abc", "é 😀", "", None]),
    "date": (
        "DATE",
        [date(1, 1, 1), date(1969, 12, 31), date(1970, 1, 1), date(2024, 2, 29), date(9999, 12, 31), None],
    ),  # fmt: skip
    "timestamp": (
        "TIMESTAMP",
        [
            datetime(1, 1, 1),
            datetime(1969, 12, 31, 23, 59, 59, 999999),
            datetime(1970, 1, 1, 0, 0, 0, 500),
            datetime(2024, 2, 29, 23, 59, 59, 123456),
            datetime(9999, 12, 31, 23, 59, 59, 999999),
            None,
        ],
    ),  # fmt: skip
    "timestamp_ntz": (
        "TIMESTAMP_NTZ",
        [
            datetime(1, 1, 1),
            datetime(1969, 12, 31, 23, 59, 59, 999999),
            datetime(1970, 1, 1, 0, 0, 0, 500),
            datetime(2024, 2, 29, 23, 59, 59, 123456),
            datetime(9999, 12, 31, 23, 59, 59, 999999),
            None,
        ],
    ),  # fmt: skip
    "binary": ("BINARY", [b"", b"\x00", b"\x00\xff\x80", b"ab", b"abc", bytes(range(256)), None]),
}
INTEGRAL = ("TINYINT", "SMALLINT", "INT", "BIGINT")


def mode_shapes(ddl: str) -> dict[str, RecordShape]:
    """Every mode over the case's columns: ``id`` INT, ``ts`` TIMESTAMP (one null), ``nts``
    TIMESTAMP_NTZ, ``big`` DECIMAL(20,0) and the column under test, keyed and keyless."""

    def shape(keys: tuple[str, ...] = (), ts: tuple[str, ...] = (), inc: str = "") -> RecordShape:
        return RecordShape("t", "p", keys, ts, inc, id_offset=False)

    shapes = {
        "bulk keyless": shape(),
        "bulk keyed": shape(keys=("id", COLUMN)),
        "timestamp keyless": shape(ts=("ts",)),
        "timestamp keyed, two timestamp columns": shape(keys=(COLUMN,), ts=("ts", "nts")),
        "incrementing decimal keyless": shape(inc="big"),
        "incrementing decimal keyed": shape(keys=("id",), inc="big"),
        "timestamp+incrementing keyless": shape(ts=("ts",), inc="id"),
        "timestamp+incrementing keyed": shape(keys=(COLUMN,), ts=("nts",), inc="id"),
        "incrementing id": RecordShape("t", "p", ("id",), (), "id", id_offset=True),
    }
    if ddl in INTEGRAL:  # the column under test as the incrementing column
        shapes["timestamp+incrementing on it"] = shape(ts=("ts", "nts"), inc=COLUMN)
        shapes["incrementing id on it"] = RecordShape("t", "p", (), (), COLUMN, id_offset=True)
    if ddl == "DECIMAL(20,0)":
        shapes["incrementing on it"] = shape(keys=("id",), inc=COLUMN)
    return shapes


def case_rows(ddl: str, values: list[Any]) -> tuple[pa.RecordBatch, list[MappedColumn]]:
    """The case's rows as the read path types them (``arrow_type`` of each column's DDL)."""
    n = len(values)
    stamps = [datetime(2024, 1, 1, 0, 0, i, 1000 * i) for i in range(n)]
    columns = {
        "id": ("INT", [i + 1 for i in range(n)]),
        "ts": ("TIMESTAMP", [None if i == 1 else s for i, s in enumerate(stamps)]),
        "nts": ("TIMESTAMP_NTZ", [datetime(1999, 1, 1, 12, 0, 0, i) for i in range(n)]),
        "big": ("DECIMAL(20,0)", [Decimal(2**64 - 1 - i) for i in range(n)]),
        COLUMN: (ddl, values),
    }
    arrays = [pa.array(v, arrow_type(d)) for d, v in columns.values()]
    mapped = [MappedColumn(name, "test", d, True) for name, (d, _) in columns.items()]
    return pa.RecordBatch.from_arrays(arrays, names=list(columns)), mapped


def old_frame(frame: DataFrame, shape: RecordShape) -> tuple[Column, Column, Column]:
    """Offset, key-or-row JSON and timestamp as earlier releases computed them in Spark (the
    reference: JdbcSourceTask.read_range before #18)."""
    from pyspark.sql import functions as F

    columns = [F.col(f"`{c}`") for c in frame.columns]
    key = F.struct(*[F.col(f"`{k}`") for k in shape.keys]) if shape.keys else F.lit(None).cast("string")
    row_json = F.to_json(key) if shape.keys else F.to_json(F.struct(*columns))
    if shape.id_offset:
        offset = F.col(f"`{shape.incrementing}`").cast("long")
    else:
        parts = [F.coalesce(*[F.col(c) for c in shape.timestamps])] if shape.timestamps else []
        parts += [F.col(f"`{shape.incrementing}`")] if shape.incrementing else []
        offset = F.xxhash64(*parts, row_json).bitwiseAND(F.lit(MASK))
    stamp = F.lit(None).cast("timestamp")
    if shape.timestamps:
        stamp = F.coalesce(*[F.col(c) for c in shape.timestamps]).cast("timestamp")
    return offset, row_json, stamp


def spark_frame(spark: SparkSession, rows: pa.RecordBatch, columns: list[MappedColumn]) -> DataFrame:
    """The rows with the Spark schema the old read declared (``_parse_datatype_string`` of each DDL)."""
    from pyspark.sql.types import StructField, StructType, _parse_datatype_string

    schema = StructType([StructField(c.name, _parse_datatype_string(c.spark_ddl), True) for c in columns])
    return spark.createDataFrame(pa.Table.from_batches([rows]), schema=schema)


@pytest.mark.parametrize("case", list(TYPES))
def test_offsets_are_the_spark_expressions(spark: SparkSession, case: str) -> None:
    ddl, values = TYPES[case]
    rows, columns = case_rows(ddl, values)
    shapes = mode_shapes(ddl)
    frame = spark_frame(spark, rows, columns)
    selected = [frame["id"]]
    for i, shape in enumerate(shapes.values()):
        offset, row_json, stamp = old_frame(frame, shape)
        selected += [offset.alias(f"o{i}"), row_json.alias(f"j{i}"), stamp.alias(f"t{i}")]
    old = frame.select(*selected).collect()
    assert [r["id"] for r in old] == rows.column("id").to_pylist()  # rows in order
    for i, (mode, shape) in enumerate(shapes.items()):
        new = to_records(rows, record_schema(columns, shape), shape)
        named = shape.keys or rows.schema.names
        json = json_objects([(name, rows.column(name)) for name in named]).to_pylist()
        assert json == [r[f"j{i}"] for r in old], f"{case}, {mode}: to_json"
        assert new.column("offset").to_pylist() == [r[f"o{i}"] for r in old], f"{case}, {mode}: offset"
        stamps = [None if r[f"t{i}"] is None else r[f"t{i}"].replace(tzinfo=None) for r in old]
        got = [None if s is None else s.replace(tzinfo=None) for s in new.column("timestamp").to_pylist()]
        assert got == stamps, f"{case}, {mode}: timestamp"


def test_every_type_in_one_keyless_row(spark: SparkSession) -> None:
    """All the types side by side: the row JSON joins every field, nulls left out."""
    longest = max(len(v) for _, v in TYPES.values())
    arrays, columns = [], []
    for i, (ddl, values) in enumerate(TYPES.values()):
        padded = (values * longest)[:longest]
        arrays.append(pa.array(padded, arrow_type(ddl)))
        columns.append(MappedColumn(f"c{i}", "test", ddl, True))
    rows = pa.RecordBatch.from_arrays(arrays, names=[c.name for c in columns])
    shape = RecordShape("t", "p", (), ("c14",), "c0", id_offset=False)  # timestamp+incrementing
    offset, row_json, _ = old_frame(spark_frame(spark, rows, columns), shape)
    old = spark_frame(spark, rows, columns).select(offset.alias("o"), row_json.alias("j")).collect()
    names = rows.schema.names
    assert json_objects([(n, rows.column(n)) for n in names]).to_pylist() == [r["j"] for r in old]
    new = to_records(rows, record_schema(columns, shape), shape)
    assert new.column("offset").to_pylist() == [r["o"] for r in old]


def test_floats_differ_from_the_jvm_only_where_its_tostring_is_not_the_shortest(spark: SparkSession) -> None:
    """The one known difference (connectors.jdbc.offsets): on JDK 17 ``Double/Float.toString`` is
    sometimes longer than the shortest decimal that reads back (doubles of 1e16 to 1e19 mostly,
    floats of 1e7 and up); on JDK 19+ (the shortest, by specification) nothing differs."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, FloatType, LongType, StructField, StructType

    rng = random.Random(18)
    doubles = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(20_000)]
    doubles += [float(f"{rng.uniform(1, 10):.6f}e{rng.randint(-30, 30)}") for _ in range(20_000)]
    floats = [struct.unpack("<f", struct.pack("<I", rng.getrandbits(32)))[0] for _ in range(20_000)]
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    jdk = int(str(jvm.java.lang.System.getProperty("java.specification.version")))
    for kind, values, single in ((DoubleType(), doubles, False), (FloatType(), floats, True)):
        schema = StructType([StructField("i", LongType()), StructField("c", kind)])
        table = pa.table({"i": range(len(values)), "c": pa.array(values, pa.float32() if single else None)})
        texts = spark.createDataFrame(table, schema=schema).orderBy("i").select(F.to_json(F.struct("c")))
        different = [
            (java[5:-1], ours)
            for v, (java,) in zip(values, texts.collect(), strict=True)
            if java != '{"c":' + (ours := java_float_text(v, single)) + "}"
        ]
        if jdk >= 19:
            assert different == []
        for java, ours in different:  # both read back as the value; the JVM's has more digits
            assert _parse(java, single) == _parse(ours, single)
            assert _digits(java) >= _digits(ours), (java, ours)
        assert len(different) < len(values) / (5 if single else 50)


def _parse(text: str, single: bool) -> float:
    value = float(text)
    return struct.unpack("<f", struct.pack("<f", value))[0] if single else value


def _digits(text: str) -> int:
    return len(text.split("E")[0].lstrip("-").replace(".", "").strip("0"))
