"""The initial snapshot reads each table's next chunk ahead, over a connection of its own, while the
batch of the chunk just planned runs: a planning that starts where that read did takes it, and any
other planning (a re-plan from elsewhere, a read that failed) reads inline, so the chunks planned
are the same either way (connectors.cdc.snapshot.TableSnapshots)."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.connectors.cdc import snapshot as snap
from sluice.connectors.jdbc.types import MappedColumn
from sluice.connectors.positions import Position

ROWS = list(range(1, 8))  # the table's keys
CHUNK = 3
PARTITION = snap.partition_of("db.t")


class Table:
    """A table of ``ROWS``; records which reads ran where."""

    def __init__(self, apart_fails: bool = False) -> None:
        self.reads: list[tuple[str, Any]] = []
        self.apart_fails = apart_fails

    def _rows(self, after: list[Any] | None, limit: int | None) -> snap.Rows:
        keys = [k for k in ROWS if after is None or k > after[0]][:limit]
        return snap.Rows(
            (MappedColumn("id", "bigint", "BIGINT", False),), ("id",), [keys], [[k] for k in keys]
        )

    def fetch(
        self, table: str, after: list[Any] | None, upto: Any, limit: int | None, condition: str
    ) -> snap.Rows:
        self.reads.append(("inline", after))
        return self._rows(after, limit)

    def fetch_apart(
        self, table: str, after: list[Any] | None, upto: Any, limit: int | None, condition: str
    ) -> snap.Rows:
        self.reads.append(("apart", after))
        if self.apart_fails:
            raise ConnectionError("the server went away")
        return self._rows(after, limit)


def _plan_all(snapshots: snap.TableSnapshots) -> list[tuple[Position, list[int]]]:
    """Plan and read chunk after chunk until the table is done, committing each; each chunk's end
    and its rows' keys."""
    committed: dict[str, Position] = {}
    chunks = []
    while True:
        start = committed.get(PARTITION) or snap.first_position("origin")
        end = snapshots.latest(committed, "origin")[PARTITION]
        rows = snapshots.rows(PARTITION, start, end)
        chunks.append((end, [k for (k,) in rows.row_keys]))
        committed[PARTITION] = end
        if snap.Chunk.of(end).done:
            return chunks


def test_each_next_chunk_is_read_ahead_and_taken() -> None:
    table = Table()
    inline = _plan_all(snap.TableSnapshots(["db.t"], CHUNK, table.fetch))
    table.reads.clear()
    ahead = _plan_all(snap.TableSnapshots(["db.t"], CHUNK, table.fetch, fetch_apart=table.fetch_apart))

    assert ahead == inline
    assert [keys for _, keys in ahead] == [[1, 2, 3], [4, 5, 6], [7]]
    # the first chunk inline; each later one read apart, after the last key planned
    assert table.reads == [("inline", None), ("apart", [3]), ("apart", [6])]


def test_a_planning_from_elsewhere_reads_inline() -> None:
    table = Table()
    snapshots = snap.TableSnapshots(["db.t"], CHUNK, table.fetch, fetch_apart=table.fetch_apart)
    first = snapshots.latest({}, "origin")[PARTITION]  # reads [1, 2, 3], then [4, 5, 6] ahead
    # a re-plan from the start (the first chunk was never committed): the read ahead is not taken
    again = snapshots.latest({}, "origin")[PARTITION]
    assert again == first
    assert table.reads[0] == ("inline", None) and table.reads[-2:] == [("inline", None), ("apart", [3])]


@pytest.mark.parametrize("apart_fails", [True, False], ids=["read apart fails", "read apart works"])
def test_a_read_ahead_that_fails_is_read_inline(apart_fails: bool) -> None:
    table = Table(apart_fails=apart_fails)
    chunks = _plan_all(snap.TableSnapshots(["db.t"], CHUNK, table.fetch, fetch_apart=table.fetch_apart))
    assert [keys for _, keys in chunks] == [[1, 2, 3], [4, 5, 6], [7]]
    inline = [after for where, after in table.reads if where == "inline"]
    assert inline == ([None, [3], [6]] if apart_fails else [None])
