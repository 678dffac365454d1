"""Binary-log events -> Debezium change records, with positions, in windows that end on commits.

Positions are ``(file index, event position, seq)``: the binlog file's numeric suffix
(``binlog.000042`` -> 42), the byte position where the row event starts in that file, and the
record's index among the records that row event produced (a row event carries many rows; a delete
also yields its tombstone). Files and positions only grow, so these keys order records in binlog
(commit) order. A window's end is ``(file, p, 0)`` where ``p`` is the position right after a
commit (an XID event, or a statement: DDL, a non-transactional ``COMMIT``), so every window holds
whole transactions and a range ``[start, end)`` selects exactly the records of the transactions
between two commit points — re-reading it gives the same records, since everything in a record
(values, ``ts_ms`` from the event header's timestamp, ``source`` file/pos/row) comes from the log.

Debezium's rules, followed here as in connectors.cdc.postgres.changes: an UPDATE that changes the
primary key becomes a delete of the old key (and its tombstone) and a create of the new one, so a
keyed sink does not keep the old row; ``before`` is the full old row (``binlog_row_image=FULL``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from sluice.connectors.cdc.envelope import OP_CREATE, OP_DELETE, OP_UPDATE, ChangeRecord, envelope
from sluice.connectors.cdc.mysql.gtid import GtidSet
from sluice.connectors.cdc.mysql.row_images import Image, row_images
from sluice.connectors.cdc.mysql.values import mapped_column, to_spark
from sluice.connectors.jdbc.types import MappedColumn

#: The ``source`` block of a MySQL change event (Debezium's field names), as Spark DDL.
SOURCE_FIELDS: Final = (
    ("version", "STRING"),
    ("connector", "STRING"),
    ("name", "STRING"),
    ("ts_ms", "BIGINT"),
    ("snapshot", "STRING"),
    ("db", "STRING"),
    ("table", "STRING"),
    ("server_id", "BIGINT"),
    ("gtid", "STRING"),
    ("file", "STRING"),
    ("pos", "BIGINT"),
    ("row", "INT"),
)
VERSION: Final = "sluice-1"
ROWS: Final = "rows"
COMMIT: Final = "commit"
GTID: Final = "gtid"


def file_index(name: str) -> int:
    """``binlog.000042`` -> 42 (the server numbers its binlog files; the suffix orders them)."""
    suffix = name.rpartition(".")[2]
    if not suffix.isdigit():
        raise ValueError(f"binlog file name {name!r} has no numeric suffix")
    return int(suffix)


def file_name(base: str, index: int) -> str:
    """The file of ``index`` for the server's binlog base name (``binlog`` -> ``binlog.000042``)."""
    return f"{base}.{index:06d}"


def snapshot_source(server: str, db: str, table: str) -> dict[str, Any]:
    """The ``source`` block of a snapshot row: no binlog coordinates (it was not read from the log)."""
    return {
        "version": VERSION,
        "connector": "mysql",
        "name": server,
        "db": db,
        "table": table,
        **dict.fromkeys(("server_id", "gtid", "file", "pos", "row")),
    }


@dataclass(frozen=True)
class BinlogEvent:
    """One binlog event as the window scanner sees it (connectors.cdc.mysql.binlog makes them)."""

    file_index: int
    start: int  # where the event starts in its file
    end: int  # where the next event starts (the header's log_pos)
    kind: str  # ROWS, COMMIT or GTID
    timestamp: int = 0  # the event header's, in seconds
    payload: Any = None  # a pymysqlreplication rows event (ROWS), the GTID text (GTID)
    server_id: int = 0
    file: str = ""  # the file's name, for ``source.file``


@dataclass(frozen=True)
class TableShape:
    """A table as the last table map described it: mapped columns and primary-key columns."""

    partition: str  # "db.table"
    db: str
    table: str
    columns: tuple[MappedColumn, ...]
    keys: tuple[str, ...]


@dataclass(frozen=True)
class Change:
    """One record of one table with its position ``(file index, event position, seq)``."""

    partition: str
    position: tuple[int, int, int]
    record: ChangeRecord
    shape: TableShape


@dataclass
class Window:
    """The changes of the whole transactions read, where they end (``None``: nothing was read) and
    the GTID set reached there (``None``: the server has no GTIDs)."""

    changes: list[Change] = field(default_factory=list)
    end: tuple[int, int] | None = None
    gtids: GtidSet | None = None


def scan(
    events: Iterable[BinlogEvent],
    stop: tuple[int, int],
    max_records: int | None,
    decode: Callable[[BinlogEvent, str], list[Change]],
    gtids: GtidSet | None = None,
    upto: GtidSet | None = None,
) -> Window:
    """Read whole transactions from ``events`` (which start at a commit point) up to ``stop`` (a
    commit point: the server's binlog end pinned at planning, or a planned range's end), ending
    early after the commit that brings the records to ``max_records``.

    ``stop`` is reached when an event starts at or after it, or when the stream ends (the server's
    end lies at or beyond ``stop``) with no transaction open: the window then ends at ``stop``.

    ``gtids``, the GTID set at the start, is carried forward over every transaction read (of any
    table: the set must describe the whole log), and a transaction it already contains is skipped
    — after a failover the read starts before some transactions that were read on the old server
    (connectors.cdc.mysql.failover), as a replica skips what it has. ``upto`` (a planned range's
    end set, re-read on another server) also skips transactions it does not contain and ends the
    read once the set covers it.
    """
    window = Window(gtids=gtids)
    pending: list[Change] = []
    gtid = ""
    current, skipping = gtids, False
    for ev in events:
        if (ev.file_index, ev.start) >= stop:
            break
        if ev.kind == GTID:
            gtid = str(ev.payload)
            if current is not None:
                if upto is not None and current.covers(upto):
                    break
                skipping = current.contains(gtid) or (upto is not None and not upto.contains(gtid))
                current = current if skipping else current.add(gtid)
        elif ev.kind == ROWS:
            if not skipping:
                pending.extend(decode(ev, gtid))
        elif ev.kind == COMMIT:
            if ev.payload is not None and not skipping:  # a TRUNCATE (connectors.cdc.mysql.truncate)
                pending.extend(decode(ev, gtid))
            window.changes.extend(pending)
            pending = []
            window.end = (ev.file_index, ev.end)
            window.gtids, skipping = current, False
            if max_records is not None and len(window.changes) >= max_records:
                return window
    if not pending and upto is None:
        window.end = stop if window.end is None or window.end < stop else window.end
        window.gtids = current
    return window


def binlog_source(server: str, shape: TableShape, ev: BinlogEvent, gtid: str, row: int) -> dict[str, Any]:
    """The envelope's ``source`` block of a change read from ``ev`` (Debezium's MySQL fields)."""
    return {
        "version": VERSION,
        "connector": "mysql",
        "name": server,
        "ts_ms": ev.timestamp * 1000,
        "snapshot": "false",
        "db": shape.db,
        "table": shape.table,
        "server_id": ev.server_id,
        "gtid": gtid or None,
        "file": ev.file,
        "pos": ev.start,
        "row": row,
    }


class RowDecoder:
    """Rows events -> change records of the captured tables (others yield nothing).

    ``primary_keys`` maps each captured ``db.table`` to its primary-key columns; ``where`` names the
    connector in errors; ``server`` fills ``source.name``; ``column_names(db, table)`` answers when
    the table map carries no column names (``binlog_row_metadata`` not FULL: information_schema's
    current columns, which are right unless the table changed since the event).
    """

    def __init__(
        self,
        primary_keys: Mapping[str, Sequence[str]],
        *,
        where: str,
        server: str,
        tombstones: bool = True,
        column_names: Callable[[str, str], list[str]] | None = None,
    ) -> None:
        self.primary_keys = {t: tuple(k) for t, k in primary_keys.items()}
        self.where = where
        self.server = server
        self.tombstones = tombstones
        self.column_names = column_names
        self._shapes: dict[tuple[Any, ...], TableShape] = {}

    def shape(self, ev: Any) -> TableShape | None:
        partition = f"{ev.schema}.{ev.table}"
        keys = self.primary_keys.get(partition)
        if keys is None:
            return None
        names = [c.name for c in ev.columns]
        if any(n is None or str(n).startswith("UNKNOWN_COL") for n in names) and self.column_names:
            names = self.column_names(ev.schema, ev.table)[: len(names)]
        signature = (
            partition,
            tuple(names),
            tuple(
                (
                    c.type,
                    c.unsigned,
                    getattr(c, "precision", 0),
                    getattr(c, "decimals", 0),
                    c.character_set_name,
                )
                for c in ev.columns
            ),
        )
        cached = self._shapes.get(signature)
        if cached is not None:
            return cached
        where = f"{self.where} table {partition!r}"
        columns = []
        for name, col in zip(names, ev.columns, strict=True):
            col.name = name
            columns.append(mapped_column(col, where))
        missing = [k for k in keys if k not in names]
        if missing:
            raise ValueError(f"{where}: primary key column(s) {missing} not in the binlog's row image")
        shape = TableShape(partition, str(ev.schema), str(ev.table), tuple(columns), keys)
        self._shapes[signature] = shape
        return shape

    def _row(self, shape: TableShape, values: Sequence[Any]) -> dict[str, Any]:
        where = f"{self.where} table {shape.partition!r}"
        return {c.name: to_spark(c, v, where) for c, v in zip(shape.columns, values, strict=True)}

    @staticmethod
    def _images(shape: TableShape, rows_event: Any) -> list[Image]:
        """The event's (before, after) row images as value tuples in column order: decoded by
        connectors.cdc.mysql.row_images where it can, else by pymysqlreplication."""
        images = row_images(rows_event)
        if images is not None:
            return images

        def values(image: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
            return None if image is None else tuple(image.get(c.name) for c in shape.columns)

        deletes = type(rows_event).__name__.startswith("Delete")
        out: list[Image] = []
        for item in rows_event.rows:
            if "values" in item:  # a write's after image, a delete's before image
                image = values(item["values"])
                out.append((image, None) if deletes else (None, image))
            else:
                out.append((values(item["before_values"]), values(item["after_values"])))
        return out

    def decode(self, ev: BinlogEvent, gtid: str) -> list[Change]:
        rows_event = ev.payload
        shape = self.shape(rows_event)
        if shape is None:
            return []
        out: list[Change] = []
        ts_ms = ev.timestamp * 1000
        kind = type(rows_event).__name__

        def emit(op: str | None, key: dict[str, Any], before: Any, after: Any, row: int) -> None:
            source = binlog_source(self.server, shape, ev, gtid, row)
            value = None if op is None else envelope(op, before, after, source, ts_ms)
            record = ChangeRecord(0, key, value, ev.timestamp * 1_000_000)
            out.append(Change(shape.partition, (ev.file_index, ev.start, len(out)), record, shape))

        for row, (old, new) in enumerate(self._images(shape, rows_event)):
            if kind.startswith("Write") and new is not None:
                after = self._row(shape, new)
                emit(OP_CREATE, _key(shape, after), None, after, row)
            elif kind.startswith("Update") and old is not None and new is not None:
                before, after = self._row(shape, old), self._row(shape, new)
                old_key, new_key = _key(shape, before), _key(shape, after)
                if old_key != new_key:
                    self._delete(emit, old_key, before, row)
                    emit(OP_CREATE, new_key, None, after, row)
                else:
                    emit(OP_UPDATE, new_key, before, after, row)
            elif kind.startswith("Delete") and old is not None:
                before = self._row(shape, old)
                self._delete(emit, _key(shape, before), before, row)
        return out

    def _delete(self, emit: Callable[..., None], key: dict[str, Any], before: Any, row: int) -> None:
        emit(OP_DELETE, key, before, None, row)
        if self.tombstones:
            emit(None, key, None, None, row)


def _key(shape: TableShape, row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in shape.keys}


def with_offsets(changes: Sequence[Change]) -> list[Change]:
    """The changes with record offsets for the runtime: their order within the range (the range
    fixes the list, so a re-read numbers them alike)."""
    return [
        Change(
            c.partition,
            c.position,
            ChangeRecord(i, c.record.key, c.record.value, c.record.timestamp_us),
            c.shape,
        )
        for i, c in enumerate(changes)
    ]
