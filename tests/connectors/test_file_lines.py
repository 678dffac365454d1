"""A line the file source cannot decode is a flagged record at its byte offset, with its exact bytes;
the lines around it are read as usual."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sluice.activities.spark_binding import source_frame
from sluice.connectors.api import open_source_task
from sluice.connectors.file.lines import split_lines
from sluice.connectors.file.source import FileSourceConnector
from sluice.connectors.model import PartitionRange
from sluice.connectors.records import ERROR_COLUMN, RAW_COLUMN, RecordError, good_arrow_records

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_clean_lines_carry_no_error_columns() -> None:
    lines = split_lines(b"a\r\nbb\n", 100, "utf-8")
    assert (lines.offsets, lines.texts, lines.errors, lines.raw) == ([100, 103], ["a", "bb"], None, None)


def test_an_undecodable_line_is_flagged_at_its_offset() -> None:
    lines = split_lines(b"ok\n\xffbad\r\nfine\n", 10, "utf-8")
    assert lines.offsets == [10, 13, 19]
    assert lines.texts == ["ok", None, "fine"]
    assert lines.errors == [None, "line is not utf-8: invalid start byte at byte 0 of the line", None]
    assert lines.raw == [None, b"\xffbad", None]


def test_an_empty_range_has_no_lines() -> None:
    assert split_lines(b"", 0, "utf-8").offsets == []


@pytest.mark.parametrize("encoding", ["utf-8", "ascii"])
def test_read_flags_the_bad_line_and_keeps_the_others(
    spark: SparkSession, tmp_path: Path, encoding: str
) -> None:
    path = tmp_path / "in.txt"
    good, other = tmp_path / "good.txt", b"x\n"
    path.write_bytes(b"one\n\xc3\x28\ntwo\n")
    good.write_bytes(other)
    config = {"connector.class": "file-source", "name": "lines", "topic": "t", "files": f"{path},{good}"}
    task = open_source_task(FileSourceConnector, {**config, "encoding": encoding}, 0)
    df = source_frame(spark, task.read([PartitionRange(str(path), 0, 11), PartitionRange(str(good), 0, 2)]))
    rows = sorted(df.select("partition", "offset", "value", ERROR_COLUMN, RAW_COLUMN).collect())
    assert [(r[0], r[1], r[2], r[4]) for r in rows] == [
        (str(good), 0, "x", None),
        (str(path), 0, "one", None),
        (str(path), 4, None, b"\xc3\x28"),
        (str(path), 7, "two", None),
    ]
    assert rows[2][3].startswith(f"line is not {encoding}: ")
    with pytest.raises(RecordError) as info:
        good_arrow_records(df.toArrow(), "connector lines")
    assert f"connector lines: bad record at topic 't' partition '{path}' offset 4: line is not" in str(
        info.value
    )
