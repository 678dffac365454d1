"""File source and sink specifics: exact byte ranges, partial lines, appends, repeatable sink writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sluice.connectors.api import open_sink_task, open_source_task
from sluice.connectors.file.sink import LENGTH_STATE, PATH_STATE, FileSinkConnector
from sluice.connectors.file.source import FileSourceConnector, FileSourceTask
from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.records import Record
from sluice.connectors.source_reads import records_table
from tests.store.helpers import offsets


def source(path: Path, **extra: str) -> FileSourceTask:
    task = open_source_task(
        FileSourceConnector,
        {"connector.class": "file-source", "name": "lines", "topic": "t", "file": str(path), **extra},
        0,
    )
    assert isinstance(task, FileSourceTask)
    return task


def lines(task: FileSourceTask, *ranges: tuple[int, int]) -> list[tuple[int, str]]:
    path = task.partitions()[0]
    table = task.read([PartitionRange(path, s, e) for s, e in ranges]).to_table().sort_by("offset")
    return list(zip(table.column("offset").to_pylist(), table.column("value").to_pylist(), strict=True))


def test_exact_ranges_partial_line_and_appends(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(b"a\nbb\r\nccc\ndd")  # "dd" has no newline yet
    task = source(path)
    assert offsets(task.latest_positions({})) == {str(path): 12}
    assert task.snap_end(str(path), 0, 12) == 10  # the partial line waits
    assert task.snap_end(str(path), 0, 4) == 2  # cut to a line boundary
    assert task.snap_end(str(path), 10, 12) == 10  # nothing complete after 10
    assert lines(task, (0, 10)) == [(0, "a"), (2, "bb"), (6, "ccc")]
    assert lines(task, (2, 6)) == [(2, "bb")]
    assert lines(task, (0, 10)) == lines(task, (0, 2), (2, 10)) == [(0, "a"), (2, "bb"), (6, "ccc")]

    with open(path, "ab") as fh:
        fh.write(b"d\neee\n")
    assert offsets(task.latest_positions({})) == {str(path): 18}
    end = task.snap_end(str(path), 10, 18)
    assert end == 18
    assert lines(task, (10, end)) == [(10, "ddd"), (14, "eee")]


def test_long_line_is_not_stalled_by_a_small_range(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(b"x" * 100 + b"\nshort\n")
    task = source(path)
    assert task.snap_end(str(path), 0, 10) == 101  # one oversized line goes alone
    assert task.snap_end(str(path), 101, 104) == 107


@pytest.mark.parametrize(
    ("content", "action", "error", "message"),
    [
        (
            b"abc\n",
            "truncate",
            EOFError,
            "connector 'lines' partition '{p}' range [0, 4): file has only 2 bytes (truncated?)",
        ),
        (
            b"abc\n",
            "delete",
            FileNotFoundError,
            "connector 'lines' partition '{p}' range [0, 4): file no longer exists",
        ),
    ],
    ids=["truncated", "deleted"],  # a line that does not decode is a flagged record: test_file_lines
)
def test_read_errors_name_the_position(
    tmp_path: Path,
    content: bytes,
    action: str | None,
    error: type[Exception],
    message: str,
) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(content)
    task = source(path)
    size = len(content)
    if action == "truncate":
        path.write_bytes(content[:2])
    elif action == "delete":
        path.unlink()
        assert task.latest_positions({}) == {}  # a missing file is waited for, not read
        assert task.waiting_for() == f"waiting for file {path} (does not exist)"
    with pytest.raises(error) as info:
        task.read([PartitionRange(str(path), 0, size)])
    assert str(info.value) == message.format(p=path)


def test_other_encoding(tmp_path: Path) -> None:
    path = tmp_path / "latin.txt"
    path.write_bytes("café\n".encode("latin-1"))
    assert lines(source(path, encoding="latin-1"), (0, 5)) == [(0, "café")]


def test_files_are_split_across_tasks(tmp_path: Path) -> None:
    a, b, c = (str(tmp_path / n) for n in "abc")
    for path in (a, b, c):
        Path(path).write_text("x\n")
    configs = FileSourceConnector().task_configs(
        {"connector.class": "file-source", "topic": "t", "files": f"{a},{b},{c}"}, 2
    )
    assert [c["files"] for c in configs] == [f"{a},{c}", b]
    assert [open_source_task(FileSourceConnector, c, i).partitions() for i, c in enumerate(configs)] == [
        [a, c],
        [b],
    ]
    assert [
        c["files"]
        for c in FileSourceConnector().task_configs(
            {"connector.class": "file-source", "topic": "t", "file": "/x"}, 4
        )
    ] == ["/x"]


def sink(path: Path) -> Any:
    return open_sink_task(
        FileSinkConnector,
        {"connector.class": "file-sink", "name": "out", "topics": "t", "file": str(path)},
        0,
    )


def test_sink_orders_lines_formats_structs_and_repairs_half_written_batch(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    task = sink(path)
    value_type = pa.struct([("id", pa.int32()), ("tags", pa.list_(pa.string())), ("note", pa.string())])
    batch1 = records_table(
        [
            Record("broker-a:1", 0, {"id": 3, "tags": ["x"], "note": None}, topic="t"),
            Record("broker-a:0", 5, {"id": 2, "tags": [], "note": "n"}, topic="t"),
            Record("broker-a:0", 4, {"id": 1, "tags": None, "note": "é"}, topic="t"),
        ],
        value_type,
    )
    bare = BatchPlan(
        "out", 0, 1, (PartitionRange("broker-a:0", 4, 6, "t"), PartitionRange("broker-a:1", 0, 1, "t"))
    )
    plan1 = BatchPlan("out", 0, 1, bare.ranges, task.prepare(bare))
    assert plan1.sink_state == {LENGTH_STATE: "0", PATH_STATE: str(path)}
    task.write(batch1, plan1)
    expected1 = (
        '{"id":1,"tags":null,"note":"é"}\n{"id":2,"tags":[],"note":"n"}\n{"id":3,"tags":["x"],"note":null}\n'
    )
    assert path.read_text(encoding="utf-8") == expected1

    batch2 = records_table([Record("broker-a:0", 6, None, topic="t")], value_type)
    plan2 = BatchPlan("out", 0, 2, bare.ranges, task.prepare(bare))
    with open(path, "ab") as fh:  # a crashed first attempt of plan 2 wrote half a line
        fh.write(b'{"id":9,"ta')
    task.write(batch2, plan2)
    task.write(batch2, plan2)
    assert path.read_text(encoding="utf-8") == expected1 + "null\n"


def test_sink_refuses_without_state_or_when_file_shrank(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    task = sink(path)
    records = records_table([Record("broker-a:0", 0, "x", topic="t")])
    plan = BatchPlan("out", 0, 7, (PartitionRange("broker-a:0", 0, 1, "t"),))
    with pytest.raises(ValueError, match=f"connector 'out' file '{path}' batch 7: plan has no 'file.length'"):
        task.write(records, plan)
    path.write_text("abc\n")
    shrunk = BatchPlan("out", 0, 7, plan.ranges, {LENGTH_STATE: "100"})
    with pytest.raises(ValueError, match="file is 4 bytes, shorter than the 100 recorded with the plan"):
        task.write(records, shrunk)


def test_a_plan_recorded_for_another_file_is_restated_for_the_reconfigured_one(tmp_path: Path) -> None:
    """Reconfigured to a new ``file`` before its pending plan committed: the plan's records go to
    the new file (from its length now), not refused as a file "shorter than recorded"."""
    old, new = tmp_path / "old.txt", tmp_path / "new.txt"
    old.write_text("a\nb\n")
    bare = BatchPlan("out", 0, 3, (PartitionRange("broker-a:0", 0, 1, "t"),))
    recorded = BatchPlan("out", 0, 3, bare.ranges, sink(old).prepare(bare))
    assert sink(old).restate(recorded) is None
    new.write_text("kept\n")
    task = sink(new)
    restated = BatchPlan("out", 0, 3, bare.ranges, task.restate(recorded) or {})
    assert restated.sink_state == {LENGTH_STATE: "5", PATH_STATE: str(new)}
    records = records_table([Record("broker-a:0", 0, "x", topic="t")])
    task.write(records, restated)
    task.write(records, restated)  # a re-run after a crash truncates to the restated length
    assert (new.read_text(), old.read_text()) == ("kept\nx\n", "a\nb\n")


def test_sink_writes_binary_values_byte_for_byte(tmp_path: Path) -> None:
    """``value.converter=bytes``: a body that is not text (a dead letter of an undecodable line)
    is written exactly, never decoded."""
    path = tmp_path / "out.bin"
    task = sink(path)
    values = [b"caf\xe9 au lait", b"\xff\xfe\x00", "é".encode(), None]
    records = records_table(
        [Record("broker-a:0", i, v, topic="t") for i, v in enumerate(values)], pa.binary()
    )
    bare = BatchPlan("out", 0, 1, (PartitionRange("broker-a:0", 0, 4, "t"),))
    task.write(records, BatchPlan("out", 0, 1, bare.ranges, task.prepare(bare)))
    assert path.read_bytes() == b"caf\xe9 au lait\n\xff\xfe\x00\n\xc3\xa9\nnull\n"
