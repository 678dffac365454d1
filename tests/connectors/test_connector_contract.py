"""Every built-in connector runs the standard contract suite (tests/connectors/contract.py)."""

from __future__ import annotations

from pathlib import Path

from connectors.dummy import DummySinkConnector, DummySourceConnector
from connectors.file.sink import FileSinkConnector
from connectors.file.source import FileSourceConnector
from tests.connectors.contract import SinkCase, SourceCase, sink_test_class, source_test_class


def _write_files(tmp: Path) -> None:
    (tmp / "a.txt").write_bytes(b"alpha\nbeta\r\ngamma\npartial")
    (tmp / "b.txt").write_bytes("één\ntwee\n".encode())


def _grow_files(tmp: Path) -> None:
    with open(tmp / "a.txt", "ab") as fh:
        fh.write(b" line\ndelta\n")


def _read_lines(tmp: Path) -> str:
    path = tmp / "out.txt"
    return path.read_text(encoding="utf-8") if path.exists() else ""


def _half_line(tmp: Path) -> None:
    with open(tmp / "out.txt", "ab") as fh:
        fh.write(b"line-3\nline-")


TestFileSourceContract = source_test_class(
    SourceCase(
        "file-source",
        FileSourceConnector,
        lambda tmp: {
            "connector.class": "file-source",
            "topic": "t",
            "files": f"{tmp / 'a.txt'},{tmp / 'b.txt'}",
        },
        setup=_write_files,
        grow=_grow_files,
    )
)

TestDummySourceContract = source_test_class(
    SourceCase(
        "dummy-source",
        DummySourceConnector,
        lambda tmp: {
            "connector.class": "dummy-source",
            "topic": "t",
            "partitions": "2",
            "records.per.partition": "7",
        },
    )
)

TestFileSinkContract = sink_test_class(
    SinkCase(
        "file-sink",
        FileSinkConnector,
        lambda tmp: {"connector.class": "file-sink", "topics": "t", "file": str(tmp / "out.txt")},
        read_back=_read_lines,
        half_write=_half_line,
    )
)

TestDummySinkContract = sink_test_class(
    SinkCase(
        "dummy-sink",
        DummySinkConnector,
        lambda tmp: {"connector.class": "dummy-sink", "topics": "t", "file": str(tmp / "out.txt")},
        read_back=_read_lines,
        half_write=_half_line,
    )
)
