"""mysql-cdc's binlog windows, table-driven: where a planned batch ends (a commit point, the pinned
server end, the record limit) and which records a range selects — no server involved."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.connectors.cdc.envelope import ChangeRecord
from sluice.connectors.cdc.mysql.changes import (
    COMMIT,
    GTID,
    ROWS,
    BinlogEvent,
    Change,
    TableShape,
    file_index,
    file_name,
    scan,
)
from sluice.connectors.cdc.mysql.config import SERVER_ID_BASE, select_tables, server_id

SHAPE = TableShape("d.t", "d", "t", (), ("id",))


def _rows(f: int, start: int, n: int) -> BinlogEvent:
    return BinlogEvent(f, start, start + 100, ROWS, payload=n)


def _commit(f: int, start: int) -> BinlogEvent:
    return BinlogEvent(f, start, start + 31, COMMIT)


def _decode(ev: BinlogEvent, gtid: str) -> list[Change]:
    return [
        Change("d.t", (ev.file_index, ev.start, i), ChangeRecord(0, {"id": i}, {"gtid": gtid}, 0), SHAPE)
        for i in range(int(ev.payload))
    ]


#: binlog.000003: txn A (2 rows) commits at 300+31, txn B (3 rows) at 600+31; a rotate; binlog.000004:
#: txn C (1 row) commits at 200+31.
STREAM = [
    BinlogEvent(3, 100, 140, GTID, payload="0-1-1"),
    _rows(3, 150, 2),
    _commit(3, 300),
    BinlogEvent(3, 331, 370, GTID, payload="0-1-2"),
    _rows(3, 400, 3),
    _commit(3, 600),
    BinlogEvent(4, 4, 60, GTID, payload="0-1-3"),
    _rows(4, 100, 1),
    _commit(4, 200),
]


@pytest.mark.parametrize(
    ("stop", "limit", "records", "end"),
    [
        ((4, 231), None, 6, (4, 231)),  # everything, up to the pinned end
        ((4, 231), 2, 2, (3, 331)),  # the limit is reached at A's commit: the window ends there
        ((4, 231), 3, 5, (3, 631)),  # B is taken whole though it passes the limit
        ((4, 231), 1, 2, (3, 331)),  # never half a transaction
        ((3, 631), None, 5, (3, 631)),  # pinned at B's commit: C (written later) is not read
        ((3, 331), None, 2, (3, 331)),
        ((9, 4), None, 6, (9, 4)),  # the stream ends (server end) before the pin, nothing open
    ],
)
def test_window_ends_on_a_commit_point(
    stop: tuple[int, int], limit: int | None, records: int, end: Any
) -> None:
    window = scan(iter(STREAM), stop, limit, _decode)
    assert (len(window.changes), window.end) == (records, end)


def test_a_window_whose_stream_stops_mid_transaction_ends_at_the_last_commit() -> None:
    window = scan(iter(STREAM[:5]), (9, 4), None, _decode)  # B's rows without its commit
    assert (len(window.changes), window.end) == (2, (3, 331))


def test_an_empty_stream_ends_at_the_pinned_end() -> None:
    window = scan(iter([]), (3, 631), 10, _decode)
    assert (window.changes, window.end) == ([], (3, 631))


def test_rereading_a_range_gives_the_same_records_in_the_same_order() -> None:
    planned = scan(iter(STREAM), (4, 231), 3, _decode)
    again = scan(iter(STREAM), planned.end or (0, 0), None, _decode)
    assert again.changes == planned.changes and again.end == planned.end
    assert [c.position for c in planned.changes] == sorted(c.position for c in planned.changes)
    assert {c.record.value["gtid"] for c in planned.changes if c.record.value} == {"0-1-1", "0-1-2"}


@pytest.mark.parametrize(
    ("start", "end", "positions"),
    [
        ((3, 331, 0), (4, 231, 0), [(3, 400, 0), (3, 400, 1), (3, 400, 2), (4, 100, 0)]),
        ((3, 100, 0), (3, 331, 0), [(3, 150, 0), (3, 150, 1)]),
        ((4, 4, 0), (4, 231, 0), [(4, 100, 0)]),
        ((4, 231, 0), (4, 231, 0), []),
    ],
)
def test_a_range_selects_the_records_between_its_positions(start: Any, end: Any, positions: Any) -> None:
    window = scan(iter(STREAM), (4, 231), None, _decode)
    assert [c.position for c in window.changes if start <= c.position < end] == positions


@pytest.mark.parametrize(
    ("name", "index"), [("binlog.000001", 1), ("mysql-bin.000042", 42), ("a.b.1234567", 1234567)]
)
def test_binlog_file_names_and_indexes(name: str, index: int) -> None:
    assert file_index(name) == index
    assert file_index(file_name(name.rpartition(".")[0], index)) == index


def test_a_binlog_file_name_without_a_number_is_refused() -> None:
    with pytest.raises(ValueError, match="no numeric suffix"):
        file_index("binlog.index")


@pytest.mark.parametrize(
    ("config", "selected"),
    [
        ({}, ["shop.orders", "shop.items", "crm.people"]),
        ({"database.include.list": ["shop"]}, ["shop.orders", "shop.items"]),
        ({"database.exclude.list": ["shop"]}, ["crm.people"]),
        ({"table.include.list": [r"shop\.o.*", "crm.people"]}, ["shop.orders", "crm.people"]),
        ({"table.exclude.list": [r".*\.items"]}, ["shop.orders", "crm.people"]),
        ({"database.include.list": ["mysql"]}, ["mysql.user"]),  # system databases only when named
    ],
)
def test_include_and_exclude_lists(config: dict[str, Any], selected: list[str]) -> None:
    assert select_tables(config, ["shop.orders", "shop.items", "crm.people", "mysql.user"]) == selected


def test_the_replica_id_is_derived_from_the_connector_name_unless_set() -> None:
    a, b = server_id({}, "orders-cdc"), server_id({}, "users-cdc")
    assert a != b and a == server_id({}, "orders-cdc") and min(a, b) >= SERVER_ID_BASE
    assert server_id({"database.server.id": 184054}, "orders-cdc") == 184054
