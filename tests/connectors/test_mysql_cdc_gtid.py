"""GTID-set arithmetic of mysql-cdc positions, table-driven: parse/format of both flavours, adding a
transaction (MariaDB: per domain, the newest), containment, covering, and the scan carrying the set
forward and skipping what a set already holds (what makes a failover neither lose nor double)."""

from __future__ import annotations

import pytest

from sluice.connectors.cdc.envelope import ChangeRecord
from sluice.connectors.cdc.mysql.changes import COMMIT, GTID, ROWS, BinlogEvent, Change, TableShape, scan
from sluice.connectors.cdc.mysql.failover import gtid_of
from sluice.connectors.cdc.mysql.gtid import GtidFormatError, GtidSet, source_filter, source_of

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "8f2b1d6c-0000-11e1-9e33-c80aa9429562"


@pytest.mark.parametrize(
    ("text", "formatted"),
    [
        ("", ""),
        ("[]", ""),
        ("0-1-42", "0-1-42"),
        ("[1-2-7,0-1-42]", "0-1-42,1-2-7"),  # a Gtid_list event's text, domains sorted
        ("0-1-42,0-2-40", "0-1-42"),  # a binlog state (per domain and server) -> per domain, newest
        ("0-2-40,0-1-42", "0-1-42"),
        (f"{U1}:1-5:7", f"{U1}:1-5:7"),
        (f"{U1}:1-5:6-9,{U2}:3", f"{U1}:1-9,{U2}:3"),  # adjacent intervals merge
        (f"{U2}:3,\n{U1.upper()}:2-4", f"{U1}:2-4,{U2}:3"),  # MySQL's line breaks, UUIDs lower-cased
    ],
)
def test_parse_and_format(text: str, formatted: str) -> None:
    parsed = GtidSet.parse(text)
    assert str(parsed) == formatted and GtidSet.parse(str(parsed)) == parsed


@pytest.mark.parametrize("text", ["0-1", "abc", f"{U1}:x", "0-1-2,xyz"])
def test_malformed_sets_are_refused(text: str) -> None:
    with pytest.raises(GtidFormatError):
        GtidSet.parse(text)


@pytest.mark.parametrize(
    ("start", "added", "after"),
    [
        ("", ["0-1-1", "0-1-2"], "0-1-2"),
        ("0-1-5", ["1-1-1", "0-1-6"], "0-1-6,1-1-1"),  # domains kept apart
        ("0-1-5", ["0-2-6"], "0-2-6"),  # a failover: the domain goes on under another server
        ("0-1-9", ["0-2-6"], "0-1-9"),  # an older transaction does not move a domain back
        (f"{U1}:1-3", [f"{U1}:5", f"{U1}:4", f"{U2}:1"], f"{U1}:1-5,{U2}:1"),
    ],
)
def test_adding_transactions(start: str, added: list[str], after: str) -> None:
    out = GtidSet.parse(start)
    for gtid in added:
        out = out.add(gtid)
    assert str(out) == after


@pytest.mark.parametrize(
    ("text", "gtid", "contained"),
    [
        ("0-1-5", "0-1-5", True),
        ("0-1-5", "0-2-4", True),  # any server's, within the domain's sequence
        ("0-1-5", "0-1-6", False),
        ("0-1-5", "1-1-1", False),
        ("", "0-1-1", False),
        (f"{U1}:1-5:7", f"{U1}:7", True),
        (f"{U1}:1-5:7", f"{U1}:6", False),  # MySQL keeps gaps exactly
        (f"{U1}:1-5", f"{U2}:1", False),
    ],
)
def test_contains(text: str, gtid: str, contained: bool) -> None:
    assert GtidSet.parse(text).contains(gtid) is contained


@pytest.mark.parametrize(
    ("big", "small", "covers", "beyond"),
    [
        ("0-1-9,1-1-3", "0-1-7", True, ""),
        ("0-1-9", "0-1-7,1-1-1", False, "1-1-1"),
        ("0-1-9", "0-1-10", False, "0-1-10"),
        ("0-1-9", "", True, ""),
        (f"{U1}:1-9", f"{U1}:2-4:6", True, ""),
        (f"{U1}:1-4:6-9", f"{U1}:2-6", False, U1),
        (f"{U1}:1-9", f"{U1}:1,{U2}:1", False, U2),
    ],
)
def test_covers_and_what_is_beyond(big: str, small: str, covers: bool, beyond: str) -> None:
    a, b = GtidSet.parse(big), GtidSet.parse(small)
    assert a.covers(b) is covers and a.beyond(b) == beyond


def test_flavours_do_not_mix() -> None:
    with pytest.raises(GtidFormatError, match="MySQL GTID"):
        GtidSet.parse("0-1-1").add(f"{U1}:1")


@pytest.mark.parametrize(
    ("includes", "excludes", "text", "kept"),
    [
        ([], [], "0-1-9,1-1-3", "0-1-9,1-1-3"),
        (["0|2"], [], "0-1-9,1-1-3,2-5-1", "0-1-9,2-5-1"),  # MariaDB: domain ids
        ([], ["1"], "0-1-9,1-1-3,11-1-1", "0-1-9,11-1-1"),  # whole-id matches
        ([], [U2[:8] + ".*"], f"{U1}:1-3,{U2}:1", f"{U1}:1-3"),  # MySQL: server UUIDs
    ],
)
def test_sources_are_filtered_by_pattern(
    includes: list[str], excludes: list[str], text: str, kept: str
) -> None:
    keep = source_filter(includes, excludes)
    assert str(GtidSet.parse(text).only(keep)) == kept
    assert [keep(source_of(str(g))) for g in GtidSet.parse(text).domains] == [
        str(g) in kept.split(",") for g in GtidSet.parse(text).domains
    ]


@pytest.mark.parametrize(
    ("kind", "info", "gtid"),
    [
        ("Gtid", "BEGIN GTID 0-1-47140", "0-1-47140"),
        ("Gtid", "GTID 0-1-5 cid=12", "0-1-5"),
        ("Gtid", f"SET @@SESSION.GTID_NEXT= '{U1}:23'", f"{U1}:23"),
        ("Query", "BEGIN", None),
        ("Gtid_list", "[0-1-5]", None),
    ],
)
def test_gtids_of_binlog_event_rows(kind: str, info: str, gtid: str | None) -> None:
    assert gtid_of(kind, info) == gtid


SHAPE = TableShape("d.t", "d", "t", (), ("id",))


def _decode(ev: BinlogEvent, gtid: str) -> list[Change]:
    return [Change("d.t", (ev.file_index, ev.start, 0), ChangeRecord(0, {"g": gtid}, None, 0), SHAPE)]


def _txn(start: int, gtid: str) -> list[BinlogEvent]:
    return [
        BinlogEvent(1, start, start + 10, GTID, payload=gtid),
        BinlogEvent(1, start + 10, start + 20, ROWS),
        BinlogEvent(1, start + 20, start + 30, COMMIT),
    ]


#: Two domains interleaved differently than on the server the positions were read from.
LOG = _txn(100, "0-1-5") + _txn(200, "1-1-2") + _txn(300, "0-1-6") + _txn(400, "1-1-3")


@pytest.mark.parametrize(
    ("start", "upto", "read", "end_set"),
    [
        (None, None, [], None),  # no GTIDs on the server: nothing tracked (all read: see below)
        ("", None, ["0-1-5", "1-1-2", "0-1-6", "1-1-3"], "0-1-6,1-1-3"),
        ("0-1-5,1-1-2", None, ["0-1-6", "1-1-3"], "0-1-6,1-1-3"),
        ("0-1-6,1-1-0", None, ["1-1-2", "1-1-3"], "0-1-6,1-1-3"),  # read elsewhere: skipped here
        ("0-1-4,1-1-1", "0-1-5,1-1-2", ["0-1-5", "1-1-2"], "0-1-5,1-1-2"),  # a range re-read by sets
    ],
)
def test_the_scan_carries_the_set_and_skips_what_it_holds(
    start: str | None, upto: str | None, read: list[str], end_set: str | None
) -> None:
    gtids = GtidSet.parse(start) if start is not None else None
    window = scan(iter(LOG), (9, 0), None, _decode, gtids, GtidSet.parse(upto) if upto else None)
    got = [c.record.key["g"] for c in window.changes]
    assert got == (read if start is not None else ["0-1-5", "1-1-2", "0-1-6", "1-1-3"])
    assert (str(window.gtids) if window.gtids is not None else None) == end_set


def test_a_window_cut_by_the_record_limit_ends_with_the_set_of_its_last_commit() -> None:
    window = scan(iter(LOG), (9, 0), 2, _decode, GtidSet.parse(""))
    assert window.end == (1, 230) and str(window.gtids) == "0-1-5,1-1-2"
