"""Rows events' row images, decoded by code generated per column layout: 11× pymysqlreplication.

pymysqlreplication reads the binlog for ``mysql-cdc`` (connectors.cdc.mysql.binlog), and decoding
the row images is nearly all of that read's time: a few Python calls per value, through its
packet reader. ``make bench-binlog`` measured 25k row changes/s for it; the PyPI alternatives were
barely faster (docs/performance.md#binlog-decoders-make-bench-binlog). This module decodes the
rows of a WRITE/UPDATE/DELETE_ROWS event (v1 and v2) itself, from the event's bytes: for each
column layout (types and their metadata, the event kind, which columns are present) it compiles
one straight-line function that loops over the rows, with ``struct`` formats precompiled, null
checks inline, and no call per value but the value constructors (``bytes.decode``, ``Decimal``,
``datetime``).

The values are pymysqlreplication's, type for type (the table map is still its parse: names,
signedness, character sets), so nothing downstream changes; tests compare the two on every
supported type. Supported: the integers (signed and unsigned), FLOAT, DOUBLE, DECIMAL, CHAR,
VARCHAR, BINARY, VARBINARY, the TEXTs and BLOBs, DATE and DATETIME. An event of a table with any
other type (TIMESTAMP, TIME, YEAR, ENUM, SET, BIT, JSON, GEOMETRY), a partial row image or a
partial JSON update returns None: the caller decodes it with pymysqlreplication as before.
"""

from __future__ import annotations

import codecs
import datetime as dt
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

#: (before, after) images of one row, each a tuple in the table's column order (None: no image).
Image = tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]

HEADER: Final = 19  # v4 event header: timestamp, type, server id, size, log_pos, flags
WRITE, UPDATE, DELETE = "write", "update", "delete"
#: Rows event type codes (v1 and v2; MariaDB shares them) and what they hold.
ROWS_KIND: Final = {23: WRITE, 24: UPDATE, 25: DELETE, 30: WRITE, 31: UPDATE, 32: DELETE}
_INTS: Final = {1: "b", 2: "h", 3: "i", 8: "q"}  # TINY, SHORT, LONG, LONGLONG
_DIG2BYTES: Final = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)  # DECIMAL: bytes of a group of n < 9 digits
_MAX_COMPILED: Final = 512  # layouts kept compiled (a schema change makes a new one)


@dataclass(frozen=True)
class ColumnLayout:
    """How one column's values are laid out in a row image (from its table-map entry).

    ``length_bytes``: the length prefix of a string or blob; ``encoding``: the Python codec of a
    character column, None for bytes; ``precision``/``scale`` of a DECIMAL; ``fsp``, the
    fractional-second digits of a DATETIME.
    """

    type: int
    unsigned: bool = False
    length_bytes: int = 0
    encoding: str | None = None
    precision: int = 0
    scale: int = 0
    fsp: int = 0


def layout_of(column: Any) -> ColumnLayout | None:
    """A pymysqlreplication table-map column's layout, read as pymysqlreplication reads its values;
    None for a type this module does not decode."""
    t = int(column.type)
    if t in _INTS or t == 9 or t in (4, 5):
        return ColumnLayout(t, unsigned=bool(column.unsigned))
    if t in (15, 254):  # VARCHAR, CHAR (pymysqlreplication gives ENUM and SET their own types)
        return ColumnLayout(t, length_bytes=2 if column.max_length > 255 else 1, encoding=_codec(column))
    if t == 252:  # the TEXTs and BLOBs
        return ColumnLayout(t, length_bytes=int(column.length_size), encoding=_codec(column))
    if t == 246:
        return ColumnLayout(t, precision=int(column.precision), scale=int(column.decimals))
    if t == 18:
        return ColumnLayout(t, fsp=int(column.fsp))
    if t == 10:
        return ColumnLayout(t)
    return None


def _codec(column: Any) -> str | None:
    """pymysqlreplication's decoding of a character column: its charset's codec (utf-8 when the
    table map names none), or bytes as they are when Python has no such codec (``binary``)."""
    from pymysqlreplication.row_event import RowsEvent

    name = column.character_set_name
    encoding = "utf-8" if name is None else RowsEvent.charset_to_encoding(name)
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        return None


def _length_code(size: int, var: str) -> list[str]:
    """Read a little-endian length prefix of ``size`` bytes into ``var`` and step over it."""
    if size == 1:
        return [f"{var} = b[p]", "p += 1"]
    if size == 2:
        return [f"{var} = b[p] | b[p + 1] << 8", "p += 2"]
    return [f"{var} = fb(b[p:p + {size}], 'little')", f"p += {size}"]


def _decimal_code(c: ColumnLayout, var: str, ns: dict[str, Any]) -> list[str]:
    """DECIMAL: groups of 9 digits in 4 bytes (fewer digits in fewer bytes at both ends), stored
    big-endian with the sign bit flipped and every bit inverted when negative."""
    intg, frac = c.precision - c.scale, c.scale
    sizes = (
        ([_DIG2BYTES[intg % 9]] if intg % 9 else []) + [4] * (intg // 9)
        + [4] * (frac // 9) + ([_DIG2BYTES[frac % 9]] if frac % 9 else [])
    )  # fmt: skip
    digits = (
        ([intg % 9] if intg % 9 else []) + [9] * (intg // 9)
        + [9] * (frac // 9) + ([frac % 9] if frac % 9 else [])
    )  # fmt: skip
    size = sum(sizes)
    top, mask = 1 << (8 * size - 1), (1 << 8 * size) - 1
    terms, shift = [], 8 * size  # the magnitude's groups, most significant first, as one integer
    for nbytes, ndigits in zip(sizes, digits, strict=True):
        shift -= 8 * nbytes
        terms.append((f"(m >> {shift} & {(1 << 8 * nbytes) - 1})", ndigits))
    expr = terms[0][0]
    for term, ndigits in terms[1:]:
        expr = f"({expr}) * {10**ndigits} + {term}"
    if c.precision <= 28 and c.scale:
        # within the default context's 28 digits an integer times 10^-scale is exact (and keeps
        # the scale as an exponent, as parsing the text would), at half the cost of parsing
        ns[f"E{c.scale}"] = Decimal(1).scaleb(-c.scale)
        positive, negative = f"D({expr}) * E{c.scale}", f"D(-({expr})) * E{c.scale}"
    elif c.scale:
        positive, negative = f"D(f'{{{expr}}}e-{c.scale}')", f"D(f'-{{{expr}}}e-{c.scale}')"
    else:
        positive, negative = f"D({expr})", f"D(-({expr}))"
    return [
        f"m = fb(b[p:p + {size}], 'big')",
        f"p += {size}",
        f"if m & {top}:",
        f"    m ^= {top}",
        f"    {var} = {positive}",
        "else:",
        f"    m ^= {mask ^ top}",
        f"    {var} = {negative}",
    ]


def _datetime_code(c: ColumnLayout, var: str, ns: dict[str, Any]) -> list[str]:
    """DATETIME2: 5 bytes big-endian biased by 2^39 (year*13+month, day, hour, minute, second),
    then (fsp+1)/2 bytes of fraction; a date Python cannot hold (zero parts) is None."""
    fsize = (c.fsp + 1) // 2
    ns[f"DT{fsize}"] = struct.Struct({0: ">IB", 1: ">IBB", 2: ">IBH", 3: ">IBBH"}[fsize]).unpack_from
    parts = {0: "hi, lo", 1: "hi, lo, fr", 2: "hi, lo, fr", 3: "hi, lo, fh, fr"}[fsize]
    micro = {0: "0", 1: "fr", 2: "fr", 3: "(fh << 16 | fr)"}[fsize]
    if c.fsp % 2:
        micro = f"({micro} // 10)"
    if c.fsp < 6:
        micro = f"{micro} * {10 ** (6 - c.fsp)}"
    return [
        f"{parts} = DT{fsize}(b, p)",
        f"p += {5 + fsize}",
        "x = (hi << 8 | lo) & 549755813887",  # the 39 bits below the sign
        "ymd = x >> 17",
        "ym = ymd >> 5",
        "hms = x & 131071",
        "try:",
        f"    {var} = DT(ym // 13, ym % 13, ymd & 31, hms >> 12, hms >> 6 & 63, hms & 63, {micro})",
        "except ValueError:",
        f"    {var} = None",
    ]


def column_code(c: ColumnLayout, var: str, ns: dict[str, Any]) -> list[str]:
    """Straight-line code that decodes one value of ``c`` at ``b[p]`` into ``var``, advancing ``p``
    (``ns``: the generated function's globals, given what the code names)."""
    t = c.type
    if t in _INTS:
        fmt = "<" + (_INTS[t].upper() if c.unsigned else _INTS[t])
        ns[f"S{fmt[1]}"] = struct.Struct(fmt).unpack_from
        return [f"{var}, = S{fmt[1]}(b, p)", f"p += {struct.calcsize(fmt)}"]
    if t == 9:  # INT24
        return [f"{var} = fb(b[p:p + 3], 'little', signed={not c.unsigned})", "p += 3"]
    if t in (4, 5):  # FLOAT, DOUBLE
        fmt = "<f" if t == 4 else "<d"
        ns[f"S{fmt[1]}"] = struct.Struct(fmt).unpack_from
        return [f"{var}, = S{fmt[1]}(b, p)", f"p += {struct.calcsize(fmt)}"]
    if t in (15, 254, 252):
        lines = _length_code(c.length_bytes, "n")
        if c.encoding is None:  # pymysqlreplication's empty value is "": decoding b"" needs no codec
            return [*lines, f"{var} = b[p:p + n] if n else ''", "p += n"]
        decode = ".decode()" if c.encoding == "utf-8" else f".decode({c.encoding!r})"
        return [*lines, f"{var} = b[p:p + n]{decode}", "p += n"]
    if t == 246:
        return _decimal_code(c, var, ns)
    if t == 18:
        return _datetime_code(c, var, ns)
    if t == 10:  # DATE: 3 bytes little-endian, day 5 bits, month 4, year the rest
        return [
            "x = b[p] | b[p + 1] << 8 | b[p + 2] << 16",
            "p += 3",
            "try:",
            f"    {var} = DA(x >> 9, x >> 5 & 15, x & 31)",
            "except ValueError:",
            f"    {var} = None",
        ]
    raise ValueError(f"no generated decoding for column type {t}")


def compile_rows(columns: Sequence[ColumnLayout], kind: str) -> Callable[[bytes, int, int], list[Any]]:
    """One function ``rows(b, p, end)`` decoding every row image of a rows event of ``kind`` whose
    images hold all of ``columns`` and start at ``b[p]``: a list of value tuples (an update's: of
    (before, after) pairs)."""
    ns: dict[str, Any] = {"D": Decimal, "DT": dt.datetime, "DA": dt.date, "fb": int.from_bytes}

    def image(prefix: str) -> tuple[list[str], list[str]]:
        nb = (len(columns) + 7) // 8
        lines = ["nl = b[p]" if nb == 1 else f"nl = fb(b[p:p + {nb}], 'little')", f"p += {nb}"]
        names = []
        for k, c in enumerate(columns):
            var = f"{prefix}{k}"
            names.append(var)
            lines += [f"if nl & {1 << k}:", f"    {var} = None", "else:"]
            lines += ["    " + line for line in column_code(c, var, ns)]
        return lines, names

    body, before = image("v")
    if kind == UPDATE:
        after_lines, after = image("w")
        body += after_lines
        body.append(f"add((({', '.join(before)},), ({', '.join(after)},)))")
    else:
        body.append(f"add(({', '.join(before)},))")
    source = "\n".join(
        ["def rows(b, p, end):", "    out = []", "    add = out.append", "    while p < end:"]
        + ["        " + line for line in body]
        + ["    return out"]
    )
    exec(compile(source, f"<rows {kind} {len(columns)} columns>", "exec"), ns)  # noqa: S102 - our own code
    return ns["rows"]


_compiled: dict[tuple[tuple[ColumnLayout, ...], str], Callable[[bytes, int, int], list[Any]]] = {}


def packed_int(buf: bytes, p: int) -> tuple[int, int]:
    """A length-encoded integer at ``p``: (value, the offset after it)."""
    first = buf[p]
    if first < 251:
        return first, p + 1
    size = {252: 2, 253: 3, 254: 8}[first]
    return int.from_bytes(buf[p + 1 : p + 1 + size], "little"), p + 1 + size


def _all_present(bitmap: bytes, ncols: int) -> bool:
    """Whether a columns-present bitmap names every one of ``ncols`` columns (bits past them aside)."""
    whole, rest = divmod(ncols, 8)
    if any(b != 255 for b in bitmap[:whole]):
        return False
    return not rest or bitmap[whole] & ((1 << rest) - 1) == (1 << rest) - 1


def row_images(ev: Any) -> list[Image] | None:
    """Every row of ``ev`` (a pymysqlreplication WRITE/UPDATE/DELETE rows event) as (before, after)
    value tuples in the table's column order, equal to what its ``rows`` gives; None when a column
    type, a partial image or the event's form is not one this module decodes (use ``ev.rows``)."""
    event_name = type(ev).__name__
    if event_name not in ("WriteRowsEvent", "UpdateRowsEvent", "DeleteRowsEvent"):
        return None  # PartialUpdateRowsEvent (MySQL's partial JSON) among them
    layouts = []
    for column in ev.columns:
        layout = layout_of(column)
        if layout is None:
            return None
        layouts.append(layout)
    raw = ev.packet.packet._data  # the network packet: an OK byte, then the event
    crc = ev.packet.event_size - HEADER - ev.event_size  # the checksum after the rows (0 or 4)
    kind = ROWS_KIND.get(raw[5])
    if kind is None:
        return None
    p = 1 + HEADER + 8  # table id (6 bytes), flags (2)
    if raw[5] >= 30:  # v2: extra data, its length counting itself
        p += raw[p] | raw[p + 1] << 8
    ncols, p = packed_int(raw, p)
    if ncols != len(layouts):
        return None
    nb = (ncols + 7) // 8
    for _ in range(2 if kind == UPDATE else 1):
        if not _all_present(raw[p : p + nb], ncols):
            return None  # a partial image (binlog_row_image MINIMAL/NOBLOB)
        p += nb
    key = (tuple(layouts), kind)
    rows = _compiled.get(key)
    if rows is None:
        if len(_compiled) >= _MAX_COMPILED:
            _compiled.clear()
        rows = _compiled[key] = compile_rows(layouts, kind)
    try:
        decoded = rows(raw, p, 1 + ev.packet.event_size - crc)
    except (IndexError, ValueError, UnicodeDecodeError, struct.error):
        return None  # not laid out as its table map says: pymysqlreplication decides (and says why)
    if kind == UPDATE:
        return decoded
    return [(None, row) for row in decoded] if kind == WRITE else [(row, None) for row in decoded]
