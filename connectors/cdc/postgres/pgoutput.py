"""A decoder for PostgreSQL's ``pgoutput`` logical replication messages (protocol version 1).

The layout is PostgreSQL's documented "Logical Replication Message Formats": one message per row
returned by ``pg_logical_slot_peek_binary_changes``, a one-byte tag then big-endian fields and
null-terminated strings. Only what change capture needs is kept (Begin, Commit, Relation, Insert,
Update, Delete, Truncate); Origin, Type and logical Message are recognised and skipped. Pure: bytes
in, frozen values out, so it is tested table-driven without a database. Malformed input raises
:class:`PgOutputError` naming the tag and the byte offset.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

#: Microseconds between the Unix epoch and PostgreSQL's epoch (2000-01-01 UTC).
PG_EPOCH_US: Final = 946_684_800_000_000


class PgOutputError(ValueError):
    """A message that does not follow the pgoutput layout."""


@dataclass(frozen=True)
class Column:
    name: str
    type_oid: int
    type_modifier: int
    is_key: bool  # part of the replica identity (the primary key under REPLICA IDENTITY DEFAULT)


@dataclass(frozen=True)
class Relation:
    relation_id: int
    schema: str
    table: str
    replica_identity: str  # d default, n nothing, f full, i index
    columns: tuple[Column, ...]


#: One column of a tuple: None (SQL NULL), the text form, or UNCHANGED (an unchanged TOASTed value
#: the server did not send).
class _Unchanged:
    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED: Final = _Unchanged()
Value = str | bytes | None | _Unchanged
Tuple = tuple[Value, ...]


@dataclass(frozen=True)
class Begin:
    final_lsn: int  # the commit record's LSN
    commit_time_us: int  # microseconds since the Unix epoch
    xid: int


@dataclass(frozen=True)
class Commit:
    commit_lsn: int
    end_lsn: int  # the end of the commit record: what the transaction's positions are made of
    commit_time_us: int


@dataclass(frozen=True)
class Insert:
    relation_id: int
    new: Tuple


@dataclass(frozen=True)
class Update:
    relation_id: int
    old: Tuple | None  # the old key ('K') or, under REPLICA IDENTITY FULL, the old row ('O')
    old_is_key: bool
    new: Tuple


@dataclass(frozen=True)
class Delete:
    relation_id: int
    old: Tuple
    old_is_key: bool


@dataclass(frozen=True)
class Truncate:
    relation_ids: tuple[int, ...]
    cascade: bool
    restart_identity: bool


@dataclass(frozen=True)
class Skipped:
    tag: str  # Origin, Type, logical decoding Message: nothing for change capture


Message = Begin | Commit | Relation | Insert | Update | Delete | Truncate | Skipped


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 1  # after the tag
        self.tag = chr(data[0]) if data else "?"

    def _take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise PgOutputError(
                f"pgoutput message {self.tag!r}: truncated at byte {self.pos} (needs {size} more)"
            )
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return int(value)

    def int8(self) -> int:
        return self._take(">B")

    def int16(self) -> int:
        return self._take(">h")

    def int32(self) -> int:
        return self._take(">i")

    def uint32(self) -> int:
        return self._take(">I")

    def int64(self) -> int:
        return self._take(">q")

    def uint64(self) -> int:
        return self._take(">Q")

    def string(self) -> str:
        end = self.data.find(b"\0", self.pos)
        if end < 0:
            raise PgOutputError(f"pgoutput message {self.tag!r}: unterminated string at byte {self.pos}")
        text = self.data[self.pos : end].decode("utf-8")
        self.pos = end + 1
        return text

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise PgOutputError(f"pgoutput message {self.tag!r}: value of {n} bytes at byte {self.pos}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def byte(self) -> str:
        return chr(self.int8())

    def tuple_data(self) -> Tuple:
        count = self.int16()
        values: list[Value] = []
        for _ in range(count):
            kind = self.byte()
            if kind == "n":
                values.append(None)
            elif kind == "u":
                values.append(UNCHANGED)
            elif kind == "t":
                values.append(self.raw(self.int32()).decode("utf-8"))
            elif kind == "b":
                values.append(self.raw(self.int32()))
            else:
                raise PgOutputError(
                    f"pgoutput message {self.tag!r}: unknown tuple column kind {kind!r} at {self.pos - 1}"
                )
        return tuple(values)

    def done(self) -> None:
        if self.pos != len(self.data):
            raise PgOutputError(
                f"pgoutput message {self.tag!r}: {len(self.data) - self.pos} unexpected trailing byte(s)"
            )


def _unix_us(pg_us: int) -> int:
    return pg_us + PG_EPOCH_US


def decode(data: bytes) -> Message:
    """One pgoutput message (protocol version 1)."""
    if not data:
        raise PgOutputError("empty pgoutput message")
    r = _Reader(bytes(data))
    tag = r.tag
    msg: Message
    if tag == "B":
        msg = Begin(r.uint64(), _unix_us(r.int64()), r.uint32())
    elif tag == "C":
        r.int8()  # flags, unused
        msg = Commit(r.uint64(), r.uint64(), _unix_us(r.int64()))
    elif tag == "R":
        rel_id, schema, table = r.uint32(), r.string(), r.string()
        identity = r.byte()
        columns = []
        for _ in range(r.int16()):
            flags, name, oid, typmod = r.int8(), r.string(), r.uint32(), r.int32()
            columns.append(Column(name, oid, typmod, bool(flags & 1)))
        msg = Relation(rel_id, schema, table, identity, tuple(columns))
    elif tag == "I":
        rel_id = r.uint32()
        if r.byte() != "N":
            raise PgOutputError(f"pgoutput Insert of relation {rel_id}: expected a new tuple ('N')")
        msg = Insert(rel_id, r.tuple_data())
    elif tag == "U":
        rel_id = r.uint32()
        kind = r.byte()
        old: Tuple | None = None
        old_kind = ""
        if kind in ("K", "O"):
            old, old_kind = r.tuple_data(), kind
            kind = r.byte()
        if kind != "N":
            raise PgOutputError(
                f"pgoutput Update of relation {rel_id}: expected a new tuple ('N'), got {kind!r}"
            )
        msg = Update(rel_id, old, old_kind == "K", r.tuple_data())
    elif tag == "D":
        rel_id = r.uint32()
        kind = r.byte()
        if kind not in ("K", "O"):
            raise PgOutputError(f"pgoutput Delete of relation {rel_id}: expected 'K' or 'O', got {kind!r}")
        msg = Delete(rel_id, r.tuple_data(), kind == "K")
    elif tag == "T":
        count, options = r.int32(), r.int8()
        msg = Truncate(tuple(r.uint32() for _ in range(count)), bool(options & 1), bool(options & 2))
    elif tag in ("O", "Y", "M"):
        return Skipped(tag)  # no trailing check: their layout is not needed
    else:
        raise PgOutputError(f"unknown pgoutput message tag {tag!r}")
    r.done()
    return msg
