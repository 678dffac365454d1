"""`python -m bench.binlog_decoders`: the binlog row decoder Sluice uses, against the alternatives.

Why: the MySQL/MariaDB CDC source reads the binary log with ``pymysqlreplication``
(``sluice.connectors.cdc.mysql.binlog.events``), a pure-Python decoder, and that read bounds capture
(``bench.cdc_bench`` prints it as "binlog read alone"). Whether to replace the decoder is chosen by
measurement: this runs every candidate over the same binlog range, in one run, on one server.

How: in the local stack's MariaDB (``sluice stack``'s credentials; ``--host``/``--port``/``--user``/
``--password`` override) it creates database ``bench_binlog`` with one table shaped like the CDC
bench's rows (``BIGINT`` key, ``VARCHAR(64)``, ``DECIMAL(12,2)`` with negatives, ``TEXT`` with NULLs
and non-ASCII text, ``DATETIME(3)``), notes the binlog end, inserts ``--rows`` rows (transactions of
10,000) and updates each once (``UPDATE … WHERE id BETWEEN``, 10,000 a statement), notes the end
again, and drops the database at the end. The range holds ``2 × rows`` row changes. Each decoder then
reads that range over its own replication connection (``COM_BINLOG_DUMP`` from file:position),
decodes every row image and touches every value; figures are row changes per second:

1. ``pymysqlreplication``: Sluice's own reader, ``binlog.events`` (``BinLogStreamReader``,
   non-blocking, ``only_schemas``, Sluice's ``only_events``), reading ``rows`` of each rows event;
2. ``mysql_event_stream`` (PyPI ``mysql-event-stream``: a C++ core over ``ctypes``, for MySQL 8.4+
   and MariaDB 10.11+), when importable: its ``BinlogClient`` (a C++ socket reader thread that also
   checks the CRC32s) feeding a ``CdcEngine`` filtered to the database, one ``ChangeEvent`` a row.
   Its client asks MariaDB for ANNOTATE_ROWS events (each statement's text before its rows events;
   ``binlog_annotate_row_events`` is on by default), and the binding compares that text with the
   last one for every row it converts: with this load's multi-row INSERTs (about 1 MB of SQL a
   statement) that is most of its time. Its decode-only figure (below) runs on transport 5's events,
   which carry none (like pymysqlreplication's stream), so it shows the engine without that cost;
3. ``asyncmy`` (PyPI ``asyncmy``: its ``replication`` module, pymysqlreplication's older pure-Python
   decoder ported to asyncio over asyncmy's Cython protocol), when importable;
4. ``hand``: ``mysql-cdc``'s own decoder (``sluice.connectors.cdc.mysql.row_images.compile_rows``:
   one straight-line function generated per column layout and event kind, ``struct`` formats
   precompiled, null checks inline, no call per value but the value constructors) on the raw
   events of transport 5, whose table maps this file parses; ``WRITE_ROWS``, ``UPDATE_ROWS`` and
   ``DELETE_ROWS`` (v1 and v2 type codes) of the common column types (integers, ``FLOAT``/
   ``DOUBLE``, ``DECIMAL``, ``CHAR``/``VARCHAR``, ``TEXT``/``BLOB``, ``DATE``, ``DATETIME``);
   another type in a captured table is refused when its table map arrives;
5. ``transport``: the floor: the same replication connection (PyMySQL's handshake, then
   ``COM_BINLOG_DUMP`` non-blocking, the packets framed by hand), every event's bytes read and
   nothing decoded.

Then, from the events transport 5 kept in memory, decode alone (no socket): ``hand`` and
``mysql_event_stream``'s ``CdcEngine``. Last, unless ``--no-verify``, an untimed pass decodes the
range again with each decoder and compares every row image with pymysqlreplication's, value by value
and type by type (``mysql_event_stream`` gives ``DECIMAL`` and ``DATETIME`` as text: parsed first).

The optional decoders are not in Sluice's venv: run the bench with a venv that has them and sees
Sluice's (below); without them it measures decoders 1, 4 and 5.

Usage (from the repository root)::

    .venv/bin/python -m bench.binlog_decoders [--rows N]
    # with the optional decoders: a scratch venv that also sees Sluice's
    python3.11 -m venv /tmp/binlog_venv && /tmp/binlog_venv/bin/pip install mysql-event-stream asyncmy
    echo "import site; site.addsitedir('$PWD/.venv/lib/python3.11/site-packages')" \\
        > /tmp/binlog_venv/lib/python3.11/site-packages/zz_sluice.pth
    /tmp/binlog_venv/bin/python -m bench.binlog_decoders --rows 100000

Measured (2026-11-24, the 2-core dev machine, MariaDB 10.11.19, otherwise idle; row changes/s,
``--rows 100000`` / ``--rows 200000``, i.e. 200,000 / 400,000 changes): pymysqlreplication 1.0.17
25,445 / 25,153; mysql-event-stream 1.8.0 27,888 / 28,925 (1.10x / 1.15x; decode only, without
ANNOTATE_ROWS, 82,457 / 79,973); asyncmy 0.2.18 30,829 / 33,096 (1.21x / 1.32x); hand-written
279,511 / 280,306 (10.99x / 11.14x; decode only 283,004 / 288,668); transport alone 3.8 M / 6.1 M
(504 / 813 MB/s). Every decoder's rows equalled pymysqlreplication's, value by value. The decode is
the cost, not the socket: the hand-written decoder reads the wire at 97 % of its in-memory rate.

A benchmark, nothing is asserted but the row counts and (when verified) the values. The last line is
the summary; every key names its unit.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

import pymysql
from pymysql.charset import charset_by_id

from sluice.connectors.cdc.mysql import binlog
from sluice.connectors.cdc.mysql.changes import ROWS, file_index
from sluice.connectors.cdc.mysql.row_images import (
    DELETE,
    HEADER,
    ROWS_KIND,
    UPDATE,
    WRITE,
    ColumnLayout,
    compile_rows,
    packed_int,
)

DATABASE: Final = "bench_binlog"
TABLE: Final = "rows"
COLUMNS: Final = ("id", "name", "amount", "note", "at")
CHUNK: Final = 10_000  # rows per INSERT transaction and per UPDATE statement
READER_ID: Final = 0x5B1D0  # replica ids of the readers (unique on the server while they read)

Row = tuple[Any, ...]
Change = tuple[str, Row | None, Row | None]  # (kind, before, after), values in COLUMNS order
Position = tuple[str, int]

# Binlog event type codes (MySQL's, which MariaDB shares for these).
ROTATE_EVENT: Final = 4
TABLE_MAP_EVENT: Final = 19
_LOG_POS = struct.Struct("<I").unpack_from


@dataclass(frozen=True)
class Timed:
    changes: int
    seconds: float
    nbytes: int = 0

    @property
    def per_s(self) -> float:
        return self.changes / self.seconds if self.seconds > 0 else float("nan")


# ---------------------------------------------------------------------------------------------
# Load: the table, its rows, the range of the binlog they were written to.


def _connect(params: binlog.Params, database: str | None = None) -> Any:
    return pymysql.connect(**params.settings(), database=database, autocommit=True, charset="utf8mb4")


def _row(i: int) -> tuple[Any, ...]:
    """Row ``i``: ~100 bytes; negative amounts, a NULL note every 7th row, non-ASCII text."""
    note = None if i % 7 == 0 else f"crème brûlée – 東京 №{i} " + "ж" * (i % 23)
    at = dt.datetime(2026, 1, 1) + dt.timedelta(milliseconds=i * 1_234_567 % 10**11)
    amount = Decimal(i % 2_000_000 - 1_000_000).scaleb(-2)
    return (i, f"Zoë-{i:08d}", amount, note, at)


def load(params: binlog.Params, rows: int) -> tuple[Position, Position, Timed]:
    """Create the table, insert and update ``rows`` rows; the binlog range and the load's rate."""
    conn = _connect(params)
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
            cur.execute(f"CREATE DATABASE {DATABASE} CHARACTER SET utf8mb4")
            cur.execute(
                f"CREATE TABLE {DATABASE}.{TABLE} (id BIGINT PRIMARY KEY, name VARCHAR(64) NOT NULL, "
                "amount DECIMAL(12,2) NOT NULL, note TEXT NULL, at DATETIME(3) NOT NULL)"
            )
        start = binlog.binlog_end(conn)
        t0 = time.perf_counter()
        conn.autocommit(False)
        with conn.cursor() as cur:
            for low in range(1, rows + 1, CHUNK):
                batch = [_row(i) for i in range(low, min(rows, low + CHUNK - 1) + 1)]
                cur.executemany(f"INSERT INTO {DATABASE}.{TABLE} VALUES (%s, %s, %s, %s, %s)", batch)
                conn.commit()
        conn.autocommit(True)
        with conn.cursor() as cur:
            for low in range(1, rows + 1, CHUNK):
                cur.execute(
                    f"UPDATE {DATABASE}.{TABLE} SET amount = amount + 1.01, at = at + INTERVAL 1 SECOND "
                    "WHERE id BETWEEN %s AND %s",
                    (low, min(rows, low + CHUNK - 1)),
                )
        seconds = time.perf_counter() - t0
        end = binlog.binlog_end(conn)
        return start, end, Timed(2 * rows, seconds)
    finally:
        conn.close()


def drop(params: binlog.Params) -> None:
    conn = _connect(params)
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
    finally:
        conn.close()


def _key(stop: Position) -> tuple[int, int]:
    return file_index(stop[0]), stop[1]


def _touch(row: Iterable[Any]) -> int:
    """Every value of a row image, looked at (the work a consumer does at the least)."""
    n = 0
    for v in row:
        if v is not None:
            n += 1
    return n


# ---------------------------------------------------------------------------------------------
# 1. pymysqlreplication, as Sluice reads with it.


def pymysqlreplication_changes(
    params: binlog.Params, start: Position, stop: Position, server_id: int
) -> Iterator[tuple[str, list[Any]]]:
    """(kind, rows) of each rows event of the table, through ``binlog.events``; rows as the library
    gives them (dicts: ``values`` or ``before_values``/``after_values``)."""
    end = _key(stop)
    for ev in binlog.events(params, server_id, start[0], start[1], [DATABASE]):
        if ev.kind == ROWS and ev.payload.table == TABLE:
            name = type(ev.payload).__name__
            kind = WRITE if name.startswith("Write") else UPDATE if name.startswith("Update") else DELETE
            yield kind, ev.payload.rows
        if (ev.file_index, ev.end) >= end:
            break


def touch_dict_rows(kind: str, rows: list[Any]) -> int:
    """Touch every value of rows as pymysqlreplication (and asyncmy) give them; their count."""
    for item in rows:
        if kind == UPDATE:
            _touch(item["before_values"].values())
            _touch(item["after_values"].values())
        else:
            _touch(item["values"].values())
    return len(rows)


def collect_dict_rows(out: list[Change]) -> Callable[[str, list[Any]], int]:
    def collect(kind: str, rows: list[Any]) -> int:
        for item in rows:
            if kind == UPDATE:
                b, a = item["before_values"], item["after_values"]
                out.append((kind, tuple(b[c] for c in COLUMNS), tuple(a[c] for c in COLUMNS)))
            else:
                values = tuple(item["values"][c] for c in COLUMNS)
                out.append((kind, None, values) if kind == WRITE else (kind, values, None))
        return len(rows)

    return collect


def run_pymysqlreplication(params: binlog.Params, start: Position, stop: Position) -> Timed:
    n = 0
    t0 = time.perf_counter()
    for kind, rows in pymysqlreplication_changes(params, start, stop, READER_ID):
        n += touch_dict_rows(kind, rows)
    return Timed(n, time.perf_counter() - t0)


def collect_pymysqlreplication(params: binlog.Params, start: Position, stop: Position) -> list[Change]:
    out: list[Change] = []
    collect = collect_dict_rows(out)
    for kind, rows in pymysqlreplication_changes(params, start, stop, READER_ID):
        collect(kind, rows)
    return out


# ---------------------------------------------------------------------------------------------
# 3. asyncmy's replication module (optional): pymysqlreplication's older code, ported to asyncio.


def _asyncmy() -> Any:
    try:
        import asyncmy.replication
    except ImportError:
        return None
    return asyncmy


async def _asyncmy_read(
    params: binlog.Params, start: Position, stop: Position, handle: Callable[[str, list[Any]], int]
) -> int:
    from asyncmy import connect
    from asyncmy.replication import BinLogStream
    from asyncmy.replication.events import XidEvent
    from asyncmy.replication.row_events import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    settings = {"host": params.host, "port": params.port, "user": params.user, "password": params.password}
    conn, ctl = await connect(**settings), await connect(**settings)
    stream = BinLogStream(
        conn, ctl, READER_ID + 4, master_log_file=start[0], master_log_position=start[1],
        resume_stream=True, blocking=False, only_schemas=[DATABASE],
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, XidEvent],
    )  # fmt: skip
    end, n = _key(stop), 0
    try:
        async for ev in stream:
            if not isinstance(ev, XidEvent) and ev.table == TABLE:
                kind = (
                    WRITE
                    if isinstance(ev, WriteRowsEvent)
                    else UPDATE
                    if isinstance(ev, UpdateRowsEvent)
                    else DELETE
                )
                n += handle(kind, ev.rows)
            # its non-blocking stream reconnects at the server's end instead of ending: stop on the
            # position (the range ends with a commit, an XID event)
            if (file_index(stream._master_log_file), stream._master_log_position) >= end:
                break
    finally:
        await stream.close()
        await ctl.ensure_closed()
    return n


def run_asyncmy(params: binlog.Params, start: Position, stop: Position) -> Timed:
    t0 = time.perf_counter()
    n = asyncio.run(_asyncmy_read(params, start, stop, touch_dict_rows))
    return Timed(n, time.perf_counter() - t0)


def collect_asyncmy(params: binlog.Params, start: Position, stop: Position) -> list[Change]:
    out: list[Change] = []
    asyncio.run(_asyncmy_read(params, start, stop, collect_dict_rows(out)))
    return out


# ---------------------------------------------------------------------------------------------
# 5. The transport: COM_BINLOG_DUMP over a PyMySQL connection, packets framed by hand.


def raw_events(params: binlog.Params, start: Position, stop: Position, server_id: int) -> Iterator[bytes]:
    """Each binlog event's bytes (header, body, checksum) from ``start`` until an event ends at or
    past ``stop`` (or the server's end: the dump is non-blocking)."""
    conn = _connect(params)
    try:
        with conn.cursor() as cur:
            cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
            cur.execute("SET @mariadb_slave_capability = 4")  # MariaDB: send GTID events as they are
        # COM_BINLOG_DUMP: position, flags (BINLOG_DUMP_NON_BLOCK: EOF at the end), replica id, file
        command = bytes([0x12]) + struct.pack("<IHI", start[1], 1, server_id) + start[0].encode()
        conn._next_seq_id = 0
        conn._write_bytes(struct.pack("<I", len(command)) + command)  # sequence id 0
        read = conn._sock.makefile("rb", buffering=1 << 20).read
        end = _key(stop)
        current = file_index(start[0])
        while True:
            head = read(4)
            if len(head) < 4:
                raise ConnectionError("bench binlog: the server closed the binlog stream")
            size = head[0] | head[1] << 8 | head[2] << 16
            data = read(size)
            while size == 0xFFFFFF:  # a packet of 16 MiB or more continues in the next
                head = read(4)
                size = head[0] | head[1] << 8 | head[2] << 16
                data += read(size)
            first = data[0]
            if first == 0xFE and len(data) < 9:
                return  # EOF: the server's end (non-blocking dump)
            if first == 0xFF:
                code = int.from_bytes(data[1:3], "little")
                raise ConnectionError(
                    f"bench binlog: server error {code}: {data[9:].decode(errors='replace')}"
                )
            event = data[1:]
            yield event
            log_pos = _LOG_POS(event, 13)[0]
            if log_pos and (current, log_pos) >= end:
                return
            if event[4] == ROTATE_EVENT:
                current = _rotated_to(event, current)
    finally:
        conn.close()


def _rotated_to(event: bytes, current: int) -> int:
    """The index of the file a ROTATE event names (its name ends the event, before any CRC32)."""
    name = event[HEADER + 8 :]
    for cut in (4, 0):  # with or without its CRC32
        text = name[: len(name) - cut].decode(errors="replace")
        if text.rpartition(".")[2].isdigit():
            return file_index(text)
    return current


def run_transport(
    params: binlog.Params, start: Position, stop: Position, changes: int
) -> tuple[Timed, list[bytes]]:
    """The floor: the range's bytes read and framed, nothing decoded (``changes`` is the count the
    decoders found, for a comparable rate). The events are kept for the decode-only runs."""
    kept: list[bytes] = []
    t0 = time.perf_counter()
    for event in raw_events(params, start, stop, READER_ID + 1):
        kept.append(event)
    seconds = time.perf_counter() - t0
    return Timed(changes, seconds, sum(map(len, kept))), kept


# ---------------------------------------------------------------------------------------------
# 4. The hand-written decoder.

# Metadata bytes per column type in a table map (types absent: none).
_META_SIZE: Final = {
    4: 1, 5: 1, 15: 2, 16: 2, 17: 1, 18: 1, 19: 1, 245: 1, 246: 2, 247: 2, 248: 2,
    249: 1, 250: 1, 251: 1, 252: 1, 253: 2, 254: 2, 255: 1,
}  # fmt: skip
_NUMERIC: Final = frozenset((1, 2, 3, 4, 5, 8, 9, 246))  # the columns the signedness bitmap covers
_CHARACTER: Final = frozenset((15, 249, 250, 251, 252, 253, 254))  # the columns charsets cover
_UTF8: Final = frozenset(("utf8", "utf8mb3", "utf8mb4", "utf-8"))


@dataclass
class Column:
    type: int
    meta: bytes
    nullable: bool
    unsigned: bool = False
    collation: int | None = None
    name: str = ""


@dataclass
class TableMap:
    schema: str
    table: str
    columns: list[Column]
    decoders: dict[tuple[int, bytes, bytes], Callable[[bytes, int, int], list[Any]]] = field(
        default_factory=dict
    )


def parse_table_map(event: bytes, crc: int) -> tuple[int, TableMap]:
    body_end = len(event) - crc
    p = HEADER
    table_id = int.from_bytes(event[p : p + 6], "little")
    p += 8
    n = event[p]
    schema = event[p + 1 : p + 1 + n].decode()
    p += n + 2
    n = event[p]
    table = event[p + 1 : p + 1 + n].decode()
    p += n + 2
    count, p = packed_int(event, p)
    types = event[p : p + count]
    p += count
    meta_len, p = packed_int(event, p)
    metas = []
    q = p
    for t in types:
        size = _META_SIZE.get(t, 0)
        metas.append(event[q : q + size])
        q += size
    p += meta_len
    nulls = int.from_bytes(event[p : p + (count + 7) // 8], "little")
    p += (count + 7) // 8
    columns = [Column(t, m, bool(nulls >> i & 1)) for i, (t, m) in enumerate(zip(types, metas, strict=True))]
    numeric = [c for c in columns if c.type in _NUMERIC]
    character = [c for c in columns if _is_character(c)]
    while p < body_end:  # optional metadata (binlog_row_metadata=MINIMAL|FULL): type, length, value
        kind = event[p]
        size, p = packed_int(event, p + 1)
        value = event[p : p + size]
        p += size
        if kind == 1:  # SIGNEDNESS: a bit a numeric column, most significant first, 1 = unsigned
            for i, c in enumerate(numeric):
                c.unsigned = bool(value[i // 8] >> (7 - i % 8) & 1)
        elif kind == 2:  # DEFAULT_CHARSET: the default, then (character column index, collation)
            default, q = packed_int(value, 0)
            for c in character:
                c.collation = default
            while q < len(value):
                index, q = packed_int(value, q)
                character[index].collation, q = packed_int(value, q)
        elif kind == 3:  # COLUMN_CHARSET: a collation a character column
            q = 0
            for c in character:
                c.collation, q = packed_int(value, q)
        elif kind == 4:  # COLUMN_NAME
            q = 0
            for c in columns:
                n, q = packed_int(value, q)
                c.name = value[q : q + n].decode()
                q += n
    return table_id, TableMap(schema, table, columns)


def _is_character(c: Column) -> bool:
    if c.type == 254:  # STRING: CHAR, unless its real type (first metadata byte) is ENUM or SET
        return (c.meta[0] | 0x30) not in (247, 248)
    return c.type in _CHARACTER


def _encoding(c: Column) -> str | None:
    """The Python codec of a character column (``None``: binary, left as bytes)."""
    if c.collation is None or c.collation == 63:
        return None if c.collation == 63 or c.type in (249, 250, 251, 252) else "utf-8"
    encoding = charset_by_id(c.collation).encoding
    return "utf-8" if encoding.lower() in _UTF8 else encoding


def _layout(c: Column) -> ColumnLayout:
    """The connector's layout of a column of this module's table-map parse (its raw metadata)."""
    t, meta = c.type, c.meta
    if t in (1, 2, 3, 8, 9, 4, 5):
        return ColumnLayout(t, unsigned=c.unsigned)
    if t in (15, 254, 249, 250, 251, 252):
        if t == 15:
            lsize = 1 if int.from_bytes(meta, "little") < 256 else 2
        elif t == 254:
            real, length = meta[0], meta[1]
            if (real | 0x30) in (247, 248):
                raise NotImplementedError("ENUM and SET columns")
            if real & 0x30 != 0x30:  # the length's top bits are kept in the type byte
                length |= ((real & 0x30) ^ 0x30) << 4
            lsize = 1 if length < 256 else 2
        else:
            lsize = meta[0]
        return ColumnLayout(252 if t in (249, 250, 251) else t, length_bytes=lsize, encoding=_encoding(c))
    if t == 246:
        return ColumnLayout(t, precision=meta[0], scale=meta[1])
    if t == 18:
        return ColumnLayout(t, fsp=meta[0])
    if t == 10:
        return ColumnLayout(t)
    raise NotImplementedError(f"column type {t}")


def _compile(
    tm: TableMap, kind: str, present: bytes, present2: bytes
) -> Callable[[bytes, int, int], list[Any]]:
    """The connector's generated decoder (``row_images.compile_rows``) for ``tm``'s full images."""
    full = bytes([255] * (len(tm.columns) // 8))
    if not (present.startswith(full) and (kind != UPDATE or present2.startswith(full))):
        raise NotImplementedError("partial row images")
    return compile_rows([_layout(c) for c in tm.columns], kind)


class HandDecoder:
    """Rows events of ``schemas``' tables -> (table map, kind, rows), from raw events in order."""

    def __init__(self, schemas: Sequence[str], crc: int) -> None:
        self.schemas = frozenset(schemas)
        self.crc = crc
        self.tables: dict[int, TableMap] = {}  # table id -> the map of a captured table
        self._maps: dict[bytes, TableMap] = {}  # a table map's bytes (id aside) -> its parse

    def decode(self, events: Iterable[bytes]) -> Iterator[tuple[TableMap, str, list[Any]]]:
        tables, crc, fb = self.tables, self.crc, int.from_bytes
        for ev in events:
            etype = ev[4]
            kind = ROWS_KIND.get(etype)
            if kind is not None:
                tm = tables.get(fb(ev[19:25], "little"))
                if tm is None:
                    continue  # a table not captured
                p = 27 + (ev[27] | ev[28] << 8) if etype >= 30 else 27  # v2: extra data
                ncols, p = (ev[p], p + 1) if ev[p] < 251 else packed_int(ev, p)
                nb = (ncols + 7) >> 3
                present = ev[p : p + nb]
                p += nb
                present2 = b""
                if kind == UPDATE:
                    present2 = ev[p : p + nb]
                    p += nb
                key = (etype, present, present2)
                rows = tm.decoders.get(key)
                if rows is None:
                    rows = tm.decoders[key] = _compile(tm, kind, present, present2)
                yield tm, kind, rows(ev, p, len(ev) - crc)
            elif etype == TABLE_MAP_EVENT:
                table_id = fb(ev[19:25], "little")
                shape = ev[25 : len(ev) - crc]
                tm = self._maps.get(shape)
                if tm is None:
                    tm = parse_table_map(ev, crc)[1]
                    if tm.schema not in self.schemas:
                        tables.pop(table_id, None)
                        continue
                    for c in tm.columns:  # refuse an unsupported type now, not at its first row
                        _layout(c)
                    self._maps[shape] = tm
                tables[table_id] = tm
            elif etype == ROTATE_EVENT and _LOG_POS(ev, 0)[0]:
                tables.clear()  # table ids are per server run; a new file may be a restart


def run_hand(events: Iterable[bytes], crc: int) -> int:
    n = 0
    for _tm, kind, rows in HandDecoder([DATABASE], crc).decode(events):
        if kind == UPDATE:
            for before, after in rows:
                _touch(before)
                _touch(after)
        else:
            for row in rows:
                _touch(row)
        n += len(rows)
    return n


def collect_hand(events: Iterable[bytes], crc: int) -> list[Change]:
    out: list[Change] = []
    for tm, kind, rows in HandDecoder([DATABASE], crc).decode(events):
        if tm.table != TABLE:
            continue
        order = [[c.name for c in tm.columns].index(name) for name in COLUMNS]
        for row in rows:
            if kind == UPDATE:
                out.append((kind, tuple(row[0][i] for i in order), tuple(row[1][i] for i in order)))
            else:
                values = tuple(row[i] for i in order)
                out.append((kind, None, values) if kind == WRITE else (kind, values, None))
    return out


# ---------------------------------------------------------------------------------------------
# 2. mysql-event-stream (optional).


def _mes() -> Any:
    try:
        import mysql_event_stream
    except ImportError:
        return None
    return mysql_event_stream


def mes_raw(params: binlog.Params, start: Position, stop: Position, server_id: int) -> Iterator[list[Any]]:
    """Batches of ``PollResult`` from ``mysql_event_stream.BinlogClient`` (its C++ reader thread),
    from ``start`` until an event ends at or past ``stop`` (the client's dump blocks at the end)."""
    mes = _mes()
    client = mes.BinlogClient(
        host=params.host, port=params.port, user=params.user, password=params.password,
        server_id=server_id, start_binlog_file=start[0], start_binlog_position=start[1],
        ssl_mode=0, read_timeout_s=60,
    )  # fmt: skip
    end = _key(stop)
    current = file_index(start[0])
    try:
        client.connect()
        client.start()
        while True:
            batch = [r for r in client.poll_batch(64) if r.data]
            done = False
            for r in batch:
                event = r.data
                log_pos = _LOG_POS(event, 13)[0]
                if log_pos and (current, log_pos) >= end:
                    done = True
                if event[4] == ROTATE_EVENT:
                    current = _rotated_to(event, current)
            yield batch
            if done:
                return
    finally:
        client.close()


def _mes_engine() -> Any:
    engine = _mes().CdcEngine()
    engine.set_include_databases([DATABASE])
    return engine


def _mes_feed(engine: Any, segments: Iterable[tuple[bool, bytes]]) -> Iterator[Any]:
    """Feed framed byte runs to ``engine``; every change event they produce."""
    for _checksum, data in segments:
        offset = 0
        while offset < len(data):
            offset += engine.feed(data[offset:] if offset else data)
            while (event := engine.next_event()) is not None:
                yield event
    while (event := engine.next_event()) is not None:
        yield event


def _segments(batch: list[Any]) -> list[tuple[bool, bytes]]:
    """Consecutive events under the same framing as one run of bytes (as ``CdcStream`` does)."""
    out: list[tuple[bool, list[bytes]]] = []
    for r in batch:
        if out and out[-1][0] == r.checksum_enabled:
            out[-1][1].append(r.data)
        else:
            out.append((r.checksum_enabled, [r.data]))
    return [(flag, b"".join(parts)) for flag, parts in out]


def mes_changes(params: binlog.Params, start: Position, stop: Position, server_id: int) -> Iterator[Any]:
    engine = _mes_engine()
    engine.set_trailer_pre_verified(True)  # the client's reader checked every CRC32 already
    try:
        for batch in mes_raw(params, start, stop, server_id):
            yield from _mes_feed(engine, _segments(batch))
    finally:
        engine.close()


def run_mes(params: binlog.Params, start: Position, stop: Position) -> Timed:
    t0 = time.perf_counter()
    n = _touch_mes(mes_changes(params, start, stop, READER_ID + 2))
    return Timed(n, time.perf_counter() - t0)


def _touch_mes(changes: Iterable[Any]) -> int:
    """Touch every value of the bench table's ``ChangeEvent``s; how many there were."""
    n = 0
    for ev in changes:
        if ev.table != TABLE:
            continue
        if ev.before is not None:
            _touch(ev.before.values())
        if ev.after is not None:
            _touch(ev.after.values())
        n += 1
    return n


def run_mes_memory(events: list[bytes]) -> int:
    """``CdcEngine`` alone over the kept events, fed as one run of bytes per 64 events (as its
    client's ``poll_batch`` hands them)."""
    engine = _mes_engine()
    try:
        chunks = (b"".join(events[i : i + 64]) for i in range(0, len(events), 64))
        return _touch_mes(_mes_feed(engine, ((True, c) for c in chunks)))
    finally:
        engine.close()


def _mes_value(column: str, value: Any) -> Any:
    """mysql-event-stream's text forms of DECIMAL and DATETIME, as pymysqlreplication's values."""
    if value is None:
        return None
    if column == "amount":
        return Decimal(value)
    if column == "at":
        return dt.datetime.fromisoformat(value)
    return value


def collect_mes(params: binlog.Params, start: Position, stop: Position) -> list[Change]:
    out: list[Change] = []
    for ev in mes_changes(params, start, stop, READER_ID + 2):
        if ev.table != TABLE:
            continue
        before = None if ev.before is None else tuple(_mes_value(c, ev.before[c]) for c in COLUMNS)
        after = None if ev.after is None else tuple(_mes_value(c, ev.after[c]) for c in COLUMNS)
        kind = ev.type.name.lower()
        out.append((WRITE if kind == "insert" else kind, before, after))
    return out


# ---------------------------------------------------------------------------------------------


def _same(got: Change, want: Change) -> bool:
    """Equal, and every value of the same type (``1 == Decimal(1)``, but not for a sink)."""
    if got != want:
        return False
    pairs = [(g, w) for g, w in zip(got[1:], want[1:], strict=True) if g is not None and w is not None]
    return all(type(a) is type(b) for g, w in pairs for a, b in zip(g, w, strict=True))


def _compare(name: str, got: list[Change], want: list[Change]) -> bool:
    if len(got) != len(want):
        print(f"verify {name}: {len(got):,} row changes, pymysqlreplication {len(want):,}: DIFFERENT")
        return False
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if not _same(g, w):
            print(f"verify {name}: change {i:,} differs:\n  {name}: {g!r}\n  pymysqlreplication: {w!r}")
            return False
    print(f"verify {name}: all {len(got):,} row changes equal pymysqlreplication's, value by value")
    return True


def _checksum_len(params: binlog.Params) -> int:
    conn = _connect(params)
    try:
        rows = binlog.fetch(conn, "SELECT @@global.binlog_checksum")
        return 0 if str(rows[0][0]).upper() == "NONE" else 4
    finally:
        conn.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.binlog_decoders", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--rows", type=int, default=100_000, help="rows inserted, then updated once (default 100,000)"
    )
    parser.add_argument("--host", help="MariaDB/MySQL host (default: the local stack's)")
    parser.add_argument("--port", type=int, help="its port (default: the local stack's)")
    parser.add_argument("--user", help="a user with REPLICATION SLAVE and CREATE/DROP (default: the stack's)")
    parser.add_argument("--password", help="its password (default: the stack's)")
    parser.add_argument("--no-verify", action="store_true", help="skip the untimed value-by-value comparison")
    args = parser.parse_args(argv)
    rows: int = args.rows
    if args.host is None or args.port is None or args.user is None or args.password is None:
        from sluice.worker.settings import settings_or_exit

        stack = settings_or_exit().stack
        host, port, user, password = (
            stack.host,
            stack.mariadb_port,
            stack.mariadb_user,
            stack.mariadb_password,
        )
    params = binlog.Params(args.host or host, args.port or port, args.user or user, args.password or password)
    mes, amy = _mes(), _asyncmy()
    crc = _checksum_len(params)
    timed: dict[str, Timed] = {}
    equal: dict[str, bool] = {}
    try:
        start, stop, load_rate = load(params, rows)
        print(
            f"bench binlog_decoders: {rows:,} rows inserted and updated once ({2 * rows:,} row changes) in "
            f"{load_rate.seconds:.1f} s; range {start[0]}:{start[1]} -> {stop[0]}:{stop[1]}; "
            f"mysql-event-stream {'present' if mes else 'not importable: skipped'}; "
            f"asyncmy {'present' if amy else 'not importable: skipped'}",
            flush=True,
        )
        # the transport first: it also warms the server's read of the range
        transport, kept = run_transport(params, start, stop, 2 * rows)
        timed["pymysqlreplication"] = run_pymysqlreplication(params, start, stop)
        t0 = time.perf_counter()
        n = run_hand(raw_events(params, start, stop, READER_ID + 3), crc)
        timed["hand"] = Timed(n, time.perf_counter() - t0)
        if mes:
            timed["mysql_event_stream"] = run_mes(params, start, stop)
        if amy:
            timed["asyncmy"] = run_asyncmy(params, start, stop)
        t0 = time.perf_counter()
        n = run_hand(kept, crc)
        timed["hand_decode_only"] = Timed(n, time.perf_counter() - t0)
        if mes:
            t0 = time.perf_counter()
            n = run_mes_memory(kept)
            timed["mysql_event_stream_decode_only"] = Timed(n, time.perf_counter() - t0)
        del kept
        for name, t in timed.items():
            print(f"{name}: {t.changes:,} row changes in {t.seconds:.2f} s", flush=True)
        wrong = {k: t.changes for k, t in timed.items() if t.changes != 2 * rows}
        if wrong:
            raise SystemExit(f"bench binlog_decoders: expected {2 * rows:,} row changes, got {wrong}")
        if not args.no_verify:
            want = collect_pymysqlreplication(params, start, stop)
            got = collect_hand(raw_events(params, start, stop, READER_ID + 3), crc)
            equal["hand"] = _compare("hand", got, want)
            if mes:
                equal["mysql_event_stream"] = _compare(
                    "mysql_event_stream", collect_mes(params, start, stop), want
                )
            if amy:
                equal["asyncmy"] = _compare("asyncmy", collect_asyncmy(params, start, stop), want)
            del want, got
    finally:
        drop(params)

    pym = timed["pymysqlreplication"]

    def ratio(t: Timed) -> float:
        return t.per_s / pym.per_s

    mb = transport.nbytes / 1e6
    labels = {
        "pymysqlreplication": "pymysqlreplication 1.0.17, as Sluice reads (wire)",
        "mysql_event_stream": "mysql-event-stream BinlogClient + CdcEngine (wire)",
        "asyncmy": "asyncmy.replication BinLogStream (wire)",
        "hand": "hand-written decoder, PyMySQL socket (wire)",
        "transport": f"transport alone, {mb:,.1f} MB framed, nothing decoded (wire)",
        "hand_decode_only": "hand-written decoder, decode only (memory)",
        "mysql_event_stream_decode_only": "mysql-event-stream CdcEngine, decode only, no ANNOTATE (memory)",
    }
    timed["transport"] = transport
    print(f"\n  {'decoder (one binlog range; row changes/s)':<70} {'events/s':>10} {'vs pymysqlr.':>12}")
    for name, label in labels.items():
        if name in timed:
            print(f"  {label:<70} {timed[name].per_s:>10,.0f} {ratio(timed[name]):>11.2f}x")
    for name, module in (("mysql-event-stream", mes), ("asyncmy", amy)):
        if not module:
            print(f"  ({name} not importable: see the module docstring to include it)")
    verified = "skipped" if args.no_verify else str(all(equal.values())).lower()
    keys = [f"{name}_events_per_s={t.per_s:.0f}" for name, t in timed.items()]
    keys += [
        f"ratio_{name}_vs_pymysqlreplication={ratio(t):.2f}" for name, t in timed.items() if t is not pym
    ]
    keys += [
        f"transport_mb_per_s={mb / transport.seconds:.1f}",
        f"row_changes={pym.changes}",
        f"rows={rows}",
        f"values_equal_pymysqlreplication={verified}",
    ]
    print("bench binlog_decoders: " + " ".join(keys))


if __name__ == "__main__":
    main()
