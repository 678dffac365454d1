"""File source: one record per line, positioned by byte offset so any range can be re-read exactly.

Partition = a file path (configured, or matched by a glob pattern); position = byte offset of the
next unread byte, with the file's identity in its meta (device, inode and a fingerprint of its first
bytes), so a file replaced or rewritten under the same name is detected instead of being read from a
stale offset, and a rotated file (renamed to another matched name) is followed. A record's
``offset`` is the byte offset where its line starts. Only complete lines (ending in ``\\n``) are
read: ``snap_end`` cuts a range after its last newline, so a line still being written waits for the
next batch. Reads happen on the driver (ranges are capped by ``batch.max.bytes``), which keeps them
exact and simple; a trailing ``\\r`` is dropped with the newline.
"""

from __future__ import annotations

import codecs
import glob
import hashlib
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from sluice.connectors.api import SourceConnector, SourceTask, split_round_robin
from sluice.connectors.config import ConfigDef, ConfigField, FieldError
from sluice.connectors.file.lines import Lines, split_lines
from sluice.connectors.model import PartitionRange
from sluice.connectors.positions import Position, offset_batch_end
from sluice.connectors.source_reads import SourceRead, record_table

log = logging.getLogger(__name__)

_CHUNK = 64 * 1024
FINGERPRINT_BYTES = 1024


def _dev_ino(path: str) -> str:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return ""
    return f"{st.st_dev}:{st.st_ino}"


def _exists(path: str) -> bool:
    return os.path.isfile(path)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0


def _head(path: str, length: int) -> str:
    with open(path, "rb") as fh:
        return hashlib.blake2b(fh.read(length), digest_size=8).hexdigest()


def identity(path: str, committed: Position | None) -> Position:
    """The file at ``path`` now: its size as the position, and meta naming which file it is.

    Meta: ``obj`` (device:inode), ``head``/``headlen`` (a hash of its first bytes, up to
    ``FINGERPRINT_BYTES``) and ``id``. ``id`` is kept from ``committed`` while the file is the same
    one (same device and inode, the same first ``headlen`` bytes); a file replaced under the same
    name (``rm f; seq > f``) or rewritten in place (``> f``, copytruncate) gets a new ``id``, which
    the planner reports as data loss (see ``FileSourceTask.relocate`` for ``file.replaced=restart``).
    """
    st = os.stat(path)
    obj = f"{st.st_dev}:{st.st_ino}"
    headlen = min(st.st_size, FINGERPRINT_BYTES)
    head = _head(path, headlen)
    same = False
    if committed is not None and committed.get("obj") == obj:
        before_len = int(committed.get("headlen", "0") or 0)
        same = before_len <= st.st_size and _head(path, before_len) == committed.get("head")
    if same and committed is not None:
        file_id = committed.get("id")
    else:
        file_id = f"{obj}:{head}"
        if committed is not None and file_id == committed.get("id"):
            file_id += "+"
    return Position((st.st_size,), (("id", file_id), ("obj", obj), ("head", head), ("headlen", str(headlen))))


def _replaced(path: str, committed: Position) -> bool:
    """Same device and inode but other first bytes: rewritten in place (``> f``, copytruncate)."""
    try:
        return identity(path, committed).get("id") != committed.get("id")
    except FileNotFoundError:
        return False


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
        self._patterns = files or ([config["file"]] if config.get("file") else [])
        if not self._patterns:
            raise ValueError(f"connector {self.name!r}: set 'file' or 'files'")
        self._encoding = str(config.get("encoding") or "utf-8")
        self._topic = config.get("topic") or None
        self._restart_replaced = str(config.get("file.replaced") or "fail") == "restart"
        self._held: set[str] = set()

    # ---- partitions and identity --------------------------------------------------------------
    def partitions(self) -> list[str]:
        """Existing files matching the configured paths and glob patterns (a missing one waits)."""
        found: set[str] = set()
        for pattern in self._patterns:
            if glob.has_magic(pattern):
                found.update(p for p in glob.glob(pattern) if os.path.isfile(p))
            elif os.path.exists(pattern):
                found.add(pattern)
        return sorted(found)

    def waiting_for(self) -> str:
        """What the task waits for, for status ("" when nothing): configured files that do not exist."""
        missing = [p for p in self._patterns if not glob.has_magic(p) and not os.path.exists(p)]
        return f"waiting for file {', '.join(missing)} (does not exist)" if missing else ""

    def earliest_positions(self) -> dict[str, Position]:
        return {path: identity(path, None).moved_to(0) for path in self.partitions() if _exists(path)}

    def latest_positions(self, committed: Mapping[str, Position]) -> dict[str, Position]:
        """Current size per file, with the identity (meta ``id``) of the file now at that path."""
        out: dict[str, Position] = {}
        for path in self.partitions():
            if path in self._held:
                continue  # its predecessor (rotated away) is read first
            try:
                out[path] = identity(path, committed.get(path))
            except FileNotFoundError:
                continue
        return out

    def relocate(self, committed: Mapping[str, Position]) -> dict[str, Position]:
        """Follow rotated files: a committed position whose file now lives under another matched name
        (``app.log`` renamed to ``app.log.1``) moves there, and the new file at the old name is held
        back until the renamed file has been read to its end. With ``file.replaced=restart`` a file
        replaced under its name (its old one found nowhere) is read again from its start."""
        current = {path: _dev_ino(path) for path in self.partitions()}
        by_object = {obj: path for path, obj in current.items() if obj}
        stay: dict[str, Position] = {}
        moves: dict[str, Position] = {}
        renamed: dict[str, str] = {}
        for path, pos in committed.items():
            obj = pos.get("obj")
            elsewhere = by_object.get(obj) if obj and path in current and current[path] != obj else None
            if elsewhere is None:
                if self._restart_replaced and path in current and _replaced(path, pos):
                    log.warning("connector %r: %s was replaced; reading it from its start", self.name, path)
                    continue
                stay[path] = pos  # unchanged, missing, or replaced (the planner decides: data loss)
                continue
            if elsewhere not in moves or moves[elsewhere] < pos:
                moves[elsewhere] = pos
            renamed[path] = elsewhere
        out = dict(stay)
        for path, pos in moves.items():
            kept = stay.get(path)
            if kept is None or kept.get("obj") != pos.get("obj") or kept < pos:
                out[path] = pos
        self._held = {old for old, new in renamed.items() if _size(new) > out[new].offset}
        return out

    # ---- batch limits -------------------------------------------------------------------------
    def batch_end(self, partition: str, start: Position, latest: Position, budget: int | None) -> Position:
        end = offset_batch_end(start, latest, budget).offset
        return latest.moved_to(self.snap_end(partition, start.offset, end))

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
                fh.seek(r.start.offset)
                data = fh.read(r.size)
        except FileNotFoundError:
            raise FileNotFoundError(f"{where}: file no longer exists") from None
        if len(data) < r.size:
            raise EOFError(f"{where}: file has only {r.start.offset + len(data)} bytes (truncated?)")
        return split_lines(data, r.start.offset, self._encoding)

    def read(self, ranges: Sequence[PartitionRange]) -> SourceRead:
        tables = []
        for r in ranges:
            if not r.is_empty:
                lines = self._read_range(r)
                tables.append(
                    record_table(
                        r.partition,
                        lines.offsets,
                        lines.texts,
                        topic=self._topic,
                        errors=lines.errors,
                        raw=lines.raw,
                    )
                )
        return SourceRead(tables=tuple(tables))


class FileSourceConnector(SourceConnector):
    """Config: ``file`` (one path) or ``files`` (comma list of paths or glob patterns such as
    ``/var/log/app.log*``; one partition per file, entries dealt across tasks), ``encoding``,
    ``file.replaced`` (``fail``: a file replaced under its name is data loss, decided by ``data.loss``;
    ``restart``: read the new file from its start)."""

    plugin_name = "file-source"
    task_class = FileSourceTask
    config_def = ConfigDef(
        (
            ConfigField("file", str, "", doc="path of the file to read", aliases=("filename",)),
            ConfigField("files", list[str], [], doc="comma list of paths; one partition per file"),
            ConfigField("encoding", str, "utf-8", validator=_known_encoding),
            ConfigField(
                "file.replaced",
                str,
                "fail",
                doc="a file replaced or rewritten under its name: fail (data loss) or restart (read it anew)",
                choices=("fail", "restart"),
            ),
        )
    )

    def validate(self, raw_config: Mapping[str, Any]) -> list[FieldError]:
        errors = super().validate(raw_config)
        raw_config = self.config_def.canonical(raw_config)
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
