"""The queries of a verification, and running them on both databases at once.

A segment's checksum is its row count and the sum of a 60-bit integer taken from each row's MD5 of
its canonical text (canonical.py), computed inside the database: only one (count, sum) per segment
crosses the network. The 60 bits are the last 15 hex digits of the MD5, read the same way by both:

- MariaDB: ``CAST(CONV(SUBSTRING(MD5(s), 18, 15), 16, 10) AS UNSIGNED)``, summed exactly as DECIMAL;
- PostgreSQL: ``('x' || substr(md5(s), 18, 15))::bit(60)::bigint``, summed as numeric.

Sixty bits keep every term a positive BIGINT on both sides; the sums are exact (DECIMAL, numeric),
so they never overflow, and order-independent, so each side scans in whatever order suits it.
Many segments are counted in one statement: PostgreSQL groups by the segment number computed from
the key (``(key - lo) / width`` for integer keys, a binary-search ``CASE`` over the segments' lower
bounds otherwise) in a hash aggregate; MariaDB, whose GROUP BY updates a temporary table row by
row, gets a ``UNION ALL`` of one aggregate per key range when its key can be read by range (a
single key compared as it is), the GROUP BY otherwise. A few such statements run at once per side
(``run_all``), and both sides at once: the two databases' cores all work.

String keys are compared in *binary* order on both sides (MariaDB ``CAST(CONVERT(k USING utf8mb4)
AS BINARY)``, PostgreSQL ``k COLLATE "C"``: UTF-8 byte order, i.e. code point order, Python's
``str`` order too), so a range selects the same rows whatever each column's collation says (a
case-insensitive MariaDB collation would otherwise put 'a' and 'A' in one place). Such comparisons
cannot use the key's index: a round over string keys is one full scan per side.

Literals are rendered into the SQL (never bound), so the statements are sent to the drivers as they
are: strings as hex in MariaDB (no escaping to get wrong), quote-doubled in PostgreSQL sessions with
``standard_conforming_strings`` on.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property
from typing import Any, Final, TypeVar

from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, Connection
from sqlalchemy.exc import DBAPIError

from sluice.connectors.jdbc.urls import Dialect
from sluice.worker.verify.bisection import Checksum, Key, Segment, merged
from sluice.worker.verify.canonical import is_text_type, quote, row_sql
from sluice.worker.verify.model import VerifyError

A = TypeVar("A")
B = TypeVar("B")

#: Sent as they are: no parameters, so no driver reads '%' or ':' in the SQL as placeholders.
_RAW: Final = {"no_parameters": True}
#: PostgreSQL session settings: UTC and standard strings for the canonical texts and literals;
#: memory for the GROUP BY's hash table; no parallel workers, since the engine runs its own queries
#: side by side (engine.PARALLEL) and shares the cores with MariaDB; no JIT (compiling the checksum
#: expression costs more than it saves: its time is in md5() and the text functions).
_PG_SESSION: Final = (
    "TimeZone=UTC",
    "standard_conforming_strings=on",
    "work_mem=64MB",
    "max_parallel_workers_per_gather=0",
    "jit=off",
)
#: Before a checksum query (PostgreSQL, for its transaction only): hash aggregation. The planner
#: can't tell a segment number has few values, guesses one group per row and would sort the whole
#: table on disk; session-wide, the setting would make catalog queries slow (``SET LOCAL``).
_PG_HASH_AGGREGATE: Final = "SET LOCAL enable_sort = off"
#: Most segments checksummed by one UNION ALL of per-range aggregates (MariaDB; SideSql._per_range):
#: the statement repeats the hash expression once per segment; more make more statements.
_UNION_MOST: Final = 1_024
_DEFAULT_PORTS: Final = {Dialect.MYSQL: 3306, Dialect.POSTGRESQL: 5432}


def hash_sql(dialect: Dialect, row: str) -> str:
    """The 60-bit integer of a row's canonical text ``row`` (identical in both databases)."""
    if dialect is Dialect.MYSQL:
        return f"CAST(CONV(SUBSTRING(MD5({row}), 18, 15), 16, 10) AS UNSIGNED)"
    return f"('x' || substr(md5({row}), 18, 15))::bit(60)::bigint"


def key_sql(dialect: Dialect, column: str, data_type: str) -> str:
    """The expression a key column is compared and ordered by: binary order for strings."""
    c = quote(dialect, column)
    if not is_text_type(dialect, data_type):
        return c
    if dialect is Dialect.MYSQL:
        return f"CAST(CONVERT({c} USING utf8mb4) AS BINARY)"
    return f'({c} COLLATE "C")'


def literal(dialect: Dialect, value: Any, *, binary: bool = True) -> str:
    """``value`` as an SQL literal. Strings: compared in binary order (``binary``, see ``key_sql``)
    or, for equality on a MariaDB column's own collation, as a utf8mb4 literal."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return ("1" if value else "0") if dialect is Dialect.MYSQL else ("TRUE" if value else "FALSE")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return format(value, "f") if value.is_finite() else f"'{value}'"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"'{value}'"
    if isinstance(value, dt.datetime):
        return f"'{value.replace(tzinfo=None).isoformat(sep=' ', timespec='microseconds')}'"
    if isinstance(value, dt.date | dt.time):
        return f"'{value.isoformat()}'"
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value).hex()
        return f"X'{raw}'" if dialect is Dialect.MYSQL else f"decode('{raw}', 'hex')"
    s = str(value)
    if dialect is Dialect.MYSQL:
        raw = s.encode("utf-8").hex()
        return f"X'{raw}'" if binary else f"_utf8mb4 X'{raw}'"
    return "'" + s.replace("'", "''") + "'"


@dataclass(frozen=True)
class SideSql:
    """What one side's statements are built from (one table, as seen by one database)."""

    dialect: Dialect
    table: str  # quoted, qualified
    keys: tuple[str, ...]  # quoted key columns, selected as they are
    key_cmp: tuple[str, ...]  # what keys are compared and ordered by (key_sql)
    values: tuple[str, ...]  # marked canonical text of each compared column (canonical.marked)
    #: the same inside the row's text (canonical.value_sql's ``in_text``); default: ``values``
    row_values: tuple[str, ...] = ()
    #: single integer key whose arithmetic fits a BIGINT on this side (PostgreSQL: `/`, not div())
    integer_key: bool = False

    @cached_property
    def hash(self) -> str:
        return hash_sql(self.dialect, row_sql(self.dialect, list(self.row_values or self.values)))

    def _lit(self, key: Key, binary: bool = True) -> str:
        parts = [literal(self.dialect, v, binary=binary) for v in key]
        return parts[0] if len(parts) == 1 else f"({', '.join(parts)})"

    def _key(self) -> str:
        return self.key_cmp[0] if len(self.key_cmp) == 1 else f"({', '.join(self.key_cmp)})"

    def range_sql(self, seg: Segment) -> str:
        """The condition selecting ``seg``'s keys."""
        parts = []
        if seg.lo is not None:
            parts.append(f"{self._key()} >= {self._lit(seg.lo)}")
        if seg.hi is not None:
            parts.append(f"{self._key()} < {self._lit(seg.hi)}")
        return " AND ".join(parts) if parts else "1 = 1"

    def where_sql(self, segments: Sequence[Segment]) -> str:
        """The condition selecting the keys of any of ``segments`` (sorted, disjoint)."""
        ranges = merged(segments)
        if not ranges:
            return "1 = 0"
        if len(ranges) == 1:
            return self.range_sql(ranges[0])
        return " OR ".join(f"({self.range_sql(r)})" for r in ranges)

    def _tree(self, segments: Sequence[Segment], lo: int, hi: int) -> str:
        """The index in ``[lo, hi]`` of the segment holding the row's key (a binary search)."""
        if lo == hi:
            return str(lo)
        mid = (lo + hi + 1) // 2
        start = segments[mid].lo
        assert start is not None
        return (
            f"CASE WHEN {self._key()} < {self._lit(start)} THEN {self._tree(segments, lo, mid - 1)} "
            f"ELSE {self._tree(segments, mid, hi)} END"
        )

    # --- checksums: rows of (segment index, count, sum) ---------------------------------------

    def arithmetic_checksums(self, origin: int, width: int, lo: int, hi: int) -> list[str]:
        """Statements (run one after the other) checksumming the keys ``[lo, hi)`` in segments of
        ``width`` keys counted from ``origin`` (integer key; segment ``i`` is ``[origin + i*width,
        origin + (i+1)*width)``, as bisection.integer_segments numbers them)."""
        k = self.keys[0]
        first, last = (lo - origin) // width, (hi - 1 - origin) // width
        if self._per_range:
            ranges = [
                (i, f"{k} >= {max(lo, origin + i * width)} AND {k} < {min(hi, origin + (i + 1) * width)}")
                for i in range(first, last + 1)
            ]
            return [self._union(ranges[i : i + _UNION_MOST]) for i in range(0, len(ranges), _UNION_MOST)]
        if self.dialect is Dialect.MYSQL:
            seg = f"({k} - ({origin})) DIV {width}"
        elif self.integer_key:
            seg = f"({k} - ({origin})) / {width}"
        else:
            seg = f"div({k}::numeric - ({origin}), {width})"
        return [
            f"SELECT {seg}, COUNT(*), SUM({self.hash}) FROM {self.table} "
            f"WHERE {k} >= {lo} AND {k} < {hi} GROUP BY 1"
        ]

    def segment_checksums(self, segments: Sequence[Segment], offset: int = 0) -> list[str]:
        """Statements (run one after the other) checksumming ``segments`` (sorted, disjoint; any
        key), numbered by their index + ``offset``."""
        if self._per_range:
            ranges = [(offset + i, self.range_sql(seg)) for i, seg in enumerate(segments)]
            return [self._union(ranges[i : i + _UNION_MOST]) for i in range(0, len(ranges), _UNION_MOST)]
        tree = self._tree(segments, 0, len(segments) - 1)
        if offset:
            tree = f"{offset} + {tree}"
        return [
            f"SELECT {tree}, COUNT(*), SUM({self.hash}) FROM {self.table} "
            f"WHERE {self.where_sql(segments)} GROUP BY 1"
        ]

    @property
    def _per_range(self) -> bool:
        """MariaDB with one key compared as it is (read from its index by range): one aggregate per
        segment, ``UNION ALL``-ed (at most ``_UNION_MOST`` a statement). MariaDB's GROUP BY updates a
        temporary table row by row, a third of the checksum's time; PostgreSQL's hash aggregation
        is cheap, and a statement per few segments would scan its table each time: it keeps one
        GROUP BY."""
        return self.dialect is Dialect.MYSQL and len(self.keys) == 1 and self.key_cmp == self.keys

    def _union(self, parts: Iterable[tuple[int, str]]) -> str:
        """One aggregate per (segment number, condition), all in one statement."""
        return " UNION ALL ".join(
            f"SELECT {i}, COUNT(*), SUM({self.hash}) FROM {self.table} WHERE {cond}" for i, cond in parts
        )

    def bucket_checksums(self, buckets: int) -> str:
        """Checksums of the rows grouped by their own hash modulo ``buckets`` (a table without a key:
        equal rows fall in the same bucket on both sides)."""
        return (
            f"SELECT h % {buckets}, COUNT(*), SUM(h) FROM (SELECT {self.hash} AS h FROM {self.table}) AS d "
            "GROUP BY 1"
        )

    # --- rows --------------------------------------------------------------------------------

    def fetch_rows(self, segments: Sequence[Segment]) -> str:
        """Keys and marked canonical column texts of the rows in ``segments``, ordered by key."""
        return (
            f"SELECT {', '.join(self.keys + self.values)} FROM {self.table} "
            f"WHERE {self.where_sql(segments)} ORDER BY {self._order_by()}"
        )

    def _order_by(self) -> str:
        # A bare key name could also name a value's output column (PostgreSQL: "ambiguous"): keys
        # compared as they are sort by position; binary-order expressions always read the table.
        return ", ".join(
            str(i + 1) if cmp == key else cmp
            for i, (key, cmp) in enumerate(zip(self.keys, self.key_cmp, strict=True))
        )

    def fetch_keys(self, keys: Sequence[Key]) -> str:
        """Keys and marked canonical column texts of the rows with these ``keys`` (equality on the
        columns' own collations, so the index is used: the caller drops rows that only match in a
        case-insensitive collation)."""
        k = self.keys[0] if len(self.keys) == 1 else f"({', '.join(self.keys)})"
        wanted = ", ".join(self._lit(key, binary=False) for key in keys)
        return f"SELECT {', '.join(self.keys + self.values)} FROM {self.table} WHERE {k} IN ({wanted})"

    def fetch_buckets(self, buckets: int, wanted: Sequence[int]) -> str:
        """Marked canonical column texts of the rows in hash buckets ``wanted`` (see bucket_checksums)."""
        return (
            f"SELECT {', '.join(self.values)} FROM {self.table} "
            f"WHERE ({self.hash}) % {buckets} IN ({', '.join(str(b) for b in wanted)})"
        )

    def sample_keys(self, parts: Sequence[tuple[Segment, float]]) -> str:
        """About ``fraction`` of the keys of each segment, at random (quantile boundaries)."""
        rand = "RAND()" if self.dialect is Dialect.MYSQL else "random()"
        conds = [
            f"({self.range_sql(seg)} AND {rand} < {min(1.0, fraction):.9f})"
            if fraction < 1
            else f"({self.range_sql(seg)})"
            for seg, fraction in parts
        ]
        return f"SELECT {', '.join(self.keys)} FROM {self.table} WHERE {' OR '.join(conds)}"

    def key_bounds(self) -> str:
        return f"SELECT MIN({self.keys[0]}), MAX({self.keys[0]}) FROM {self.table}"

    def count(self) -> str:
        return f"SELECT COUNT(*) FROM {self.table}"


def checksums(rows: Sequence[Sequence[Any]]) -> dict[int, Checksum]:
    """(segment, count, sum) rows as a map segment -> Checksum."""
    return {int(r[0]): Checksum(int(r[1]), int(r[2] or 0)) for r in rows}


class Database:
    """One side's database: its engine, with the session settings the canonical texts need (UTC,
    utf8mb4, standard strings), and errors that name the side and where it is, never a password."""

    def __init__(self, role: str, url: URL, dialect: Dialect) -> None:
        self.role = role
        self.dialect = dialect
        self._password = url.password or ""
        self.where = f"{url.host or 'localhost'}:{url.port or _DEFAULT_PORTS[dialect]}/{url.database or ''}"
        if dialect is Dialect.MYSQL:
            args: dict[str, Any] = {"charset": "utf8mb4", "init_command": "SET time_zone = '+00:00'"}
        else:
            args = {"options": " ".join(f"-c {o}" for o in _PG_SESSION)}
        self.engine = create_engine(url, connect_args=args, pool_size=4, max_overflow=4)

    def _scrub(self, message: str) -> str:
        first = message.strip().splitlines()[0] if message.strip() else message
        return first.replace(self._password, "***") if self._password else first

    def _connect(self) -> Connection:
        try:
            return self.engine.connect()
        except DBAPIError as e:
            raise VerifyError(
                f"cannot connect to the {self.role} database {self.where}: {self._scrub(str(e.orig))}"
            ) from None

    def rows(self, sql: str, what: str, *, aggregate: bool = False) -> list[tuple[Any, ...]]:
        """The rows of ``sql`` (sent as is); ``what`` names the query in an error. ``aggregate``:
        a checksum query (PostgreSQL: hash aggregation)."""
        with self._connect() as conn:
            try:
                if aggregate and self.dialect is Dialect.POSTGRESQL:
                    conn.exec_driver_sql(_PG_HASH_AGGREGATE, execution_options=_RAW)
                return [tuple(r) for r in conn.exec_driver_sql(sql, execution_options=_RAW).all()]
            except DBAPIError as e:
                raise VerifyError(
                    f"{self.role} database {self.where}: {what} failed: {self._scrub(str(e.orig))}"
                ) from None

    def bound(self, sql: str, params: dict[str, Any], what: str) -> list[tuple[Any, ...]]:
        """The rows of ``sql`` with bound ``params`` (information_schema look-ups)."""
        with self._connect() as conn:
            try:
                return [tuple(r) for r in conn.execute(text(sql), params).all()]
            except DBAPIError as e:
                raise VerifyError(
                    f"{self.role} database {self.where}: {what} failed: {self._scrub(str(e.orig))}"
                ) from None

    def close(self) -> None:
        self.engine.dispose()


_POOL: Final = ThreadPoolExecutor(max_workers=8, thread_name_prefix="sluice-verify")


def run_all(calls: Sequence[Callable[[], A]]) -> list[A]:
    """Run ``calls`` at the same time; their results in order. Errors: the first call's first."""
    futures = [_POOL.submit(c) for c in calls]
    try:
        return [f.result() for f in futures]
    finally:
        for f in futures:
            f.exception()


def both(source: Callable[[], A], target: Callable[[], B]) -> tuple[A, B]:
    """Run ``source`` and ``target`` at the same time (one thread each: both databases work at
    once; the drivers release the GIL while they wait). Errors: the source's first."""
    s, t = _POOL.submit(source), _POOL.submit(target)
    try:
        return s.result(), t.result()
    finally:
        t.exception()  # never leave the other side running behind an error
