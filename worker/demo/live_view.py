"""The demo's live view: per table, rows in source and target, changes landing per second, and lag.

Everything is read from the databases themselves, so the view shows what a user of the target
sees, not what the pipeline believes:

- ``rows``: ``COUNT(*)`` on each side;
- ``changes/s``: target rows whose ``updated_at`` moved past the previous sample's high-water mark
  (inserts and updates alike), or the change in the target's row count if that is larger (rows
  arriving with old ``updated_at`` values, as change capture replays a bulk load; deletes), per
  second — a lower bound of the events applied;
- ``lag rows``: source rows changed after the newest change the target holds
  (``updated_at > target's MAX(updated_at)``; the source's ``(updated_at, id)`` index makes it cheap);
- ``lag s``: how long the target has been missing a change the source holds, on ONE clock — the
  sampler's own (injected; ``time.monotonic`` by default): now minus the first sample at which the
  source's ``MAX(updated_at)`` was beyond what the target holds now (``lag_seconds``). 0 when caught
  up; a lower bound with the sampling interval as its resolution (the change happened between that
  sample and the one before); a change already in the source at the first sample counts from then.

``lag s`` is deliberately not a difference of ``updated_at`` values. The initial bulk load writes
back-dated ``updated_at`` (2023–2024, ``sluice.worker.demo.shop``), so while the target still holds only those
rows, "source's newest minus target's newest" (a live row's time minus a back-dated one) read years
(``92147014.7 s``) where the target was seconds behind; and ``updated_at`` is written by MariaDB's
clock, not the clock that reads "now". Here ``updated_at`` is only an order (which source state the
target has reached); every time is the sampler's.

In a terminal the table refreshes in place (Rich ``Live``); otherwise (a log, CI) a compact line
per table is printed every few seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeAlias

from rich.console import Console
from rich.live import Live
from rich.table import Table
from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine

from sluice.worker.demo.shop import LoadStats


def _utc(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class TableSample:
    table: str
    source_rows: int
    target_rows: int
    changes_per_s: float
    lag_rows: int
    lag_s: float | None  # None while the target holds nothing yet


@dataclass(frozen=True)
class SourceMark:
    """A source high-water mark and when the sampler first saw it.

    ``seen_at`` is on the sampler's clock; ``newest`` is the source's ``MAX(updated_at)`` (naive
    UTC), used only to order source states against what the target holds — never as a time.
    """

    seen_at: float
    newest: datetime


def remember(marks: Sequence[SourceMark], seen_at: float, newest: datetime | None) -> list[SourceMark]:
    """``marks`` plus the source's current high-water mark, if it moved past the last one.

    Only the first sighting of each newer mark is kept: that is the earliest the sampler knows the
    source held the change, which is what ``lag_seconds`` measures from.
    """
    if newest is None or (marks and newest <= marks[-1].newest):
        return list(marks)
    return [*marks, SourceMark(seen_at, newest)]


def outstanding(marks: Sequence[SourceMark], target_newest: datetime | None) -> list[SourceMark]:
    """The marks the target has not reached yet: the history stays as short as the lag.

    A reached mark matters no more while the target's ``MAX(updated_at)`` only grows; should its
    newest row be deleted, the lag counts from the next sighting instead (an underestimate).
    """
    if target_newest is None:
        return list(marks)
    return [m for m in marks if m.newest > target_newest]


def lag_seconds(now: float, marks: Sequence[SourceMark], target_newest: datetime | None) -> float | None:
    """Seconds the target has been missing a change the source holds; ``None`` for an empty target.

    ``now`` and every ``seen_at`` come from the same clock (the sampler's), so the result is a
    duration on one clock: now minus the first sighting of the oldest source state the target has
    not reached (``target_newest`` below that state's ``MAX(updated_at)``). ``updated_at`` values are
    only compared with each other (source against its own copy in the target), so back-dated rows
    or a database clock that differs from ours cannot turn seconds into years. 0 when caught up.
    """
    if target_newest is None:
        return None
    for mark in marks:  # oldest first
        if mark.newest > target_newest:
            return max(0.0, now - mark.seen_at)
    return 0.0


#: How the sampler reads a table's copy: ``(table, mark)`` -> its rows, its newest ``updated_at``
#: (naive UTC; None when it holds nothing) and its rows with ``updated_at`` past ``mark`` (all of
#: them when ``mark`` is None). A SQL target is read by ``sql_target_side``; `make demo-search`
#: reads an OpenSearch index instead.
TargetSide: TypeAlias = Callable[[str, datetime | None], tuple[int, datetime | None, int]]


def sql_target_side(target: Engine, table: str, mark: datetime | None) -> tuple[int, datetime | None, int]:
    """``TargetSide`` of a table in a PostgreSQL database (0 rows while the sink has not created it)."""
    if not inspect(target).has_table(table):
        return 0, None, 0
    with target.connect() as conn:
        rows, newest = conn.execute(text(f'SELECT COUNT(*), MAX(updated_at) FROM "{table}"')).one()
        newer = rows
        if mark is not None:
            newer = conn.execute(
                text(f'SELECT COUNT(*) FROM "{table}" WHERE updated_at > :m'), {"m": mark}
            ).scalar_one()
    return int(rows), _utc(newest), int(newer)


class ProgressSampler:
    """Samples source and target once per call; keeps each table's high-water marks between calls.

    ``target`` is the copy's database, or a ``TargetSide`` for a copy that is no SQL table.
    ``clock`` (seconds, monotonic by default) is the one clock behind both changes/s and ``lag s``;
    a test passes a fake one.
    """

    def __init__(
        self,
        source: Engine,
        target: Engine | TargetSide,
        tables: Sequence[str],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source, self._tables = source, list(tables)
        self._target_side: TargetSide = (
            partial(sql_target_side, target) if isinstance(target, Engine) else target
        )
        self._clock = clock
        self._marks: dict[str, datetime | None] = {}
        self._source_marks: dict[str, list[SourceMark]] = {}
        self._rows: dict[str, int] = {}
        self._last = clock()

    def sample(self) -> list[TableSample]:
        now = self._clock()
        elapsed = max(now - self._last, 1e-3)
        self._last = now
        samples = []
        for table in self._tables:
            mark = self._marks.get(table)
            # The target is read first and ``read_at`` taken before it: the source, read after, is at
            # least as far along, so a mark first seen now makes no lag until a later sample.
            read_at = self._clock()
            target_rows, target_newest, changed = self._target_side(table, mark)
            with self._source.connect() as conn:
                source_rows, source_newest = conn.execute(
                    text(f"SELECT COUNT(*), MAX(updated_at) FROM `{table}`")
                ).one()
                behind = conn.execute(
                    text(f"SELECT COUNT(*) FROM `{table}` WHERE updated_at > :m"),
                    {"m": target_newest or datetime(1970, 1, 1)},
                ).scalar_one()
            marks = remember(self._source_marks.get(table, []), self._clock(), _utc(source_newest))
            lag_s = lag_seconds(read_at, marks, target_newest)
            self._source_marks[table] = outstanding(marks, target_newest)
            first = table not in self._marks
            self._marks[table] = target_newest or mark
            changed = max(changed, abs(target_rows - self._rows.get(table, target_rows)))
            self._rows[table] = target_rows
            samples.append(
                TableSample(
                    table,
                    int(source_rows),
                    target_rows,
                    0.0 if first else changed / elapsed,
                    int(behind),
                    lag_s,
                )
            )
        return samples


def render(
    samples: Sequence[TableSample], load: LoadStats | None, phase: str, target: str = "PostgreSQL"
) -> Table:
    table = Table(title=f"shop: MariaDB → RocketMQ → {target} — {phase}", title_justify="left")
    for name, justify in (
        ("table", "left"), ("source rows", "right"), ("target rows", "right"),
        ("changes/s", "right"), ("lag rows", "right"), ("lag s", "right"),
    ):  # fmt: skip
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for s in samples:
        lag = "—" if s.lag_s is None else f"{s.lag_s:.1f}"
        table.add_row(
            s.table,
            f"{s.source_rows:,}",
            f"{s.target_rows:,}",
            f"{s.changes_per_s:,.0f}",
            f"{s.lag_rows:,}",
            lag,
        )
    if load is not None:
        table.caption = (
            f"load generator: {load.inserts:,} inserts, {load.updates:,} updates"
            + (f", {load.deletes:,} deletes" if load.deletes else "")
            + f" in {load.transactions:,} transactions"
            + (f"; {len(load.errors)} errors, last: {load.errors[-1]}" if load.errors else "")
        )
    return table


def plain_lines(samples: Sequence[TableSample]) -> list[str]:
    return [
        f"  {s.table:<10} source {s.source_rows:>9,}  target {s.target_rows:>9,}  "
        f"{s.changes_per_s:>8,.0f} changes/s  lag {s.lag_rows:>7,} rows"
        + ("" if s.lag_s is None else f" / {s.lag_s:.1f} s")
        for s in samples
    ]


class LiveView:
    """Refreshes the view in place in a terminal; prints plain lines every ``plain_every_s`` otherwise.
    ``target`` names the copy's side in the title."""

    def __init__(
        self,
        sampler: ProgressSampler,
        console: Console | None = None,
        plain_every_s: float = 5,
        target: str = "PostgreSQL",
    ) -> None:
        self.sampler = sampler
        self.target = target
        self.console = console or Console()
        self._live: Live | None = None
        self._plain_every = plain_every_s
        self._last_plain = 0.0
        self.latest: list[TableSample] = []

    def __enter__(self) -> LiveView:
        if self.console.is_terminal:
            self._live = Live(console=self.console, auto_refresh=False, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None

    def refresh(self, load: LoadStats | None, phase: str) -> list[TableSample]:
        self.latest = self.sampler.sample()
        if self._live is not None:
            self._live.update(render(self.latest, load, phase, self.target), refresh=True)
        elif time.monotonic() - self._last_plain >= self._plain_every:
            self._last_plain = time.monotonic()
            print(f"[{phase}]", flush=True)
            for line in plain_lines(self.latest):
                print(line, flush=True)
        return self.latest
