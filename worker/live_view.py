"""The demo's live view: per table, rows in source and target, changes landing per second, and lag.

Everything is measured in the databases themselves, so the view shows what a user of the target
sees, not what the pipeline believes:

- ``rows``: ``COUNT(*)`` on each side;
- ``changes/s``: target rows whose ``updated_at`` moved past the previous sample's high-water mark
  (inserts and updates alike), or the change in the target's row count if that is larger (rows
  arriving with old ``updated_at`` values, as change capture replays a bulk load; deletes), per
  second — a lower bound of the events applied;
- ``lag rows``: source rows changed after the newest change the target holds
  (``updated_at > target's MAX(updated_at)``; the source's ``(updated_at, id)`` index makes it cheap);
- ``lag s``: the source's newest ``updated_at`` minus the target's.

In a terminal the table refreshes in place (Rich ``Live``); otherwise (a log, CI) a compact line
per table is printed every few seconds.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table
from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine

from worker.shop import LoadStats


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


class ProgressSampler:
    """Samples source and target once per call; keeps each table's high-water mark between calls."""

    def __init__(self, source: Engine, target: Engine, tables: Sequence[str]) -> None:
        self._source, self._target, self._tables = source, target, list(tables)
        self._marks: dict[str, datetime | None] = {}
        self._rows: dict[str, int] = {}
        self._last = time.monotonic()

    def _target_side(self, table: str, mark: datetime | None) -> tuple[int, datetime | None, int]:
        if not inspect(self._target).has_table(table):
            return 0, None, 0
        with self._target.connect() as conn:
            rows, newest = conn.execute(text(f'SELECT COUNT(*), MAX(updated_at) FROM "{table}"')).one()
            newer = rows
            if mark is not None:
                newer = conn.execute(
                    text(f'SELECT COUNT(*) FROM "{table}" WHERE updated_at > :m'), {"m": mark}
                ).scalar_one()
        return int(rows), _utc(newest), int(newer)

    def sample(self) -> list[TableSample]:
        now = time.monotonic()
        elapsed = max(now - self._last, 1e-3)
        self._last = now
        samples = []
        for table in self._tables:
            mark = self._marks.get(table)
            target_rows, target_newest, changed = self._target_side(table, mark)
            with self._source.connect() as conn:
                source_rows, source_newest = conn.execute(
                    text(f"SELECT COUNT(*), MAX(updated_at) FROM `{table}`")
                ).one()
                behind = conn.execute(
                    text(f"SELECT COUNT(*) FROM `{table}` WHERE updated_at > :m"),
                    {"m": target_newest or datetime(1970, 1, 1)},
                ).scalar_one()
            source_newest = _utc(source_newest)
            lag_s = None
            if target_newest is not None and source_newest is not None:
                lag_s = max(0.0, (source_newest - target_newest).total_seconds())
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


def render(samples: Sequence[TableSample], load: LoadStats | None, phase: str) -> Table:
    table = Table(title=f"shop: MariaDB → RocketMQ → PostgreSQL — {phase}", title_justify="left")
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
    """Refreshes the view in place in a terminal; prints plain lines every ``plain_every_s`` otherwise."""

    def __init__(
        self, sampler: ProgressSampler, console: Console | None = None, plain_every_s: float = 5
    ) -> None:
        self.sampler = sampler
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
            self._live.update(render(self.latest, load, phase), refresh=True)
        elif time.monotonic() - self._last_plain >= self._plain_every:
            self._last_plain = time.monotonic()
            print(f"[{phase}]", flush=True)
            for line in plain_lines(self.latest):
                print(line, flush=True)
        return self.latest
