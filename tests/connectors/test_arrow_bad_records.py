"""A collected batch's flagged records fail it on the driver (every sink writes Arrow; no JVM): the first
in record order is named, with the same text the in-job check gives; clean batches lose only the
error columns."""

from __future__ import annotations

import pyarrow as pa
import pytest

from sluice.connectors.records import ERROR_COLUMN, RAW_COLUMN, RecordError, good_arrow_records


def batch(rows: list[tuple[str | None, str, int, str | None]], raw: bool = False) -> pa.Table:
    """(topic, partition, offset, error) rows with a value, as a sink collects them."""
    columns = {
        "topic": pa.array([r[0] for r in rows], pa.string()),
        "partition": pa.array([r[1] for r in rows], pa.string()),
        "offset": pa.array([r[2] for r in rows], pa.int64()),
        "value": pa.array([f"v{r[2]}" for r in rows], pa.string()),
        ERROR_COLUMN: pa.array([r[3] for r in rows], pa.string()),
    }
    if raw:
        columns[RAW_COLUMN] = pa.array([None] * len(rows), pa.binary())
    return pa.table(columns)


@pytest.mark.parametrize(
    ("rows", "named"),
    [
        pytest.param(
            [("t", "b:1", 5, None), ("t", "b:1", 9, "late"), ("t", "b:1", 7, "early")],
            "topic 't' partition 'b:1' offset 7: early",
            id="lowest offset, not collection order",
        ),
        pytest.param(
            [("t", "b:2", 1, "two"), ("t", "b:0", 8, "zero")],
            "topic 't' partition 'b:0' offset 8: zero",
            id="partition before offset",
        ),
        pytest.param(
            [("u", "b:0", 1, "u"), ("s", "b:3", 4, "s")],
            "topic 's' partition 'b:3' offset 4: s",
            id="topic first",
        ),
        pytest.param(
            [(None, "p", 3, "no topic")],
            "partition 'p' offset 3: no topic",
            id="a record without topic",
        ),
    ],
)
def test_first_flagged_record_in_record_order_fails_the_batch(
    rows: list[tuple[str | None, str, int, str | None]], named: str
) -> None:
    with pytest.raises(RecordError) as info:
        good_arrow_records(batch(rows), "connector 'c'")
    assert str(info.value) == f"connector 'c': bad record at {named}"


@pytest.mark.parametrize("raw", [False, True])
def test_a_clean_batch_loses_only_the_error_columns(raw: bool) -> None:
    table = batch([("t", "b:0", 1, None), ("t", "b:0", 2, None)], raw=raw)
    good = good_arrow_records(table, "connector 'c'")
    assert good.column_names == ["topic", "partition", "offset", "value"]
    assert good.to_pylist() == table.select(good.column_names).to_pylist()


def test_a_batch_without_error_column_is_kept_as_is() -> None:
    table = batch([("t", "b:0", 1, None)]).drop_columns([ERROR_COLUMN])
    assert good_arrow_records(table, "connector 'c'").equals(table)
