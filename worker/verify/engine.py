"""`sluice verify`'s engine: prove a source table and its copy hold the same rows.

For each table pair: read both tables' columns (information_schema), resolve the key (given, else
the source's primary key) and the columns compared, then

1. checksum the whole key range, cut into segments, on both databases at once
   (checksums.py: count and hash sum per segment, computed inside each database);
2. segments whose (count, sum) agree are equal; differing ones small enough are fetched and
   compared row by row (missing, extra, differing columns), larger ones are cut again and
   checksummed again (bisection.py), until nothing differs unexplained.

A table without a primary key (and no key given) is compared as a multiset of whole rows: rows are
bucketed by their own hash, differing buckets fetched, and rows present on one side more often than
on the other reported as missing or extra (a changed row shows as one of each), with a warning.

``verify_keys`` re-checks given keys only (after a live pipeline has caught up with the differences a
first run found).

Sizes: the first pass cuts the range so that a segment holds about a quarter of ``fetch_threshold``
rows (up to 100,000 segments for an integer key, 2,048 for others, whose segments are found by a
``CASE`` search), so a differing segment is usually fetched at once; a differing one too large is
cut again into at least ``segments`` parts. Integer keys are cut arithmetically from MIN/MAX (the
statistics' row estimate sizes the cut when keys are sparse); other keys at quantiles of a random
sample of keys drawn from both sides. Each side runs ``PARALLEL`` checksum statements at once.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import partial
from typing import Any, Final, TypeVar

from sluice.connectors.jdbc.urls import Dialect, dialect_of, engine_url
from sluice.worker.verify import bisection
from sluice.worker.verify.bisection import Checksum, Key, Segment
from sluice.worker.verify.canonical import (
    NULL_MARK,
    Column,
    Kind,
    kind_of,
    marked,
    quote,
    table_sql,
    unmark,
    value_sql,
)
from sluice.worker.verify.checksums import Database, SideSql, both, checksums, key_sql, run_all
from sluice.worker.verify.model import (
    ProgressEvent,
    RowDifference,
    RowKey,
    TablePair,
    TableReport,
    VerifyError,
    VerifyReport,
)

Progress = Callable[[ProgressEvent], None]

#: Default segments a differing range is cut into (at least; more when it is large).
SEGMENTS: Final = 64
#: A differing segment with at most this many rows (larger side) is compared row by row.
FETCH_THRESHOLD: Final = 2_000
_MOST_ARITHMETIC: Final = 100_000  # segments of one arithmetic GROUP BY
_MOST_TREE: Final = 2_048  # segments of one CASE search (SQL text grows with them)
_SAMPLE_PER_SEGMENT: Final = 8  # sampled keys per wanted segment (quantile boundaries)
_FETCH_BATCH: Final = 256  # segments (merged ranges) per row fetch
_KEYS_BATCH: Final = 500  # keys per IN list
#: Checksum queries run at once on each side: a database runs one query on one core, so two per side
#: keep both cores busy when one side finishes first (PostgreSQL's own parallel query is turned off
#: in the session, checksums.Database, so the two sides share the cores evenly).
PARALLEL: Final = 2
_ROUNDS: Final = 64  # safety net: past this, everything still differing is fetched


# --- sides -------------------------------------------------------------------------------------


def open_database(role: str, raw: str) -> Database:
    """One side's database from its URL (SQLAlchemy or JDBC); VerifyError naming the side."""
    try:
        url = engine_url(raw)
        dialect = dialect_of(url)
    except ValueError as e:
        raise VerifyError(f"{role} database URL: {e}") from None
    return Database(role, url, dialect)


def _split_name(table: str) -> tuple[str | None, str]:
    """``schema.table`` -> (schema, table); ``table`` -> (None, table) (as canonical.table_sql)."""
    schema, dot, name = table.partition(".")
    return (schema, name) if dot else (None, table)


def _this_schema(db: Database, schema: str | None) -> str:
    """SQL for the schema a table name without one means (MariaDB: the URL's database)."""
    if schema:
        return ":s"
    return "DATABASE()" if db.dialect is Dialect.MYSQL else "current_schema()"


def _columns(db: Database, table: str) -> list[Column]:
    schema, name = _split_name(table)
    sql = (
        "SELECT column_name, data_type, numeric_scale, is_nullable, character_set_name "
        "FROM information_schema.columns "
        f"WHERE table_schema = {_this_schema(db, schema)} AND table_name = :t ORDER BY ordinal_position"
    )
    rows = db.bound(sql, {"s": schema, "t": name}, f"reading the columns of {table}")
    if not rows:
        raise VerifyError(f"{db.role} table {table} does not exist in the {db.role} database {db.where}")
    return [
        Column(
            str(r[0]),
            str(r[1]).lower(),
            scale=None if r[2] is None else int(r[2]),
            nullable=str(r[3]) == "YES",
            charset=None if r[4] is None else str(r[4]),
        )
        for r in rows
    ]


def _primary_key(db: Database, table: str) -> list[str]:
    schema, name = _split_name(table)
    sql = (
        "SELECT kcu.column_name FROM information_schema.table_constraints tc "
        "JOIN information_schema.key_column_usage kcu ON kcu.constraint_name = tc.constraint_name "
        "AND kcu.table_schema = tc.table_schema AND kcu.table_name = tc.table_name "
        f"WHERE tc.constraint_type = 'PRIMARY KEY' AND tc.table_schema = {_this_schema(db, schema)} "
        "AND tc.table_name = :t ORDER BY kcu.ordinal_position"
    )
    return [str(r[0]) for r in db.bound(sql, {"s": schema, "t": name}, f"reading the primary key of {table}")]


def _estimate(db: Database, table: str) -> int:
    """The table's row count as the statistics guess it (no scan); -1 when they don't know."""
    schema, name = _split_name(table)
    if db.dialect is Dialect.MYSQL:
        sql = (
            "SELECT table_rows FROM information_schema.tables "
            f"WHERE table_schema = {_this_schema(db, schema)} AND table_name = :t"
        )
        rows = db.bound(sql, {"s": schema, "t": name}, f"estimating the rows of {table}")
    else:
        sql = "SELECT reltuples FROM pg_class WHERE oid = CAST(:q AS regclass)"
        q = table_sql(Dialect.POSTGRESQL, table)
        rows = db.bound(sql, {"q": q}, f"estimating the rows of {table}")
    value = rows[0][0] if rows else None
    return -1 if value is None or value < 0 else int(value)


# --- resolving a pair ----------------------------------------------------------------------------


@dataclass
class _Table:
    """A pair resolved: both sides' SQL, the columns compared and how keys read back."""

    pair: TablePair
    source: Database
    target: Database
    src: SideSql
    tgt: SideSql
    key_names: list[str]  # source names; empty: compared as multisets
    key_kinds: list[Kind]
    value_names: list[str]  # source names of the compared columns
    marks: list[bool]  # per compared column: its text is NULL-marked (canonical.marked)
    arithmetic: bool  # single integer key on both sides
    report: TableReport
    progress: Progress | None
    started: float = field(default_factory=time.perf_counter)

    def emit(self, stage: str, **counts: int) -> None:
        if self.progress is not None:
            seconds = time.perf_counter() - self.started
            self.progress(ProgressEvent(self.pair.source_table, stage, seconds=seconds, **counts))


_FAMILY: Final = {
    Kind.INTEGER: "number",
    Kind.DECIMAL: "number",
    Kind.FLOAT: "number",
    Kind.DOUBLE: "number",
    Kind.INSTANT: "date/time",
    Kind.DATE: "date/time",
    Kind.TIME: "time of day",
    Kind.BINARY: "binary",
    Kind.TEXT: "text",
    Kind.JSON: "text",
}


Columns = Mapping[str, Column]


def _find(columns: Columns, name: str) -> Column | None:
    """A column by name, exactly or else case-insensitively (PostgreSQL folds, MariaDB ignores case)."""
    if name in columns:
        return columns[name]
    lowered = {c.lower(): col for c, col in columns.items()}
    return lowered.get(name.lower())


def _integer_key(dialect: Dialect, column: Column) -> bool:
    kind = kind_of(dialect, column.data_type)
    if kind is Kind.INTEGER:
        return column.data_type not in ("bit", "boolean", "bool")
    return kind is Kind.DECIMAL and column.scale == 0


def _mapping(
    pair: TablePair,
    source: Database,
    target: Database,
    src_cols: Columns,
    tgt_cols: Columns,
    warnings: list[str],
) -> dict[str, str]:
    """Source column -> target column, for the columns compared (TablePair.columns, or the shared ones)."""
    mapping: dict[str, str] = {}
    if pair.columns:
        for s_name, t_name in pair.columns.items():
            s_col, t_col = _find(src_cols, s_name), _find(tgt_cols, t_name)
            if s_col is None:
                raise VerifyError(
                    f"source table {pair.source_table} in {source.where} has no column {s_name}"
                )
            if t_col is None:
                raise VerifyError(f"target table {pair.target} in {target.where} has no column {t_name}")
            mapping[s_col.name] = t_col.name
    else:
        for s_name in src_cols:
            t_col = _find(tgt_cols, s_name)
            if t_col is not None:
                mapping[s_name] = t_col.name
        absent = [c for c in src_cols if c not in mapping]
        only_target = [c for c in tgt_cols if c not in mapping.values()]
        if absent:
            warnings.append(f"columns not in the target, not compared: {', '.join(absent)}")
        if only_target:
            warnings.append(f"columns only in the target, not compared: {', '.join(only_target)}")
    if not mapping:
        raise VerifyError(
            f"source table {pair.source_table} ({source.where}) and target table {pair.target} "
            f"({target.where}) have no column in common"
        )
    return mapping


def _key_columns(
    pair: TablePair,
    source: Database,
    target: Database,
    src_cols: Columns,
    tgt_cols: Columns,
    mapping: Mapping[str, str],
    warnings: list[str],
) -> list[tuple[Column, Column]]:
    """The key's (source, target) columns: TablePair.key_columns or the source's primary key; empty
    when there is neither. Keys must be of one family (numbers, text, ...) on both sides."""
    keys = list(pair.key_columns) or _primary_key(source, pair.source_table)
    out: list[tuple[Column, Column]] = []
    for k in keys:
        s_col = _find(src_cols, k)
        if s_col is None:
            raise VerifyError(
                f"key column {k} is not in the source table {pair.source_table} ({source.where})"
            )
        t_name = mapping.get(s_col.name, s_col.name)
        t_col = _find(tgt_cols, t_name)
        if t_col is None:
            raise VerifyError(
                f"key column {t_name} is not in the target table {pair.target} ({target.where})"
            )
        s_fam = _FAMILY[kind_of(source.dialect, s_col.data_type)]
        t_fam = _FAMILY[kind_of(target.dialect, t_col.data_type)]
        if s_fam != t_fam:
            raise VerifyError(
                f"key column {s_col.name} is {s_fam} ({s_col.data_type}) in the source table "
                f"{pair.source_table} ({source.where}) but {t_fam} ({t_col.data_type}) in the target "
                f"table {pair.target} ({target.where}): keys can't be matched"
            )
        if s_col.nullable or t_col.nullable:
            warnings.append(f"key column {s_col.name} is nullable: rows with a NULL key are not compared")
        out.append((s_col, t_col))
    if not out:
        warnings.append(
            "no primary key and no key given: compared as multisets of whole rows (a changed row "
            "shows as one missing and one extra row, reported by its values)"
        )
    return out


def _resolve(pair: TablePair, source: Database, target: Database, progress: Progress | None) -> _Table:
    """Both tables' columns read, the columns compared and the key resolved, both sides' SQL built."""
    report = TableReport(pair.source_table, pair.target)
    src_cols = {c.name: c for c in _columns(source, pair.source_table)}
    tgt_cols = {c.name: c for c in _columns(target, pair.target)}
    mapping = _mapping(pair, source, target, src_cols, tgt_cols, report.warnings)
    key_cols = _key_columns(pair, source, target, src_cols, tgt_cols, mapping, report.warnings)
    for s_col, t_col in key_cols:  # keys are compared too: a row's text must carry its key
        mapping.setdefault(s_col.name, t_col.name)
    unknown = [c for c in pair.kinds if c not in mapping]
    if unknown:
        raise VerifyError(
            f"kinds given for columns not compared in {pair.source_table}: {', '.join(unknown)}"
        )

    value_names = list(mapping)
    kinds = [pair.kinds.get(c, kind_of(source.dialect, src_cols[c].data_type)) for c in value_names]
    # A column NOT NULL on both sides can't hold a NULL: its text goes unmarked (less work per row).
    marks = [src_cols[c].nullable or tgt_cols[mapping[c]].nullable for c in value_names]
    src = _side_sql(
        source.dialect,
        pair.source_table,
        [s for s, _ in key_cols],
        [src_cols[c] for c in value_names],
        kinds,
        marks,
    )
    tgt = _side_sql(
        target.dialect,
        pair.target,
        [t for _, t in key_cols],
        [tgt_cols[mapping[c]] for c in value_names],
        kinds,
        marks,
    )
    report.key_columns = [s.name for s, _ in key_cols]
    return _Table(
        pair,
        source,
        target,
        src,
        tgt,
        key_names=[s.name for s, _ in key_cols],
        key_kinds=[kind_of(source.dialect, s.data_type) for s, _ in key_cols],
        value_names=value_names,
        marks=marks,
        arithmetic=len(key_cols) == 1
        and _integer_key(source.dialect, key_cols[0][0])
        and _integer_key(target.dialect, key_cols[0][1]),
        report=report,
        progress=progress,
    )


def _side_sql(
    d: Dialect, table: str, keys: list[Column], values: list[Column], kinds: list[Kind], marks: list[bool]
) -> SideSql:
    texts = [value_sql(d, c, kind) for c, kind in zip(values, kinds, strict=True)]
    in_row = [value_sql(d, c, kind, in_text=True) for c, kind in zip(values, kinds, strict=True)]
    return SideSql(
        dialect=d,
        table=table_sql(d, table),
        keys=tuple(quote(d, c.name) for c in keys),
        key_cmp=tuple(key_sql(d, c.name, c.data_type) for c in keys),
        values=tuple(marked(d, v) if m else v for v, m in zip(texts, marks, strict=True)),
        row_values=tuple(marked(d, v) if m else v for v, m in zip(in_row, marks, strict=True)),
        integer_key=len(keys) == 1 and kind_of(d, keys[0].data_type) is Kind.INTEGER,
    )


# --- row-level compare ---------------------------------------------------------------------------


def normal_key(value: Any) -> Any:
    """A key value as both drivers' values compare in Python: naive UTC datetimes, bytes, text UUIDs,
    booleans as 0/1 (so MariaDB's and PostgreSQL's rows of one key meet)."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bool):
        return int(value)
    return value


def _text(v: Any) -> str:
    if v is None:  # only an unmarked column's, which is NOT NULL: defensive
        return NULL_MARK
    return v.decode("utf-8") if isinstance(v, bytes | bytearray) else str(v)


def _index(t: _Table, rows: Sequence[Sequence[Any]], side: str) -> dict[Key, tuple[str, ...]]:
    n = len(t.key_names)
    out: dict[Key, tuple[str, ...]] = {}
    for r in rows:
        key = tuple(normal_key(v) for v in r[:n])
        if key in out:
            message = f"key {dict(zip(t.key_names, key, strict=True))} is not unique in the {side}"
            if message not in t.report.warnings:
                t.report.warnings.append(message)
        out[key] = tuple(_text(v) for v in r[n:])
    return out


def _compare(t: _Table, source_rows: Sequence[Sequence[Any]], target_rows: Sequence[Sequence[Any]]) -> None:
    """Row-level compare of fetched rows: missing, extra and differing columns into the report."""
    src, tgt = _index(t, source_rows, "source"), _index(t, target_rows, "target")
    for key, values in src.items():
        other = tgt.get(key)
        if other is None:
            t.report.missing.append(dict(zip(t.key_names, key, strict=True)))
        elif other != values:
            columns = [c for c, a, b in zip(t.value_names, values, other, strict=True) if a != b]
            t.report.different.append(RowDifference(dict(zip(t.key_names, key, strict=True)), columns))
    for key in tgt.keys() - src.keys():
        t.report.extra.append(dict(zip(t.key_names, key, strict=True)))


def _sort_report(report: TableReport) -> None:
    def order(key: RowKey) -> tuple[Any, ...]:
        return tuple((v is None, str(type(v)), v if v is not None else 0) for v in key.values())

    for rows in (report.missing, report.extra):
        try:
            rows.sort(key=order)
        except TypeError:
            rows.sort(key=repr)
    try:
        report.different.sort(key=lambda d: order(d.key))
    except TypeError:
        report.different.sort(key=lambda d: repr(d.key))


# --- keyed verification --------------------------------------------------------------------------

T = TypeVar("T")


def _each(t: _Table, call: Callable[[Database, SideSql, str], T]) -> tuple[T, T]:
    """``call(database, its SQL, its table name)`` on both sides at once: (source's, target's)."""
    return both(
        lambda: call(t.source, t.src, t.pair.source_table), lambda: call(t.target, t.tgt, t.pair.target)
    )


def _rows_each(
    t: _Table, sql: Callable[[SideSql], str], what: str
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The rows of ``sql(side)`` on both sides at once; ``what`` (+ the table) names it in errors."""
    return _each(t, lambda db, side, name: db.rows(sql(side), f"{what} {name}"))


def _fetch(t: _Table, segments: Sequence[Segment]) -> int:
    """Compare the rows of ``segments`` row by row; the number of source rows fetched."""
    fetched = 0
    for batch in bisection.batches(bisection.merged(sorted(segments, key=_order)), _FETCH_BATCH):
        s_rows, t_rows = _rows_each(t, partial(SideSql.fetch_rows, segments=batch), "fetching rows of")
        _compare(t, s_rows, t_rows)
        fetched += len(s_rows)
    return fetched


def _order(seg: Segment) -> tuple[bool, Key]:
    return (seg.lo is not None, seg.lo or ())


def _checksums(db: Database, statements: Sequence[str], name: str) -> dict[int, Checksum]:
    out: dict[int, Checksum] = {}
    for sql in statements:
        out.update(checksums(db.rows(sql, f"checksumming {name}", aggregate=True)))
    return out


def _sums(
    t: _Table, queries: Callable[[SideSql], list[list[str]]]
) -> tuple[dict[int, Checksum], dict[int, Checksum]]:
    """Run each side's checksum ``queries``, merged per side: each inner list is one worker's
    statements, in order; all workers of both sides at once."""
    calls: list[Callable[[], dict[int, Checksum]]] = []
    counts = []
    for db, side, name in ((t.source, t.src, t.pair.source_table), (t.target, t.tgt, t.pair.target)):
        workers = queries(side)
        counts.append(len(workers))
        calls.extend(partial(_checksums, db, sqls, name) for sqls in workers)
    results = run_all(calls)
    src: dict[int, Checksum] = {}
    tgt: dict[int, Checksum] = {}
    for i, r in enumerate(results):
        (src if i < counts[0] else tgt).update(r)
    return src, tgt


def _segment_sums(t: _Table, segments: Sequence[Segment]) -> tuple[dict[int, Checksum], dict[int, Checksum]]:
    """Checksums of ``segments`` (sorted), numbered by index, ``PARALLEL`` queries per side."""
    parts = bisection.chunks(len(segments), PARALLEL)
    return _sums(t, lambda side: [side.segment_checksums(segments[a:b], a) for a, b in parts])


def _sample(t: _Table, parts: Sequence[tuple[Segment, float]]) -> list[Key]:
    """Keys sampled from both sides (a range may hold rows on one side only)."""
    s_rows, t_rows = _each(
        t, lambda db, sql, name: db.rows(sql.sample_keys(parts), f"sampling keys of {name}")
    )
    keys = {tuple(normal_key(v) for v in r) for r in (*s_rows, *t_rows)}
    return [k for k in keys if None not in k]


def _rows_estimate(t: _Table, *, exact: bool) -> int:
    """The larger side's row count: the statistics' guess, counted when they have none and ``exact``."""
    counts = _each(t, lambda db, sql, name: _estimate(db, name))
    if min(counts) < 0 and exact:
        counts = _each(t, lambda db, sql, name: int(db.rows(sql.count(), f"counting {name}")[0][0]))
    return max(counts)


Sums = tuple[list[Segment], dict[int, Checksum], dict[int, Checksum]]


def _first_pass(t: _Table, segments: int, threshold: int) -> Sums:
    """The whole key range, cut into segments, checksummed: ``PARALLEL`` queries per side."""
    if t.arithmetic:
        bounds = _each(
            t, lambda db, sql, name: db.rows(sql.key_bounds(), f"reading the key range of {name}")[0]
        )
        lows = [int(b[0]) for b in bounds if b[0] is not None]
        highs = [int(b[1]) for b in bounds if b[1] is not None]
        if not lows:
            return [], {}, {}
        lo, hi = min(lows), max(highs) + 1
        estimate = _rows_estimate(t, exact=False)  # the key span bounds it: no need to count
        rows = min(hi - lo, estimate) if estimate > 0 else hi - lo
        n = bisection.segment_count(rows, segments=segments, fetch_threshold=threshold, most=_MOST_ARITHMETIC)
        segs = bisection.integer_segments(lo, hi, n)
        w = bisection.width(lo, hi, n)
        ranges = [(lo + a * w, min(hi, lo + b * w)) for a, b in bisection.chunks(len(segs), PARALLEL)]
        src, tgt = _sums(t, lambda side: [side.arithmetic_checksums(lo, w, a, b) for a, b in ranges])
        return segs, src, tgt
    rows = _rows_estimate(t, exact=True)
    if rows <= 0:
        return [], {}, {}
    n = bisection.segment_count(rows, segments=segments, fetch_threshold=threshold, most=_MOST_TREE)
    sample = _sample(t, [(Segment(None, None), _SAMPLE_PER_SEGMENT * n / rows)])
    segs = bisection.sampled_segments(None, None, sample, n)
    src, tgt = _segment_sums(t, segs)
    return segs, src, tgt


def _split(t: _Table, parents: Sequence[tuple[Segment, int]], segments: int, threshold: int) -> list[Segment]:
    """Each differing segment (with its larger side's rows) cut into smaller ones."""
    counts = [
        bisection.segment_count(rows, segments=segments, fetch_threshold=threshold, most=_MOST_TREE)
        for _, rows in parents
    ]
    if t.arithmetic:
        children = [
            c for (p, _), n in zip(parents, counts, strict=True) for c in bisection.split_integer(p, n)
        ]
    else:
        sample = _sample(
            t,
            [
                (p, _SAMPLE_PER_SEGMENT * n / max(1, rows))
                for (p, rows), n in zip(parents, counts, strict=True)
            ],
        )
        children = [
            c
            for (p, _), n in zip(parents, counts, strict=True)
            for c in bisection.sampled_segments(p.lo, p.hi, sample, n)
        ]
    return sorted(children, key=_order)


def _keyed(t: _Table, segments: int, threshold: int) -> None:
    segs, src, tgt = _first_pass(t, segments, threshold)
    t.report.rows_compared = sum(c.count for c in src.values())
    round_ = 1
    while segs:
        t.report.segments_checksummed += len(segs)
        p = bisection.plan(segs, src, tgt, threshold)
        if round_ >= _ROUNDS:
            p.fetch, p.split = sorted(p.fetch + p.split), []
        t.emit("checksum", round=round_, segments=len(segs), differing=len(p.fetch) + len(p.split))
        if p.fetch:
            rows = _fetch(t, [segs[i] for i in p.fetch])
            t.emit("fetch", round=round_, segments=len(p.fetch), rows=rows)
        if not p.split:
            break
        parents = [
            (segs[i], max(src.get(i, bisection.EMPTY).count, tgt.get(i, bisection.EMPTY).count))
            for i in p.split
        ]
        children = _split(t, parents, segments, threshold)
        unsplittable = [c for c in children if not c.splittable]
        if unsplittable:  # no key to cut at: fetch now, checksum the rest
            rows = _fetch(t, unsplittable)
            t.emit("fetch", round=round_, segments=len(unsplittable), rows=rows)
        segs = [c for c in children if c.splittable]
        src, tgt = _segment_sums(t, segs) if segs else ({}, {})
        round_ += 1


# --- multiset verification (no key) --------------------------------------------------------------


def _multiset(t: _Table, segments: int, threshold: int) -> None:
    n = bisection.segment_count(
        _rows_estimate(t, exact=True), segments=segments, fetch_threshold=threshold, most=_MOST_ARITHMETIC
    )
    src, tgt = _sums(t, lambda side: [[side.bucket_checksums(n)]])
    t.report.rows_compared = sum(c.count for c in src.values())
    t.report.segments_checksummed = n
    differing = sorted(b for b in src.keys() | tgt.keys() if src.get(b) != tgt.get(b))
    t.emit("checksum", round=1, segments=n, differing=len(differing))
    fetched = 0
    for i in range(0, len(differing), _KEYS_BATCH):
        wanted = differing[i : i + _KEYS_BATCH]
        s_rows, t_rows = _rows_each(
            t, partial(SideSql.fetch_buckets, buckets=n, wanted=wanted), "fetching rows of"
        )
        fetched += len(s_rows)
        s_count = Counter(tuple(_text(v) for v in r) for r in s_rows)
        t_count = Counter(tuple(_text(v) for v in r) for r in t_rows)
        for row, times in (s_count - t_count).items():
            t.report.missing.extend([_row_dict(t, row)] * times)
        for row, times in (t_count - s_count).items():
            t.report.extra.extend([_row_dict(t, row)] * times)
    if differing:
        t.emit("fetch", round=1, segments=len(differing), rows=fetched)


def _row_dict(t: _Table, row: tuple[str, ...]) -> RowKey:
    return {c: unmark(v) if m else v for c, v, m in zip(t.value_names, row, t.marks, strict=True)}


# --- the API -------------------------------------------------------------------------------------


def verify(
    source_url: str,
    target_url: str,
    pairs: Sequence[TablePair],
    *,
    progress: Progress | None = None,
    segments: int = SEGMENTS,
    fetch_threshold: int = FETCH_THRESHOLD,
) -> VerifyReport:
    """Compare each pair's source table (in ``source_url``'s database) with its target table (in
    ``target_url``'s). URLs: SQLAlchemy or JDBC, MariaDB/MySQL or PostgreSQL, credentials in them.
    ``segments``: at least how many parts a range is cut into; ``fetch_threshold``: rows (larger
    side) under which a differing segment is compared row by row. Raises VerifyError."""
    if segments < 2 or fetch_threshold < 1:
        raise ValueError("segments must be >= 2 and fetch_threshold >= 1")
    source, target = open_database("source", source_url), open_database("target", target_url)
    try:
        report = VerifyReport()
        for pair in pairs:
            t = _resolve(pair, source, target, progress)
            t.emit("start")
            if t.key_names:
                _keyed(t, segments, fetch_threshold)
            else:
                _multiset(t, segments, fetch_threshold)
            _finish(t)
            report.tables.append(t.report)
        return report
    finally:
        source.close()
        target.close()


def verify_keys(
    source_url: str,
    target_url: str,
    pair: TablePair,
    keys: Sequence[Mapping[str, Any]],
    *,
    progress: Progress | None = None,
) -> TableReport:
    """Re-check only the rows with these ``keys`` (dicts source key column -> value, as a report's
    ``missing``/``extra``/``different`` keys, or their JSON form): the table report for them alone."""
    source, target = open_database("source", source_url), open_database("target", target_url)
    try:
        t = _resolve(pair, source, target, progress)
        if not t.key_names:
            raise VerifyError(
                f"source table {pair.source_table} ({source.where}) has no primary key and no key was "
                "given: rows can't be re-checked by key"
            )
        t.emit("start")
        wanted = list(dict.fromkeys(_coerce_key(t, k) for k in keys))
        t.report.rows_compared = len(wanted)
        wanted_set = set(wanted)
        fetched = 0
        for i in range(0, len(wanted), _KEYS_BATCH):
            batch = wanted[i : i + _KEYS_BATCH]
            s_rows, t_rows = _rows_each(t, partial(SideSql.fetch_keys, keys=batch), "fetching rows of")
            n = len(t.key_names)
            s_rows = [r for r in s_rows if tuple(normal_key(v) for v in r[:n]) in wanted_set]
            t_rows = [r for r in t_rows if tuple(normal_key(v) for v in r[:n]) in wanted_set]
            _compare(t, s_rows, t_rows)
            fetched += len(s_rows)
        t.emit("fetch", round=1, segments=0, rows=fetched)
        _finish(t)
        return t.report
    finally:
        source.close()
        target.close()


def _finish(t: _Table) -> None:
    _sort_report(t.report)
    t.report.seconds = time.perf_counter() - t.started
    t.emit("done", rows=t.report.rows_compared)


def _coerce_key(t: _Table, key: Mapping[str, Any]) -> Key:
    """A key as given (native values or their JSON form) as the values the drivers return."""
    lowered = {k.lower(): v for k, v in key.items()}
    out = []
    for name, kind in zip(t.key_names, t.key_kinds, strict=True):
        if name not in key and name.lower() not in lowered:
            raise VerifyError(
                f"key {dict(key)} has no value for the key column {name} of {t.pair.source_table}"
            )
        v = key[name] if name in key else lowered[name.lower()]
        out.append(normal_key(_from_json(v, kind)))
    return tuple(out)


def _from_json(v: Any, kind: Kind) -> Any:
    if not isinstance(v, str):
        return v
    try:
        if kind is Kind.INTEGER:
            return int(v)
        if kind is Kind.DECIMAL:
            d = Decimal(v)
            return int(d) if d == d.to_integral_value() else d
        if kind is Kind.BINARY:
            return bytes.fromhex(v)
        if kind is Kind.INSTANT:
            return normal_key(dt.datetime.fromisoformat(v))
        if kind is Kind.DATE:
            return dt.date.fromisoformat(v)
    except ValueError:
        return v
    return v
