"""Decimals up to 18 digits go to Kafka's base64 payload in Spark SQL (no Python UDF): every value
must give exactly the bytes of the Python reference (``_unscaled_bytes``); and every payload reads
back in Arrow (the sink's decode: connectors.arrow_json.converted) as the Python reference reads it
(padded encodings), or is refused where the reference finds no value (bad base64, out of range)."""

from __future__ import annotations

import base64
import binascii
import random
from decimal import Decimal

import pyarrow as pa
import pytest

from sluice.connectors.arrow_json import converted
from sluice.connectors.connect_json import _unscaled_bytes, decimal_to_base64


def _reference_read(text: str | None, precision: int, scale: int) -> Decimal | None:
    if text is None:
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    if not raw:
        return None
    unscaled = int.from_bytes(raw, "big", signed=True)
    return None if len(str(abs(unscaled))) > precision else Decimal(unscaled).scaleb(-scale)


def _edges(precision: int) -> list[int]:
    limit = 10**precision - 1
    powers = [sign * (2**k + d) for k in range(64) for d in (-1, 0, 1) for sign in (1, -1)]
    rng = random.Random(precision)
    values = [0, limit, -limit, *powers, *(rng.randint(-limit, limit) for _ in range(300))]
    return sorted({v for v in values if abs(v) <= limit})


@pytest.mark.parametrize(("precision", "scale"), [(1, 0), (12, 2), (18, 0), (18, 4), (18, 18)])
def test_native_decimal_payloads_match_the_python_reference(spark, precision: int, scale: int) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType, StructField, StructType

    data_type = DecimalType(precision, scale)
    values = [Decimal(v).scaleb(-scale) for v in _edges(precision)]
    frame = spark.createDataFrame([(v,) for v in [*values, None]], StructType([StructField("d", data_type)]))
    encoded = frame.select("d", decimal_to_base64(F.col("d"), data_type).alias("b")).collect()
    wrong = [
        (r["d"], r["b"])
        for r in encoded
        if r["b"] != (None if r["d"] is None else base64.b64encode(_unscaled_bytes(r["d"], scale)).decode())
    ]
    assert wrong == []

    odd = [
        "", "!!", "AAAAAAAAAAAAAAAAAAAAAAAAAAE=",  # not base64; zero-padded one
        base64.b64encode(b"\x00\x00\x01").decode(), base64.b64encode(b"\xff\xff\x80").decode(),
        base64.b64encode((10**precision).to_bytes(9, "big", signed=True)).decode(),  # one digit too many
    ]  # fmt: skip
    texts = [r["b"] for r in encoded] + odd
    target = pa.decimal128(precision, scale)
    assert converted(pa.array(texts[: -len(odd)], pa.string()), target).to_pylist() == [
        r["d"] for r in encoded
    ]
    for text in texts:
        expected = _reference_read(text, precision, scale)
        if expected is None and text is not None:
            with pytest.raises((ValueError, pa.ArrowInvalid)):
                converted(pa.array([text], pa.string()), target)
        else:
            assert converted(pa.array([text], pa.string()), target).to_pylist() == [expected], text
