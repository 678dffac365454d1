"""Decimals go to Kafka's base64 payload in Arrow (connectors.arrow_messages.connect_payloads): every
value must give exactly the bytes of the Python reference (``_unscaled_bytes``: Java's
``BigInteger.toByteArray`` of the unscaled value); and every payload reads back in Arrow (the sink's
decode: connectors.arrow_json.converted) as the Python reference reads it (padded encodings), or is
refused where the reference finds no value (bad base64, out of range)."""

from __future__ import annotations

import base64
import binascii
import json
import random
from decimal import Context, Decimal

import pyarrow as pa
import pytest

from sluice.connectors.arrow_json import converted
from sluice.connectors.arrow_messages import connect_payloads


def _unscaled_bytes(value: Decimal, scale: int) -> bytes:
    """Kafka's Decimal encoding: ``BigInteger.toByteArray()`` of the unscaled value (minimal length)."""
    unscaled = int(value.scaleb(scale, context=Context(prec=100)))
    return unscaled.to_bytes(max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1), "big", signed=True)


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
    return (
        None
        if len(str(abs(unscaled))) > precision
        else Decimal(unscaled).scaleb(-scale, context=Context(prec=100))
    )


def _edges(precision: int) -> list[int]:
    limit = 10**precision - 1
    powers = [sign * (2**k + d) for k in range(64) for d in (-1, 0, 1) for sign in (1, -1)]
    rng = random.Random(precision)
    values = [0, limit, -limit, *powers, *(rng.randint(-limit, limit) for _ in range(300))]
    return sorted({v for v in values if abs(v) <= limit})


@pytest.mark.parametrize(
    ("precision", "scale"), [(1, 0), (12, 2), (18, 0), (18, 4), (18, 18), (19, 0), (30, 5), (38, 0), (38, 38)]
)
def test_decimal_payloads_match_the_python_reference(precision: int, scale: int) -> None:
    target = pa.decimal128(precision, scale)
    values = [Decimal(v).scaleb(-scale, context=Context(prec=100)) for v in _edges(precision)]
    payloads = connect_payloads(pa.array([*values, None], target)).to_pylist()
    encoded = [
        {"d": d, "b": None if d is None else json.loads(p)}
        for d, p in zip([*values, None], payloads, strict=True)
    ]
    assert payloads[-1] == "null"
    wrong = [
        (r["d"], r["b"])
        for r in encoded
        if r["b"] != (None if r["d"] is None else base64.b64encode(_unscaled_bytes(r["d"], scale)).decode())
    ]
    assert wrong == []

    odd = [
        "", "!!", "AAAAAAAAAAAAAAAAAAAAAAAAAAE=",  # not base64; zero-padded one
        base64.b64encode(b"\x00\x00\x01").decode(), base64.b64encode(b"\xff\xff\x80").decode(),
        base64.b64encode((10**precision).to_bytes(17, "big", signed=True)).decode(),  # one digit too many
    ]  # fmt: skip
    texts = [r["b"] for r in encoded] + odd
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
