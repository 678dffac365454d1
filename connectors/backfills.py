"""Backfills: a past range of a running source connector's tables read again while it streams.

``sluice connector backfill NAME --where EXPR`` (or ``--from/--to`` on a column) records a
:class:`Backfill` request in the store; before each planning the runner hands a source task that
``TakesBackfills`` (connectors.api) its connector's requests. The task opens a new generation of
each named table's snapshot partition (connectors.key_chunks) in the batch it plans next, then reads
the range in primary-key chunks filtered by the condition, one chunk per batch, beside the live
stream, until a chunk comes back short. How each source keeps a key's changes in order:

- a change-capture source reconciles each chunk with the log range of the same batch and drops the
  keys changed in it (connectors.cdc.ondemand: Debezium's incremental snapshot, DBLog's watermarks);
- jdbc-source reads a table's chunk and its live range in different batches, so every row a chunk
  sends is at least as new as anything sent for its key before, and older than anything sent after
  (connectors.jdbc.backfill).

A request applies once: the snapshot position records the newest request it applied (meta ``req``),
committed with the batch that opened the generation, so a crash or restart neither loses nor repeats
it. A newer request of a table replaces a running one; a cancelled one stops at the next batch.
Nothing here does I/O: the store keeps the requests (activities.store.offsets), the task reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final

from sluice.connectors.key_chunks import Chunk, partition_of
from sluice.connectors.positions import Position

#: A backfill's signal id in positions and records (``source.snapshot`` stays "incremental").
SIGNAL_PREFIX: Final = "backfill-"


@dataclass(frozen=True)
class Backfill:
    """One request: its number (increasing per store), the connector's tables it re-reads, the SQL
    condition that filters their rows ("" for every row), when it was made (ms; stamped on its
    records, the same on every re-read) and whether it was cancelled."""

    id: int
    tables: tuple[str, ...]
    condition: str
    requested_ms: int
    cancelled: bool = False

    @property
    def signal(self) -> str:
        return f"{SIGNAL_PREFIX}{self.id}"


def newest(requests: Sequence[Backfill], table: str) -> Backfill | None:
    """The newest request naming ``table`` (the only one that can still act on it)."""
    named = [r for r in requests if table in r.tables]
    return max(named, key=lambda r: r.id) if named else None


class Action(Enum):
    """What a table's newest request does to its snapshot partition at the next planning."""

    NONE = "none"
    OPEN = "open"
    STOP = "stop"


@dataclass(frozen=True)
class Step:
    action: Action
    request: Backfill | None = None


def step(requests: Sequence[Backfill], table: str, position: Position) -> Step:
    """Whether the next planning opens a generation for ``table``, stops its running one, or leaves
    it (a request already applied, or superseded, or cancelled before it started)."""
    request = newest(requests, table)
    if request is None:
        return Step(Action.NONE)
    chunk = Chunk.of(position)
    if request.id > chunk.request:
        return Step(Action.NONE) if request.cancelled else Step(Action.OPEN, request)
    if request.cancelled and request.id == chunk.request and chunk.running:
        return Step(Action.STOP, request)
    return Step(Action.NONE)


def sql_condition(condition: str) -> str:
    """``condition`` as a term of a query run with ``%s`` parameters (PyMySQL and psycopg both read
    ``%%`` as one ``%``), parenthesised so its ORs stay inside."""
    return "(" + condition.replace("%", "%%") + ")"


def literal(value: str, mysql: bool) -> str:
    """A string literal both databases compare with a number, date or timestamp column (MySQL also
    reads backslashes as escapes in literals)."""
    text = value.replace("\\", "\\\\") if mysql else value
    return "'" + text.replace("'", "''") + "'"


def range_condition(column: str, low: str | None, high: str | None, mysql: bool) -> str:
    """``--from LOW --to HIGH`` on ``column`` (quoted): ``LOW <= column < HIGH``, either end open."""
    if low is None and high is None:
        raise ValueError("give --from, --to or both")
    terms = []
    if low is not None:
        terms.append(f"{column} >= {literal(low, mysql)}")
    if high is not None:
        terms.append(f"{column} < {literal(high, mysql)}")
    return " AND ".join(terms)


@dataclass(frozen=True)
class TableProgress:
    """How far one request got in one table: ``state`` is waiting (not started yet), running, done
    (read to its end, even when cancelled after), cancelled (stopped before its end) or superseded
    (a newer request of the table replaced it); ``rows`` read so far and the last key reached
    (JSON), for a request that started."""

    request: int
    table: str
    state: str
    rows: int = 0
    last_key: str = ""


def progress(request: Backfill, positions: Mapping[str, Position]) -> list[TableProgress]:
    """Each table's progress of ``request`` from its connector's committed positions."""
    out = []
    for table in request.tables:
        position = positions.get(partition_of(table))
        chunk = Chunk.of(position) if position is not None else None
        if chunk is None or chunk.request < request.id:
            state = "cancelled" if request.cancelled else "waiting"
            out.append(TableProgress(request.id, table, state))
            continue
        if chunk.request > request.id:
            out.append(TableProgress(request.id, table, "superseded"))
            continue
        state = "running" if not chunk.done else "cancelled" if chunk.stopped else "done"
        last = position.get("after") if position is not None else ""
        out.append(TableProgress(request.id, table, state, chunk.rows, last))
    return out
