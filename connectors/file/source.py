"""File source: one record per line, positioned by byte offset so any range can be re-read exactly.

Partition = the file path as configured; position = byte offset of the next unread byte; a record's
``offset`` is the byte offset where its line starts. Only complete lines (ending in ``\\n``) are
read: ``snap_end`` cuts a range after its last newline, so a line still being written waits for the
next batch. Reads happen on the driver (ranges are capped by ``batch.max.bytes``), which keeps them
exact and simple; a trailing ``\\r`` is dropped with the newline.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Mapping, Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any

from connectors.api import SourceConnector, SourceTask, split_round_robin
from connectors.config import ConfigDef, ConfigField, FieldError
from connectors.file.lines import Lines, split_lines
from connectors.model import PartitionRange
from connectors.records import empty_records, records_from_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_CHUNK = 64 * 1024


def _known_encoding(name: Any) -> str | None:
    try:
        codecs.lookup(str(name))
    except LookupError:
        return "unknown encoding"
    return None


class FileSourceTask(SourceTask):
    position_unit = "bytes"

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        super().__init__(config, task_id)
        files = list(config.get("files") or [])
        self._files = files or ([config["file"]] if config.get("file") else [])
        if not self._files:
            raise ValueError(f"connector {self.name!r}: set 'file' or 'files'")
        self._encoding = str(config.get("encoding") or "utf-8")
        self._topic = config.get("topic") or None

    def partitions(self) -> list[str]:
        return list(self._files)

    def latest_positions(self) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for path in self._files:
            try:
                sizes[path] = os.path.getsize(path)
            except FileNotFoundError:
                continue  # a vanished partition: the planner's data-loss check reports it
        return sizes

    def snap_end(self, partition: str, start: int, end: int) -> int:
        """After the last ``\\n`` in ``[start, end)``; if there is none, after the first newline past
        ``end`` (one line longer than the batch limit must not stall the source); else ``start``."""
        if end <= start:
            return start
        with open(partition, "rb") as fh:
            pos = end
            while pos > start:
                chunk_start = max(start, pos - _CHUNK)
                fh.seek(chunk_start)
                found = fh.read(pos - chunk_start).rfind(b"\n")
                if found >= 0:
                    return chunk_start + found + 1
                pos = chunk_start
            fh.seek(end)
            pos = end
            while chunk := fh.read(_CHUNK):
                found = chunk.find(b"\n")
                if found >= 0:
                    return pos + found + 1
                pos += len(chunk)
        return start

    def _read_range(self, r: PartitionRange) -> Lines:
        """The lines in ``r`` (a range ends after a newline, see snap_end); undecodable ones flagged."""
        where = f"connector {self.name!r} partition {r.partition!r} range [{r.start}, {r.end})"
        try:
            with open(r.partition, "rb") as fh:
                fh.seek(r.start)
                data = fh.read(r.size)
        except FileNotFoundError:
            raise FileNotFoundError(f"{where}: file no longer exists") from None
        if len(data) < r.size:
            raise EOFError(f"{where}: file has only {r.start + len(data)} bytes (truncated?)")
        return split_lines(data, r.start, self._encoding)

    def read(self, spark: SparkSession, ranges: Sequence[PartitionRange]) -> DataFrame:
        frames = []
        for r in ranges:
            if not r.is_empty:
                lines = self._read_range(r)
                frames.append(
                    records_from_columns(
                        spark, r.partition, lines.offsets, lines.texts, self._topic, lines.errors, lines.raw
                    )
                )
        if not frames:
            return empty_records(spark)
        # by name: a range with undecodable lines carries the error columns, the others do not
        return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)


class FileSourceConnector(SourceConnector):
    """Config: ``file`` (one path) or ``files`` (comma list, one partition each, dealt across tasks)."""

    plugin_name = "file-source"
    task_class = FileSourceTask
    config_def = ConfigDef(
        (
            ConfigField("file", str, "", doc="path of the file to read"),
            ConfigField("files", list[str], [], doc="comma list of paths; one partition per file"),
            ConfigField("encoding", str, "utf-8", validator=_known_encoding),
        )
    )

    def validate(self, raw_config: Mapping[str, Any]) -> list[FieldError]:
        errors = super().validate(raw_config)
        has_file = bool(str(raw_config.get("file") or "").strip())
        has_files = bool(raw_config.get("files"))
        if has_file == has_files:
            name = str(raw_config.get("name") or self.plugin_name)
            errors.append(FieldError("file", f"connector {name!r}: set exactly one of 'file' or 'files'"))
        return errors

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        files = self.config_def["files"].convert(config.get("files") or "") or [str(config.get("file", ""))]
        return [
            {**config, "file": "", "files": ",".join(group)} for group in split_round_robin(files, max_tasks)
        ]
