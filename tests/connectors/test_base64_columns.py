"""Base64 columns decoded column-wise (connectors.base64_columns) equal Python's value-by-value
decode (``base64.b64decode``, ``connect_json.decimal_from_text``), or decline with None for the
value-by-value path to name what it cannot take; encoded column-wise, they equal
``base64.b64encode`` of each value, and decimals Kafka's shortest two's complement."""

from __future__ import annotations

import base64
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.connectors.base64_columns import binaries, decimal_bytes, decimals, texts
from sluice.connectors.connect_json import decimal_from_text


def _unscaled_text(value: int) -> str:
    """Kafka's Decimal payload: the unscaled value's shortest big-endian two's complement."""
    size = max(1, (value.bit_length() + 8) // 8)
    return base64.b64encode(value.to_bytes(size, "big", signed=True)).decode()


def _expected(texts: list[str | None], target: pa.Decimal128Type) -> pa.Array:
    values = [None if t is None else decimal_from_text(t, target.precision, target.scale) for t in texts]
    return pa.array(values, target)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.integers(-(10**12) + 1, 10**12 - 1)), max_size=40),
    st.integers(0, 5),
)
def test_decimals_equal_the_value_by_value_decode(values: list[int | None], cut: int) -> None:
    target = pa.decimal128(12, 2)
    texts = [None if v is None else _unscaled_text(v) for v in values]
    column = pa.array(texts, pa.string())
    assert decimals(column, target) == _expected(texts, target)
    sliced = column.slice(min(cut, len(texts)))  # an array that starts inside its buffers
    assert decimals(sliced, target) == _expected(texts[min(cut, len(texts)) :], target)


EDGES = [0, 1, -1, 127, 128, -128, -129, 255, 256, -32768, 2**63 - 1, -(2**63), 10**37, -(10**37) + 1]


@pytest.mark.parametrize("value", EDGES)
def test_sign_boundaries_and_wide_values(value: int) -> None:
    target = pa.decimal128(38, 4)
    texts = [_unscaled_text(value), None]
    got = decimals(pa.array(texts), target)
    assert got is not None and got == _expected(texts, target)
    assert got[0].as_py().as_tuple().digits == Decimal(abs(value)).as_tuple().digits or value == 0


DECLINED = {
    "over the precision": ([_unscaled_text(10**12)], pa.decimal128(12, 2)),
    "over 38 digits": ([_unscaled_text(10**38)], pa.decimal128(38, 0)),
    "an empty value": ([""], pa.decimal128(12, 2)),
    "a length not a multiple of four": (["AAA"], pa.decimal128(12, 2)),
    "a character outside the alphabet": (["A$=="], pa.decimal128(12, 2)),
    "padding inside": (["A=AA"], pa.decimal128(12, 2)),
    "three padding characters": (["A==="], pa.decimal128(12, 2)),
}


@pytest.mark.parametrize(("texts", "target"), DECLINED.values(), ids=list(DECLINED))
def test_what_is_not_canonical_or_does_not_fit_declines(texts: list[str], target: pa.Decimal128Type) -> None:
    assert decimals(pa.array(texts, pa.string()), target) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=30), st.integers(0, 4))
def test_binaries_equal_b64decode(values: list[bytes | None], cut: int) -> None:
    texts = [None if v is None else base64.b64encode(v).decode() for v in values]
    column = pa.array(texts, pa.string())
    got = binaries(column)
    assert got is not None and got.to_pylist() == values
    start = min(cut, len(values))
    sliced = binaries(column.slice(start))
    assert sliced is not None and sliced.to_pylist() == values[start:]


def test_binary_text_that_is_not_base64_declines() -> None:
    assert binaries(pa.array(["QUJD", "not base64!"])) is None


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=20)), max_size=40), st.integers(0, 5))
def test_texts_equal_b64encode(values: list[bytes | None], cut: int) -> None:
    column = pa.array(values, pa.binary())
    expected = [None if v is None else base64.b64encode(v).decode() for v in values]
    assert texts(column).to_pylist() == expected
    assert texts(column.slice(min(cut, len(values)))).to_pylist() == expected[min(cut, len(values)) :]


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.integers(-(10**37) + 1, 10**37 - 1)), max_size=40),
    st.integers(0, 5),
)
def test_decimal_bytes_are_kafkas_shortest_twos_complement(values: list[int | None], cut: int) -> None:
    column = pa.array([None if v is None else Decimal(f"{v}E-3") for v in values], pa.decimal128(38, 3))
    expected = [None if v is None else _unscaled_text(v) for v in values]
    assert texts(decimal_bytes(column)).to_pylist() == expected
    sliced = decimal_bytes(column.slice(min(cut, len(values))))
    assert texts(sliced).to_pylist() == expected[min(cut, len(values)) :]


@pytest.mark.parametrize(
    ("unscaled", "wire"),
    [(0, "AA=="), (127, "fw=="), (128, "AIA="), (-128, "gA=="), (-129, "/38="), (255, "AP8="), (-1, "/w==")],
)
def test_decimal_sign_boundaries_encode_as_kafka_does(unscaled: int, wire: str) -> None:
    for kind in (pa.decimal128(10, 0), pa.decimal256(40, 0)):
        assert texts(decimal_bytes(pa.array([Decimal(unscaled)], kind))).to_pylist() == [wire]


def test_text_over_a_string_columns_offsets_is_refused_not_wrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    """int32 offsets past 2 GiB would wrap silently: the encoder names the overflow instead."""
    import sluice.connectors.base64_columns as columns

    monkeypatch.setattr(columns, "_MAX_TEXT_BYTES", 12)
    assert texts(pa.array([b"x" * 9])).to_pylist() == [base64.b64encode(b"x" * 9).decode()]  # 12 bytes
    with pytest.raises(ValueError, match="over a string column's 12"):
        texts(pa.array([b"x" * 10]))  # 16 bytes
