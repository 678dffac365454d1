"""Positions and partition keys: where reading has got to, in a form every source can express.

Kafka Connect keeps source offsets as opaque maps and Spark's Kafka source one number per
partition. Sluice needs both properties at once: the runtime must *order* positions (a commit never
moves backwards, a range is ``[start, end)``), yet real sources have composite positions — a JDBC
table read in ``timestamp+incrementing`` mode is at ``(timestamp, id)``, a MySQL binlog at
``(file, offset)`` with a GTID set beside it, PostgreSQL at an LSN, a file at a byte offset *of one
particular file*. So a :class:`Position` is:

- ``key``: a tuple of ints and strings, compared element by element (the order), and
- ``meta``: facts that travel with the position but do not order it (a file's identity, a GTID
  set). Two positions with the same key but different meta are not equal: a byte offset of a
  replaced file is not the same place.

Positions are stored as versioned JSON (``{"v": 1, "key": [...], "meta": {...}}``); a bare integer
is what Sluice stored before positions were versioned and still reads as ``key=(n,)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

POSITION_VERSION: Final = 1

PositionPart = int | str


class PositionFormatError(ValueError):
    """A stored or handed-in position is not one this version of Sluice can read."""


@dataclass(frozen=True)
class Position:
    """An ordered, possibly composite position; "the next thing to read" (see the module docstring)."""

    key: tuple[PositionPart, ...]
    meta: tuple[tuple[str, str], ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.key:
            raise PositionFormatError("a position needs at least one key part")
        for part in self.key:
            if isinstance(part, bool) or not isinstance(part, int | str):
                raise PositionFormatError(f"position key parts must be int or str, got {part!r}")
        object.__setattr__(self, "meta", tuple(sorted((str(k), str(v)) for k, v in self.meta)))

    @classmethod
    def of(cls, *key: PositionPart, **meta: str) -> Position:
        return cls(tuple(key), tuple(meta.items()))

    # ---- order (by key only) --------------------------------------------------------------------
    def _cmp_key(self, other: object) -> tuple[PositionPart, ...]:
        if not isinstance(other, Position):
            raise TypeError(f"a position can only be ordered against a position, not {other!r}")
        if len(other.key) != len(self.key) or any(
            isinstance(a, int) != isinstance(b, int) for a, b in zip(self.key, other.key, strict=True)
        ):
            raise TypeError(f"positions of different shapes cannot be ordered: {self} and {other}")
        return other.key

    def __lt__(self, other: Position) -> bool:
        return self.key < self._cmp_key(other)

    def __le__(self, other: Position) -> bool:
        return self.key <= self._cmp_key(other)

    def __gt__(self, other: Position) -> bool:
        return self.key > self._cmp_key(other)

    def __ge__(self, other: Position) -> bool:
        return self.key >= self._cmp_key(other)

    # ---- integer positions (queue offsets, byte offsets) ----------------------------------------
    @property
    def is_offset(self) -> bool:
        return len(self.key) == 1 and isinstance(self.key[0], int)

    @property
    def offset(self) -> int:
        """The single integer of an offset position; TypeError for composite positions."""
        if not self.is_offset:
            raise TypeError(f"position {self} is not a single integer offset")
        return int(self.key[0])

    def moved_to(self, offset: int) -> Position:
        """The same kind of offset position (same meta) at another offset."""
        return Position((offset,), self.meta)

    def get(self, name: str, default: str = "") -> str:
        return dict(self.meta).get(name, default)

    def with_meta(self, **meta: str) -> Position:
        return Position(self.key, tuple({**dict(self.meta), **meta}.items()))

    # ---- JSON ------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"v": POSITION_VERSION, "key": list(self.key)}
        if self.meta:
            doc["meta"] = dict(self.meta)
        return doc

    @classmethod
    def from_json(cls, raw: Any, *, where: str = "position") -> Position:
        """Read a stored position: the current version, or a bare integer from before versioning."""
        if isinstance(raw, int) and not isinstance(raw, bool):
            if raw < 0:
                raise PositionFormatError(f"{where}: a legacy integer position must be >= 0, got {raw}")
            return cls((raw,))
        if not isinstance(raw, Mapping):
            raise PositionFormatError(f"{where}: expected a position object or integer, got {raw!r}")
        version = raw.get("v")
        if version != POSITION_VERSION:
            raise PositionFormatError(
                f"{where}: position version {version!r} is not supported by this Sluice "
                f"(it reads version {POSITION_VERSION}); was it written by a newer release?"
            )
        key, meta = raw.get("key"), raw.get("meta") or {}
        if not isinstance(key, list) or not key or not isinstance(meta, Mapping):
            raise PositionFormatError(f"{where}: malformed position {dict(raw)!r}")
        try:
            return cls(tuple(key), tuple((str(k), str(v)) for k, v in meta.items()))
        except PositionFormatError as exc:
            raise PositionFormatError(f"{where}: {exc}") from None

    def __str__(self) -> str:
        text = str(self.key[0]) if len(self.key) == 1 else "(" + ", ".join(map(str, self.key)) + ")"
        return text + ("{" + ", ".join(f"{k}={v}" for k, v in self.meta) + "}" if self.meta else "")


def as_position(value: Position | int) -> Position:
    """Accept a plain integer where an offset position is meant (tests, admin calls)."""
    if isinstance(value, Position):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"an offset position must be >= 0, got {value}")
        return Position((value,))
    raise TypeError(f"not a position: {value!r}")


def offset_backlog(start: Position, latest: Position) -> int | None:
    """Units between two offset positions; None for composite ones (unknown without reading)."""
    return latest.offset - start.offset if start.is_offset and latest.is_offset else None


def offset_batch_end(start: Position, latest: Position, budget: int | None) -> Position:
    """Where at most ``budget`` units from ``start`` end, for offset positions (``latest`` when there
    is no budget, or for composite positions whose source must decide itself)."""
    if budget is None or not (start.is_offset and latest.is_offset):
        return latest
    return latest.moved_to(min(latest.offset, start.offset + budget))


@dataclass(frozen=True, order=True)
class PartitionKey:
    """What a position belongs to: a source partition (``topic`` empty: a file, a table) or a
    RocketMQ queue ``"<broker>:<queue_id>"`` of ``topic`` (what sinks read)."""

    name: str
    topic: str = ""

    def __str__(self) -> str:
        return f"{self.topic}/{self.name}" if self.topic else self.name

    @classmethod
    def parse(cls, text: str) -> PartitionKey:
        """The inverse of ``str()`` for admin input: ``topic/broker:queue`` or a source partition.

        RocketMQ topic names cannot contain ``/``, so a key whose part after the first ``/`` looks
        like ``<broker>:<queue>`` is a queue; anything else (a file path) is a source partition.
        """
        topic, sep, rest = text.partition("/")
        broker, colon, queue = rest.rpartition(":")
        if sep and topic and colon and broker and "/" not in rest and queue.isdigit():
            return cls(rest, topic)
        return cls(text)
