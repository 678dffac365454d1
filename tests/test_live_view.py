"""The live view's ``lag s``: seconds on one clock, never a difference of ``updated_at`` values.

Regression for issue 20, item 5: while catching up, `make demo` showed ``92147014.7 s`` for
``orders`` because it subtracted the target's newest ``updated_at`` (a back-dated bulk-load row,
2023–2024) from the source's newest (a live row). The pure part (``remember``, ``outstanding``,
``lag_seconds``) is tested without services and table-driven; one test runs ``ProgressSampler``
against real MariaDB and PostgreSQL with a fake clock, as the demo does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from sluice.worker.demo.live_view import ProgressSampler, SourceMark, lag_seconds, outstanding, remember
from sluice.worker.demo.shop import connect_url
from tests.databases import TestDatabase

BULK = datetime(2024, 12, 5, 8, 0)  # the newest back-dated bulk-load ``updated_at`` (worker.demo.shop)
LIVE = datetime(2026, 11, 24, 2, 0)  # a live change written by MariaDB's clock, years later


def at(seconds: float) -> datetime:
    """A live ``updated_at`` ``seconds`` after ``LIVE`` (on MariaDB's clock, which the lag never reads)."""
    return LIVE + timedelta(seconds=seconds)


@dataclass(frozen=True)
class Case:
    name: str
    now: float
    marks: Sequence[SourceMark]
    target_newest: datetime | None
    expected: float | None


M = SourceMark
CASES = [
    Case("empty target", 50.0, [M(0.0, at(0))], None, None),
    Case("empty target and source", 50.0, [], None, None),
    Case("caught up: target holds the newest change", 50.0, [M(40.0, at(40))], at(40), 0.0),
    Case("caught up, marks already pruned", 50.0, [], at(40), 0.0),
    Case("target ahead (its newest row deleted in the source)", 50.0, [M(40.0, at(40))], at(45), 0.0),
    Case("behind by 7 s", 50.0, [M(40.0, at(40)), M(43.0, at(43)), M(48.0, at(48))], at(41), 7.0),
    Case("the oldest state the target lacks counts", 50.0, [M(40.0, at(40)), M(48.0, at(48))], at(39), 10.0),
    Case("change first seen this very sample", 50.0, [M(50.0, at(50))], at(49), 0.0),
    # The bug: the target holds only back-dated bulk rows, the source has had live rows since the
    # sampler started at 100 s: 4 s behind, not LIVE - BULK (~62 million s).
    Case("back-dated bulk rows in the target", 104.0, [M(100.0, at(0))], BULK - timedelta(days=300), 4.0),
    Case("back-dated rows on both sides", 104.0, [M(100.0, BULK)], BULK - timedelta(days=1), 4.0),
    # updated_at values far apart mean nothing: only the clock's readings do.
    Case("source clock years ahead", 12.5, [M(10.0, LIVE + timedelta(days=3650))], LIVE, 2.5),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_lag_seconds(case: Case) -> None:
    assert lag_seconds(case.now, case.marks, case.target_newest) == case.expected


def test_remember_keeps_only_the_first_sighting_of_each_newer_mark() -> None:
    marks = remember([], 1.0, None)  # an empty source has no mark
    assert marks == []
    marks = remember(marks, 2.0, at(0))
    marks = remember(marks, 3.0, at(0))  # the same state seen again: still first seen at 2
    marks = remember(marks, 4.0, at(3))
    marks = remember(marks, 5.0, at(1))  # the newest row deleted: no earlier sighting rewritten
    assert marks == [SourceMark(2.0, at(0)), SourceMark(4.0, at(3))]


def test_outstanding_drops_the_marks_the_target_reached() -> None:
    marks = [SourceMark(2.0, at(0)), SourceMark(4.0, at(3)), SourceMark(6.0, at(5))]
    assert outstanding(marks, None) == marks
    assert outstanding(marks, at(3)) == [SourceMark(6.0, at(5))]
    assert outstanding(marks, at(9)) == []


def test_a_sampled_catch_up_reads_seconds_not_years() -> None:
    """The sampler's bookkeeping over a catch-up: source live, target on bulk rows, then caught up."""
    marks: list[SourceMark] = []
    readings = [  # (clock, source newest, target newest, expected lag)
        (100.0, at(0), None, None),  # target table not there yet
        (101.0, at(1), BULK - timedelta(days=500), 1.0),  # snapshot running: behind since 100
        (103.0, at(3), BULK, 3.0),
        (105.0, at(5), at(0), 4.0),  # has what was there at 100; lacks what was there at 101
        (106.0, at(5), at(5), 0.0),  # load stopped, caught up
        (107.0, at(5), at(5), 0.0),
    ]
    for clock, source_newest, target_newest, expected in readings:
        marks = remember(marks, clock, source_newest)
        assert lag_seconds(clock, marks, target_newest) == expected, clock
        marks = outstanding(marks, target_newest)
    assert marks == []


class FakeClock:
    """Seconds that move only when the test says so."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_sampler_on_real_databases_with_back_dated_rows(
    mariadb_db: TestDatabase, postgres_db: TestDatabase
) -> None:
    """As in `make demo`: the target holds back-dated bulk rows while the source has live ones."""
    source, target = connect_url(mariadb_db.url), connect_url(postgres_db.url)
    clock = FakeClock()
    bulk = [(i, BULK - timedelta(days=i)) for i in range(1, 6)]
    try:
        with source.begin() as conn:
            conn.execute(
                text(
                    "CREATE TABLE orders (id BIGINT NOT NULL PRIMARY KEY, "
                    "updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) "
                    "ON UPDATE CURRENT_TIMESTAMP(6), KEY orders_updated (updated_at, id))"
                )
            )
            conn.execute(text("INSERT INTO orders VALUES (:id, :u)"), [{"id": i, "u": u} for i, u in bulk])
            conn.execute(text("INSERT INTO orders (id) VALUES (6), (7)"))  # live: MariaDB's clock
            live = [
                (int(i), u)
                for i, u in conn.execute(text("SELECT id, updated_at FROM orders WHERE id > 5 ORDER BY id"))
            ]
        with target.begin() as conn:
            conn.execute(text("CREATE TABLE orders (id BIGINT PRIMARY KEY, updated_at timestamptz NOT NULL)"))
            conn.execute(
                text("INSERT INTO orders VALUES (:id, :u)"),
                [{"id": i, "u": u.replace(tzinfo=UTC)} for i, u in bulk],
            )
        sampler = ProgressSampler(source, target, ["orders"], clock=clock)

        (first,) = sampler.sample()
        assert (first.source_rows, first.target_rows, first.lag_rows, first.lag_s) == (7, 5, 2, 0.0)

        clock.now += 3.5
        (behind,) = sampler.sample()
        assert behind.lag_rows == 2
        assert behind.lag_s == pytest.approx(3.5)  # not LIVE - BULK: years

        with target.begin() as conn:
            conn.execute(
                text("INSERT INTO orders VALUES (:id, :u)"),
                [{"id": i, "u": u.replace(tzinfo=UTC)} for i, u in live],
            )
        clock.now += 1.0
        (caught_up,) = sampler.sample()
        assert (caught_up.target_rows, caught_up.lag_rows, caught_up.lag_s) == (7, 0, 0.0)
    finally:
        source.dispose()
        target.dispose()
