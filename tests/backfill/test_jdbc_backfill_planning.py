"""connectors.jdbc.backfill: how a request moves a table's snapshot position through a backfill,
which live partitions wait, and the SQL it reads with (pure; no services)."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.connectors.backfills import Backfill
from sluice.connectors.jdbc import backfill
from sluice.connectors.jdbc.queries import Mode, SelectColumn, Source
from sluice.connectors.jdbc.urls import Dialect
from sluice.connectors.key_chunks import Chunk
from sluice.connectors.positions import Position

T = "orders"
KEYS = [(k,) for k in range(1, 8)]


def _keys(chunk: Chunk, limit: int) -> list[tuple[Any, ...]]:
    after = chunk.after[0] if chunk.after else 0
    return [k for k in KEYS if k[0] > after][:limit]


def _walk(requests: list[Backfill], start: Position, steps: int) -> list[Chunk]:
    out, at = [], start
    for _ in range(steps):
        at = backfill.next_position(requests, T, at, _keys, 3)
        out.append(Chunk.of(at))
    return out


def test_a_request_opens_then_reads_chunks_until_one_is_short_then_rests() -> None:
    request = Backfill(4, (T,), "id > 0", 1234)
    chunks = _walk([request], backfill.earliest(), 5)
    assert [(c.index, c.after, c.done, c.rows) for c in chunks] == [
        (1, None, False, 0),  # opened: no rows yet
        (2, [3], False, 3),
        (3, [6], False, 6),
        (4, [7], True, 7),  # short: done
        (4, [7], True, 7),  # nothing more to do
    ]
    assert {(c.request, c.condition, c.signal, c.ts, c.generation) for c in chunks} == {
        (4, "id > 0", "backfill-4", 1234, 1)
    }


def test_cancel_ends_a_running_backfill_at_once() -> None:
    running = backfill.next_position([Backfill(1, (T,), "", 0)], T, backfill.earliest(), _keys, 3)
    running = backfill.next_position([Backfill(1, (T,), "", 0)], T, running, _keys, 3)
    stopped = backfill.next_position([Backfill(1, (T,), "", 0, cancelled=True)], T, running, _keys, 3)
    assert Chunk.of(stopped).done and Chunk.of(stopped).stopped and Chunk.of(stopped).after == [3]
    assert not backfill.holds_rows(running, stopped)


@pytest.mark.parametrize(
    ("start", "end", "holds"),
    [
        (Chunk(0, None, True), Chunk(1, None, False, generation=1), False),  # opened
        (Chunk(1, None, False, generation=1), Chunk(2, [3], False, generation=1), True),
        (Chunk(2, [3], False, generation=1), Chunk(3, [3], True, generation=1), False),  # short & empty
        (Chunk(2, [3], False, generation=1), Chunk(3, None, False, generation=2), False),  # replaced
    ],
)
def test_holds_rows(start: Chunk, end: Chunk, holds: bool) -> None:
    assert backfill.holds_rows(start.position(), end.position()) is holds


def test_a_table_with_a_chunk_planned_keeps_its_live_position_this_once() -> None:
    opened = Chunk(1, None, False, generation=1).position()
    chunk = Chunk(2, [3], False, generation=1).position()
    committed = {"orders": Position((10,)), "snapshot:orders": opened, "items": Position((5,))}
    committed |= {"snapshot:items": Chunk(0, None, True).position()}
    planned = {"snapshot:orders": chunk, "snapshot:items": Chunk(1, None, False, generation=1).position()}
    assert backfill.hold_live(planned, committed) == {"orders": Position((10,))}


def test_partitions_only_for_tables_a_request_named() -> None:
    assert backfill.partitions(["a", "b"], [Backfill(1, ("b",), "", 0)]) == ["snapshot:b"]


SRC = {
    Dialect.MYSQL: Source(
        Dialect.MYSQL, Mode.TIMESTAMP, table="shop.orders", timestamps=("ts",), order_keys=("a", "b")
    ),
    Dialect.POSTGRESQL: Source(
        Dialect.POSTGRESQL, Mode.INCREMENTING, table="orders", incrementing="id", order_keys=("id",)
    ),
}


@pytest.mark.parametrize(
    ("dialect", "condition", "after", "sql", "params"),
    [
        (Dialect.MYSQL, "", None, "SELECT `a`, `b` FROM `shop`.`orders` ORDER BY `a`, `b` LIMIT 5", ()),
        (
            Dialect.MYSQL,
            "name LIKE 'x%'",
            [1, "q"],
            "SELECT `a`, `b` FROM `shop`.`orders` WHERE (name LIKE 'x%%') AND (`a`, `b`) > (%s, %s) "
            "ORDER BY `a`, `b` LIMIT 5",
            (1, "q"),
        ),
        (
            Dialect.POSTGRESQL,
            "id < 9",
            [3],
            'SELECT "id" FROM "orders" WHERE (id < 9) AND ("id") > (%s) ORDER BY "id" LIMIT 5',
            (3,),
        ),
    ],
)
def test_keys_query(
    dialect: Dialect, condition: str, after: list[Any] | None, sql: str, params: tuple[Any, ...]
) -> None:
    got = backfill.keys_query(SRC[dialect], condition, after, 5)
    assert (got.text, got.params) == (sql, params)


def test_rows_query_reads_the_chunk_s_key_range_with_the_condition() -> None:
    got = backfill.rows_query(
        SRC[Dialect.POSTGRESQL], [SelectColumn("id"), SelectColumn("v", as_text=True)], "v <> ''", [3], [6]
    )
    assert got.text == (
        'SELECT "id", "v"::text AS "v" FROM "orders" WHERE (v <> \'\') AND ("id") > (%s) AND ("id") <= (%s) '
        'ORDER BY "id"'
    )
    assert got.params == (3, 6)
