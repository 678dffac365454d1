"""Positions of a table read in primary-key chunks: the snapshot partitions ``snapshot:<table>``.

A change-capture source reads its initial snapshot and its on-demand re-snapshots this way
(connectors.cdc.snapshot, connectors.cdc.ondemand), and jdbc-source its backfills
(connectors.jdbc.backfill): each batch takes the next chunk of keys after the last one read. One
position shape serves all of them, so ``sluice connector backfill`` reports progress the same way
for every source (connectors.backfills.progress) and no source imports another's modules.

A position is the chunk counter ``(n,)`` — it only grows, so positions never go backwards — with
meta: ``after`` the last key read (JSON), ``done`` once the table (or the filtered range) is read
to its end, ``origin`` where capture started (CDC's initial snapshot), and for a re-read started
while streaming: ``gen``/``signal``/``ts`` (the generation, the signal that opened it and its
time), ``log`` (CDC: the log point a chunk was reconciled from), ``req`` (the newest backfill
request applied: connectors.backfills), ``where`` (the SQL condition the chunks are filtered by),
``rows`` (rows read by the generation so far) and ``stopped`` (ended by a stop or a cancel, not
read to its end).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Final

from sluice.connectors.positions import Position

PREFIX: Final = "snapshot:"


def partition_of(table: str) -> str:
    return PREFIX + table


def is_snapshot(partition: str) -> bool:
    return partition.startswith(PREFIX)


def table_of(partition: str) -> str:
    """The table a (snapshot or live) partition belongs to."""
    return partition[len(PREFIX) :] if is_snapshot(partition) else partition


def encode_key(values: Sequence[Any]) -> str:
    """A primary key as JSON for a position's meta: ints and strings as they are, bytes as hex, other
    values (decimals, dates) as their text, which both databases compare with the column."""

    def one(v: Any) -> Any:
        if isinstance(v, bytes | bytearray | memoryview):
            return {"hex": bytes(v).hex()}
        if isinstance(v, int | str) and not isinstance(v, bool):
            return v
        if isinstance(v, Decimal):
            return str(v)
        return str(v)

    return json.dumps([one(v) for v in values], separators=(",", ":"))


def decode_key(text: str) -> list[Any]:
    return [bytes.fromhex(v["hex"]) if isinstance(v, dict) else v for v in json.loads(text)]


@dataclass(frozen=True)
class Chunk:
    """What a snapshot position says (see the module docstring for each field's meta name)."""

    index: int
    after: list[Any] | None
    done: bool
    origin: str = ""
    generation: int = 0
    signal: str = ""
    ts: int = 0
    log: str = ""
    request: int = 0
    condition: str = ""
    rows: int = 0
    stopped: bool = False

    @classmethod
    def of(cls, position: Position) -> Chunk:
        after = position.get("after")
        return cls(
            int(position.key[0]),
            decode_key(after) if after else None,
            position.get("done") == "1",
            position.get("origin"),
            int(position.get("gen") or 0),
            position.get("signal"),
            int(position.get("ts") or 0),
            position.get("log"),
            int(position.get("req") or 0),
            position.get("where"),
            int(position.get("rows") or 0),
            position.get("stopped") == "1",
        )

    @property
    def running(self) -> bool:
        """A re-read started while streaming that has chunks left to read."""
        return self.generation > 0 and not self.done

    def reopened(self, signal: str, ts: int, request: int, condition: str) -> Chunk:
        """A new generation from here, no key read yet: opened by ``signal`` at ``ts`` (ms), with
        the newest backfill request applied so far and the condition its chunks are filtered by."""
        return Chunk(
            self.index + 1,
            None,
            False,
            self.origin,
            self.generation + 1,
            signal,
            ts,
            request=max(self.request, request),
            condition=condition,
        )

    def stopped_here(self) -> Chunk:
        """The generation ended before its end (a stop signal, a cancelled request): nothing more
        is read, and the range that ends it reads nothing."""
        return replace(self, index=self.index + 1, done=True, log="", stopped=True)

    def position(self) -> Position:
        meta = {"origin": self.origin} if self.origin else {}
        if self.after is not None:
            meta["after"] = encode_key(self.after)
        if self.done:
            meta["done"] = "1"
        if self.generation:
            meta.update(gen=str(self.generation), signal=self.signal, ts=str(self.ts))
        if self.log:
            meta["log"] = self.log
        if self.request:
            meta["req"] = str(self.request)
        if self.condition:
            meta["where"] = self.condition
        if self.rows:
            meta["rows"] = str(self.rows)
        if self.stopped:
            meta["stopped"] = "1"
        return Position((self.index,), tuple(meta.items()))


def first_position(origin: str = "", done: bool = False) -> Position:
    """Where a snapshot partition starts: before its first chunk, or (``done``) with nothing to read
    — a partition that exists for re-reads only."""
    return Chunk(0, None, done, origin).position()
