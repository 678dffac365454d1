"""jdbc.writes.unique_keys: when a writer may merge a batch's staged rows without reducing them."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from sluice.connectors.jdbc.writes import unique_keys


@pytest.mark.parametrize(
    ("columns", "pk", "unique"),
    [
        ({"id": pa.array([1, 2, 3])}, ["id"], True),
        ({"id": pa.array([1, 2, 1])}, ["id"], False),
        ({"id": pa.array(["a", "A", "é"])}, ["id"], True),
        ({"id": pa.array(["a", "b", "a"])}, ["id"], False),
        ({"a": pa.array([1, 1, 2]), "b": pa.array(["x", "y", "x"])}, ["a", "b"], True),
        ({"a": pa.array([1, 1, 2]), "b": pa.array(["x", "x", "x"])}, ["a", "b"], False),
        ({"id": pa.array([Decimal("1.50"), Decimal("1.5")], pa.decimal128(5, 2))}, ["id"], False),
        ({"id": pa.array([dt.date(2024, 1, 1), dt.date(2024, 1, 2)])}, ["id"], True),
        ({"id": pa.array([b"\x00", b"\x00\x00"])}, ["id"], True),
        ({"id": pa.array([], pa.int64())}, ["id"], True),
        # the database may see floats as equal where Arrow does not (-0.0 = 0.0): never assumed unique
        ({"id": pa.array([0.0, 1.0])}, ["id"], False),
        ({"id": pa.array([1, 2]), "f": pa.array([0.5, 0.5])}, ["id", "f"], False),
    ],
)
def test_unique_keys(columns: dict[str, Any], pk: list[str], unique: bool) -> None:
    rows = pa.table({**columns, "other": pa.array(["v"] * len(next(iter(columns.values()))))})
    assert unique_keys(rows, pk) is unique
