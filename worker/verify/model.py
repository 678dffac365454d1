"""What `sluice verify` is asked (``TablePair``) and what it answers (``VerifyReport``).

Keys in reports are dicts column -> value, with the source's column names, holding the values the
drivers returned (ints, Decimals, strings, bytes, datetimes: usable as they are to re-check keys
with ``engine.verify_keys``); ``to_json`` makes them JSON-safe (decimals, dates and times as text,
bytes as lower-case hex). A table compared without a key (no primary key) reports whole rows in
``missing``/``extra`` instead: column -> canonical text (canonical.py), NULL as None.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from sluice.worker.verify.canonical import Kind

RowKey = dict[str, Any]


class VerifyError(Exception):
    """The comparison could not be made. The message names the side (source/target), the database
    as ``host:port/database`` (never a password) and, where it applies, the table and column."""


@dataclass(frozen=True)
class TablePair:
    """One table and its copy.

    ``columns`` maps each compared source column to its target column's name; a column not in it is
    not compared. Left empty: every column the two tables share (by name, case-insensitively), and
    the others are named in the report's warnings. ``key_columns`` (source names) identify rows;
    left empty: the source's primary key, or, without one, whole rows compared as multisets.
    ``kinds`` overrides the kind (canonical.Kind) a source column compares as.
    """

    source_table: str
    target_table: str | None = None  # None: the source table's name
    key_columns: tuple[str, ...] = ()
    columns: Mapping[str, str] = field(default_factory=dict)
    kinds: Mapping[str, Kind] = field(default_factory=dict)

    @property
    def target(self) -> str:
        return self.target_table or self.source_table


@dataclass(frozen=True)
class RowDifference:
    """A row present on both sides whose values differ: its key and the (source) columns that differ."""

    key: RowKey
    columns: list[str]


@dataclass
class TableReport:
    """The verdict for one table pair."""

    source_table: str
    target_table: str
    key_columns: list[str] = field(default_factory=list)  # empty: compared as multisets of rows
    rows_compared: int = 0  # the source's rows
    missing: list[RowKey] = field(default_factory=list)  # in the source, not in the target
    extra: list[RowKey] = field(default_factory=list)  # in the target, not in the source
    different: list[RowDifference] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    segments_checksummed: int = 0
    seconds: float = 0.0

    @property
    def equal(self) -> bool:
        return not (self.missing or self.extra or self.different)

    def to_json(self) -> dict[str, Any]:
        return {
            "source_table": self.source_table,
            "target_table": self.target_table,
            "key_columns": list(self.key_columns),
            "equal": self.equal,
            "rows_compared": self.rows_compared,
            "missing": [json_key(k) for k in self.missing],
            "extra": [json_key(k) for k in self.extra],
            "different": [{"key": json_key(d.key), "columns": list(d.columns)} for d in self.different],
            "warnings": list(self.warnings),
            "segments_checksummed": self.segments_checksummed,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class VerifyReport:
    """Every table pair's verdict, in the order asked."""

    tables: list[TableReport] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return all(t.equal for t in self.tables)

    def to_json(self) -> dict[str, Any]:
        return {"equal": self.equal, "tables": [t.to_json() for t in self.tables]}


@dataclass(frozen=True)
class ProgressEvent:
    """One step of one table's verification, for a caller's progress display.

    ``stage``: ``start`` (columns and key resolved), ``checksum`` (a round of segments checksummed
    on both sides: ``segments`` of them, ``differing`` differ), ``fetch`` (``rows`` rows of differing
    segments compared row by row), ``done`` (``rows``: the source's rows compared).
    """

    table: str
    stage: str
    round: int = 0
    segments: int = 0
    differing: int = 0
    rows: int = 0
    seconds: float = 0.0


def json_value(value: Any) -> Any:
    """``value`` as JSON can carry it: decimals, dates and times as ISO text, bytes as hex."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, Decimal):
        return format(value, "f") if value.is_finite() else str(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="microseconds")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(value)


def json_key(key: RowKey) -> dict[str, Any]:
    return {column: json_value(v) for column, v in key.items()}
