"""connectors.backfills: what a request does to a table's snapshot position, its progress, and the
SQL of ``--from/--to`` (pure; no services)."""

from __future__ import annotations

import pytest

from sluice.connectors.backfills import (
    Action,
    Backfill,
    literal,
    newest,
    progress,
    range_condition,
    sql_condition,
    step,
)
from sluice.connectors.key_chunks import Chunk, first_position
from sluice.connectors.positions import Position

T = "shop.orders"


def _at(
    request: int, *, done: bool = False, generation: int = 1, rows: int = 0, stopped: bool = False
) -> Position:
    return Chunk(5, [42], done, generation=generation, request=request, rows=rows, stopped=stopped).position()


def _req(id: int, cancelled: bool = False, tables: tuple[str, ...] = (T,)) -> Backfill:
    return Backfill(id, tables, "id > 10", 1_000 + id, cancelled)


@pytest.mark.parametrize(
    ("requests", "position", "action", "applied"),
    [
        ([], first_position(done=True), Action.NONE, None),
        ([_req(1)], first_position(done=True), Action.OPEN, 1),
        ([_req(1), _req(2)], _at(1), Action.OPEN, 2),  # a newer request replaces a running one
        ([_req(1)], _at(1), Action.NONE, None),  # applied: running
        ([_req(1)], _at(1, done=True), Action.NONE, None),  # applied: done, never again
        ([_req(1, cancelled=True)], _at(1), Action.STOP, 1),
        ([_req(1, cancelled=True)], _at(1, done=True), Action.NONE, None),
        ([_req(1, cancelled=True)], first_position(done=True), Action.NONE, None),  # before it started
        ([_req(1)], _at(3), Action.NONE, None),  # a later request was applied already
        ([_req(1, tables=("shop.other",))], first_position(done=True), Action.NONE, None),
    ],
)
def test_step(requests: list[Backfill], position: Position, action: Action, applied: int | None) -> None:
    got = step(requests, T, position)
    assert got.action is action
    assert (got.request.id if got.request else None) == applied


def test_newest_is_by_number_not_by_order() -> None:
    assert newest([_req(3), _req(1), _req(2, tables=("x",))], T) == _req(3)
    assert newest([_req(2, tables=("x",))], T) is None


@pytest.mark.parametrize(
    ("ask", "position", "state", "rows", "last"),
    [
        (_req(2), None, "waiting", 0, ""),
        (_req(2, cancelled=True), None, "cancelled", 0, ""),
        (_req(2), _at(1, done=True), "waiting", 0, ""),
        (_req(2), _at(2, rows=700), "running", 700, "[42]"),
        (_req(2), _at(2, done=True, rows=900), "done", 900, "[42]"),
        (_req(2, cancelled=True), _at(2, done=True, rows=300, stopped=True), "cancelled", 300, "[42]"),
        (_req(2, cancelled=True), _at(2, done=True, rows=900), "done", 900, "[42]"),  # cancelled after
        (_req(2), _at(3), "superseded", 0, ""),
    ],
)
def test_progress(ask: Backfill, position: Position | None, state: str, rows: int, last: str) -> None:
    positions = {} if position is None else {f"snapshot:{T}": position}
    [got] = progress(ask, positions)
    assert (got.request, got.table, got.state, got.rows, got.last_key) == (ask.id, T, state, rows, last)


@pytest.mark.parametrize(
    ("low", "high", "mysql", "expected"),
    [
        ("100", "200", False, "\"id\" >= '100' AND \"id\" < '200'"),
        ("2026-01-01", None, False, "\"id\" >= '2026-01-01'"),
        (None, "x'y", False, "\"id\" < 'x''y'"),
        (None, "a\\b", True, "\"id\" < 'a\\\\b'"),
        (None, "a\\b", False, "\"id\" < 'a\\b'"),
    ],
)
def test_range_condition(low: str | None, high: str | None, mysql: bool, expected: str) -> None:
    assert range_condition('"id"', low, high, mysql) == expected


def test_range_condition_needs_an_end() -> None:
    with pytest.raises(ValueError, match="--from, --to or both"):
        range_condition('"id"', None, None, False)


def test_a_condition_is_parenthesised_and_keeps_its_percent_signs_through_parameters() -> None:
    assert sql_condition("a = 1 OR name LIKE 'x%'") == "(a = 1 OR name LIKE 'x%%')"
    assert literal("it's", mysql=False) == "'it''s'"
