"""An on-demand snapshot chunk and a TRUNCATE in its window (connectors.cdc.ondemand): a truncate of
the chunk's table at or after the window's start drops every row of the chunk (read before the
truncate they are gone; read after, their keys were inserted since and the log sends them), while
one before the window, or of another table, leaves the usual per-key reconciliation."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.connectors.cdc import ondemand as od
from sluice.connectors.cdc import snapshot as snap
from sluice.connectors.cdc.envelope import ChangeRecord, envelope
from sluice.connectors.cdc.postgres.changes import Change, TableShape
from sluice.connectors.jdbc.types import MappedColumn
from sluice.connectors.positions import Position

COLUMNS = (MappedColumn("id", "int4", "INT", False),)
SHAPE = TableShape("public.t", "public", "t", COLUMNS, ("id",))


def _change(table: str, lsn: int, op: str, key: int | None) -> Change:
    row = None if key is None else {"id": key}
    value = envelope(op, None, row if op == "c" else None, {}, 0)
    return Change(table, (lsn, 0), ChangeRecord(0, row, value, 0), SHAPE)


@pytest.mark.parametrize(
    ("log", "kept"),
    [
        ([_change("public.t", 20, "c", 2)], [1, 3]),  # a changed key is dropped
        ([_change("public.t", 20, "t", None)], []),  # a truncate in the window drops the chunk
        ([_change("public.t", 5, "t", None), _change("public.t", 20, "c", 3)], [1, 2]),  # before it
        ([_change("public.other", 20, "t", None)], [1, 2, 3]),  # another table's
    ],
)
def test_a_truncate_in_the_window_drops_the_chunk(log: list[Any], kept: list[int]) -> None:
    rows = snap.Rows(COLUMNS, ("id",), [[1, 2, 3]], [[i] for i in (1, 2, 3)])
    changed = od.changed_keys(log, "public.t", ("id",), Position((10, 0)))
    assert od.kept(rows, changed).column("id") == kept
