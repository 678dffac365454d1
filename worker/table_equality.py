"""Proof that a source table and its copy hold the same rows, by content, across databases.

Two databases never return the same Python values for the same data: MariaDB's DECIMAL(10,2)
``10.50`` may come back from PostgreSQL's NUMERIC as ``10.5``, a TIMESTAMP may be naive in one and
zone-aware in the other, a BOOLEAN may be ``1`` or ``True``. Each value is therefore normalised to
one canonical text before comparing (``canonical``): numbers by their exact decimal value, instants
in UTC with microseconds, bytes as hex. Nothing is rounded: a decimal that lost a digit or a
timestamp that moved by a microsecond is a difference.

Rows are streamed from both sides ordered by the key and merged, so memory stays flat for any
table size; the result counts missing, extra and differing rows, keeps the first few examples, and
carries a SHA-256 digest of each side's canonical rows (equal digests are the one-line proof).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import inspect
from sqlalchemy.engine import Engine

_FETCH = 10_000
_EXAMPLES = 5


def canonical(value: Any) -> str | None:
    """One text per value, equal for equal data whichever database or driver produced it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        text = format(value.normalize(), "f")
        return "0" if text in ("-0", "0") else text
    if isinstance(value, float):
        return format(Decimal(repr(value)).normalize(), "f")
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value.isoformat(sep=" ", timespec="microseconds")
    if isinstance(value, date | time | timedelta):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return str(value)


@dataclass
class TableComparison:
    """The verdict for one table; ``equal`` only when both sides have exactly the same rows."""

    table: str
    columns: list[str]
    source_rows: int = 0
    target_rows: int = 0
    missing: int = 0  # in the source, not in the target
    extra: int = 0  # in the target, not in the source
    differing: int = 0  # same key, different content
    problem: str = ""  # the comparison could not be made (e.g. a column missing in the target)
    examples: list[str] = field(default_factory=list)
    source_digest: str = ""
    target_digest: str = ""

    @property
    def equal(self) -> bool:
        return not self.problem and self.missing == self.extra == self.differing == 0

    def summary(self) -> str:
        if self.problem:
            return f"{self.table}: NOT COMPARABLE — {self.problem}"
        if self.equal:
            return (
                f"{self.table}: EQUAL — {self.source_rows:,} rows × {len(self.columns)} columns, "
                f"sha256 {self.source_digest[:16]}… on both sides"
            )
        return (
            f"{self.table}: DIFFERENT — source {self.source_rows:,} rows, target {self.target_rows:,}; "
            f"{self.missing:,} missing, {self.extra:,} extra, {self.differing:,} differing"
        )


def _rows(engine: Engine, table: str, columns: Sequence[str], key: str) -> Iterator[tuple[str | None, ...]]:
    """Canonical rows ordered by ``key`` (numeric keys: both databases order them the same way)."""
    quote = engine.dialect.identifier_preparer.quote
    sql = f"SELECT {', '.join(quote(c) for c in columns)} FROM {quote(table)} ORDER BY {quote(key)}"
    with engine.connect().execution_options(stream_results=True, max_row_buffer=_FETCH) as conn:
        result = conn.exec_driver_sql(sql)
        for part in result.partitions(_FETCH):
            for row in part:
                yield tuple(canonical(v) for v in row)


def _key_order(row: tuple[str | None, ...], index: int) -> tuple[int, Decimal]:
    value = row[index]
    return (0, Decimal(0)) if value is None else (1, Decimal(value))


def compare_table(source: Engine, target: Engine, table: str, key: str = "id") -> TableComparison:
    """Compare ``table`` in ``source`` and ``target`` row by row on the source's columns."""
    src_cols = [c["name"] for c in inspect(source).get_columns(table)]
    result = TableComparison(table, src_cols)
    if not inspect(target).has_table(table):
        result.problem = "the table does not exist in the target"
        return result
    tgt_cols = {c["name"] for c in inspect(target).get_columns(table)}
    absent = [c for c in src_cols if c not in tgt_cols]
    if absent:
        result.problem = f"columns missing in the target: {', '.join(absent)}"
        return result
    k = src_cols.index(key)
    src_hash, tgt_hash = hashlib.sha256(), hashlib.sha256()
    src_it, tgt_it = _rows(source, table, src_cols, key), _rows(target, table, src_cols, key)
    s, t = next(src_it, None), next(tgt_it, None)

    def example(text: str) -> None:
        if len(result.examples) < _EXAMPLES:
            result.examples.append(text)

    while s is not None or t is not None:
        take_source = t is None or (s is not None and _key_order(s, k) <= _key_order(t, k))
        take_target = s is None or (t is not None and _key_order(t, k) <= _key_order(s, k))
        if take_source and take_target:
            assert s is not None and t is not None
            if s != t:
                result.differing += 1
                diffs = [f"{c}: {a!r} != {b!r}" for c, a, b in zip(src_cols, s, t, strict=True) if a != b]
                example(f"{table} {key}={s[k]}: " + "; ".join(diffs))
        elif take_source:
            assert s is not None
            result.missing += 1
            example(f"{table} {key}={s[k]}: missing in the target")
        else:
            assert t is not None
            result.extra += 1
            example(f"{table} {key}={t[k]}: in the target only")
        if take_source:
            assert s is not None
            src_hash.update(repr(s).encode())
            result.source_rows += 1
            s = next(src_it, None)
        if take_target:
            assert t is not None
            tgt_hash.update(repr(t).encode())
            result.target_rows += 1
            t = next(tgt_it, None)
    result.source_digest, result.target_digest = src_hash.hexdigest(), tgt_hash.hexdigest()
    return result


def compare_tables(
    source: Engine, target: Engine, tables: Sequence[str], key: str = "id"
) -> list[TableComparison]:
    return [compare_table(source, target, t, key) for t in tables]
