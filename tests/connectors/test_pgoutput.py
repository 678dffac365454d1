"""The pgoutput decoder and change assembly, table-driven over hand-built protocol messages
(the layout of PostgreSQL's "Logical Replication Message Formats", protocol version 1)."""

from __future__ import annotations

import struct
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest

from sluice.connectors.cdc.postgres import pgoutput as pg
from sluice.connectors.cdc.postgres.changes import UNAVAILABLE, ChangeDecoder, with_offsets
from sluice.connectors.cdc.postgres.values import column_info, mapped_column, parse_value


def s(text: str) -> bytes:
    return text.encode() + b"\0"


def tup(*values: Any) -> bytes:
    out = struct.pack(">h", len(values))
    for v in values:
        if v is None:
            out += b"n"
        elif v is pg.UNCHANGED:
            out += b"u"
        else:
            raw = str(v).encode()
            out += b"t" + struct.pack(">i", len(raw)) + raw
    return out


def begin(final_lsn: int, ts_pg_us: int, xid: int) -> bytes:
    return b"B" + struct.pack(">QqI", final_lsn, ts_pg_us, xid)


def commit(commit_lsn: int, end_lsn: int, ts_pg_us: int) -> bytes:
    return b"C" + struct.pack(">BQQq", 0, commit_lsn, end_lsn, ts_pg_us)


def relation(
    rel_id: int, schema: str, table: str, ident: str, cols: list[tuple[int, str, int, int]]
) -> bytes:
    out = (
        b"R"
        + struct.pack(">I", rel_id)
        + s(schema)
        + s(table)
        + ident.encode()
        + struct.pack(">h", len(cols))
    )
    for flags, name, oid, typmod in cols:
        out += struct.pack(">B", flags) + s(name) + struct.pack(">Ii", oid, typmod)
    return out


REL = relation(
    16390, "public", "t", "d", [(1, "id", 23, -1), (0, "v", 25, -1), (0, "n", 1700, (10 << 16 | 2) + 4)]
)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (begin(0x38BBC748, 10, 6033), pg.Begin(0x38BBC748, 10 + pg.PG_EPOCH_US, 6033)),
        (commit(0x10, 0x40, 5), pg.Commit(0x10, 0x40, 5 + pg.PG_EPOCH_US)),
        (
            REL,
            pg.Relation(
                16390,
                "public",
                "t",
                "d",
                (
                    pg.Column("id", 23, -1, True),
                    pg.Column("v", 25, -1, False),
                    pg.Column("n", 1700, (10 << 16 | 2) + 4, False),
                ),
            ),
        ),
        (b"I" + struct.pack(">I", 7) + b"N" + tup(1, "a", None), pg.Insert(7, ("1", "a", None))),
        (b"U" + struct.pack(">I", 7) + b"N" + tup(1, "b"), pg.Update(7, None, False, ("1", "b"))),
        (
            b"U" + struct.pack(">I", 7) + b"K" + tup(1, None) + b"N" + tup(2, pg.UNCHANGED),
            pg.Update(7, ("1", None), True, ("2", pg.UNCHANGED)),
        ),
        (
            b"U" + struct.pack(">I", 7) + b"O" + tup(1, "a") + b"N" + tup(1, "b"),
            pg.Update(7, ("1", "a"), False, ("1", "b")),
        ),
        (b"D" + struct.pack(">I", 7) + b"K" + tup(3, None), pg.Delete(7, ("3", None), True)),
        (b"D" + struct.pack(">I", 7) + b"O" + tup(3, "x"), pg.Delete(7, ("3", "x"), False)),
        (b"T" + struct.pack(">iBII", 2, 1, 7, 8), pg.Truncate((7, 8), True, False)),
        (b"Y" + struct.pack(">I", 99) + s("public") + s("mood"), pg.Skipped("Y")),
        (b"I" + struct.pack(">I", 7) + b"N" + tup("ünï"), pg.Insert(7, ("ünï",))),
    ],
)
def test_decode(data: bytes, expected: pg.Message) -> None:
    assert pg.decode(data) == expected


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"", "empty"),
        (b"Z", "unknown pgoutput message tag 'Z'"),
        (b"B\x00\x00", "truncated"),
        (begin(1, 2, 3) + b"x", "trailing"),
        (b"I" + struct.pack(">I", 7) + b"X", "expected a new tuple"),
        (b"I" + struct.pack(">I", 7) + b"N" + struct.pack(">h", 1) + b"q", "unknown tuple column kind"),
        (
            b"I" + struct.pack(">I", 7) + b"N" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 9) + b"ab",
            "value",
        ),
        (b"R" + struct.pack(">I", 1) + b"public", "unterminated string"),
        (b"D" + struct.pack(">I", 7) + b"N" + tup(1), "expected 'K' or 'O'"),
    ],
)
def test_malformed_messages_name_the_problem(data: bytes, fragment: str) -> None:
    with pytest.raises(pg.PgOutputError, match=fragment):
        pg.decode(data)


@pytest.mark.parametrize(
    ("oid", "typmod", "text", "value"),
    [
        (23, -1, "-42", -42),
        (20, -1, "9007199254740993", 9007199254740993),
        (21, -1, "7", 7),
        (1700, (12 << 16 | 2) + 4, "1234.50", Decimal("1234.50")),
        (1700, -1, "3.14159265358979323846264338327950288", "3.14159265358979323846264338327950288"),
        (25, -1, "text 😀", "text 😀"),
        (1043, 24, "varchar", "varchar"),
        (16, -1, "t", True),
        (16, -1, "f", False),
        (701, -1, "1.5e-07", 1.5e-07),
        (1082, -1, "2024-02-29", date(2024, 2, 29)),
        (1114, -1, "2024-01-01 00:00:00.5", datetime(2024, 1, 1, 0, 0, 0, 500000)),
        (1184, -1, "2024-05-06 05:08:09.123456+00", datetime(2024, 5, 6, 5, 8, 9, 123456, tzinfo=UTC)),
        (17, -1, "\\x00ff10", b"\x00\xff\x10"),
        (3802, -1, '{"a": [1, 2]}', '{"a": [1, 2]}'),
        (2950, -1, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        (16400, -1, "happy", "happy"),  # an enum: its label
    ],
)
def test_values_map_like_the_jdbc_source(oid: int, typmod: int, text: str, value: Any) -> None:
    column = mapped_column("c", oid, typmod, "connector 'x' table 'public.t'")
    assert parse_value(column, text, "here") == value
    assert parse_value(column, None, "here") is None


def test_numeric_precision_comes_from_the_type_modifier() -> None:
    info = column_info("amount", 1700, (14 << 16 | 3) + 4)
    assert (info.precision, info.scale) == (14, 3)
    assert mapped_column("amount", 1700, (14 << 16 | 3) + 4, "w").spark_ddl == "DECIMAL(14,3)"


def test_unsupported_types_and_bad_values_name_the_column() -> None:
    with pytest.raises(ValueError, match=r"table 'public.t' column 'pts'.*unsupported column type"):
        mapped_column("pts", 600, -1, "connector 'x' table 'public.t'")  # point
    column = mapped_column("d", 1082, -1, "w")
    with pytest.raises(ValueError, match=r"connector 'x' column 'd'.*'infinity'"):
        parse_value(column, "infinity", "connector 'x'")


def _decoder(tombstones: bool = True) -> ChangeDecoder:
    return ChangeDecoder(
        {"public.t": ("id",)}, where="connector 'x'", server="srv", db="shop", tombstones=tombstones
    )


def _feed(decoder: ChangeDecoder, *messages: bytes) -> list[Any]:
    out = []
    for i, m in enumerate(messages):
        out.extend(decoder.feed(1000 + i, m))
    return out


def _ins(*v: Any) -> bytes:
    return b"I" + struct.pack(">I", 16390) + b"N" + tup(*v)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        # (op, key, before, after) per record, in order
        ([_ins(1, "a", "1.50")], [("c", {"id": 1}, None, {"id": 1, "v": "a", "n": Decimal("1.50")})]),
        (
            [b"U" + struct.pack(">I", 16390) + b"N" + tup(1, "b", "2.00")],
            [("u", {"id": 1}, None, {"id": 1, "v": "b", "n": Decimal("2.00")})],
        ),
        (  # REPLICA IDENTITY FULL: the old row; an unchanged TOASTed value taken from it
            [
                b"U"
                + struct.pack(">I", 16390)
                + b"O"
                + tup(1, "big", "1.00")
                + b"N"
                + tup(1, pg.UNCHANGED, "2.00")
            ],
            [
                (
                    "u",
                    {"id": 1},
                    {"id": 1, "v": "big", "n": Decimal("1.00")},
                    {"id": 1, "v": "big", "n": Decimal("2.00")},
                )
            ],
        ),
        (  # DEFAULT identity, unchanged TOASTed text: Debezium's placeholder
            [b"U" + struct.pack(">I", 16390) + b"N" + tup(1, pg.UNCHANGED, "2.00")],
            [("u", {"id": 1}, None, {"id": 1, "v": UNAVAILABLE, "n": Decimal("2.00")})],
        ),
        (  # a primary-key change: delete + tombstone of the old key, create of the new one
            [b"U" + struct.pack(">I", 16390) + b"K" + tup(1, None, None) + b"N" + tup(2, "a", "1.00")],
            [
                ("d", {"id": 1}, {"id": 1, "v": None, "n": None}, None),
                (None, {"id": 1}, None, None),
                ("c", {"id": 2}, None, {"id": 2, "v": "a", "n": Decimal("1.00")}),
            ],
        ),
        (
            [b"D" + struct.pack(">I", 16390) + b"K" + tup(3, None, None)],
            [("d", {"id": 3}, {"id": 3, "v": None, "n": None}, None), (None, {"id": 3}, None, None)],
        ),
    ],
)
def test_changes_follow_debeziums_rules(changes: list[bytes], expected: list[tuple[Any, ...]]) -> None:
    out = _feed(_decoder(), begin(0x500, 1_000_000, 77), REL, *changes, commit(0x500, 0x530, 1_000_000))
    got = []
    for c in out:
        v = c.record.value
        got.append(
            (None, c.record.key, None, None)
            if v is None
            else (v["op"], c.record.key, v["before"], v["after"])
        )
    assert got == expected
    assert [c.position for c in out] == [(0x530, i) for i in range(len(out))]
    first = out[0].record.value
    assert first["source"] == {
        "version": "sluice-1",
        "connector": "postgresql",
        "name": "srv",
        "ts_ms": (1_000_000 + pg.PG_EPOCH_US) // 1000,
        "snapshot": "false",
        "db": "shop",
        "schema": "public",
        "table": "t",
        "txId": 77,
        "lsn": 1002,
    }
    assert first["ts_ms"] == first["source"]["ts_ms"]  # commit time: a re-read is identical


def test_transactions_uncaptured_tables_and_offsets() -> None:
    other = relation(16400, "public", "audit", "d", [(1, "id", 23, -1)])
    decoder = _decoder(tombstones=False)
    audit_row = b"I" + struct.pack(">I", 16400) + b"N" + tup(9)
    first = _feed(decoder, begin(0x500, 1, 1), REL, _ins(1, "a", None), other,
                  audit_row, _ins(2, "b", None), commit(0x500, 0x530, 1))  # fmt: skip
    assert [c.record.key for c in first] == [{"id": 1}, {"id": 2}]  # the audit row is not captured
    assert decoder.last_end_lsn == 0x530
    second = _feed(decoder, begin(0x600, 2, 2), b"D" + struct.pack(">I", 16390) + b"K" + tup(1, None, None),
                   commit(0x600, 0x640, 2))  # fmt: skip
    assert [c.position for c in second] == [(0x640, 0)]  # no tombstone with tombstones.on.delete=false
    offsets = [c.record.offset for c in with_offsets(first + second, 0x500)]
    assert offsets == sorted(offsets) and len(set(offsets)) == 3 and offsets[0] == 0x30 << 20


def test_a_change_outside_a_transaction_or_of_an_unknown_relation_fails() -> None:
    with pytest.raises(pg.PgOutputError, match="outside a transaction"):
        _feed(_decoder(), REL, _ins(1, "a", None))
    with pytest.raises(pg.PgOutputError, match="unknown relation 16390"):
        _feed(_decoder(), begin(1, 1, 1), _ins(1, "a", None), commit(1, 2, 1))
