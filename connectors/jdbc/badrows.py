"""Which rows of a failed batch the target refuses, and why, named by record position.

A batch is applied as one set-based statement, so when the database refuses it (a constraint
violated, a value that does not fit its column) the error names no record. The sink then replays
the batch in a transaction that is always rolled back, halving the failing slice under savepoints
until single rows remain: ``k`` bad rows among ``n`` cost about ``k·log2(n)`` small applies, and the
good slices stay applied while the rest is tried, so a duplicate key against an earlier row of the
same batch is found as it would be in the real write. Only the failure path pays for it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy.exc import DBAPIError

if TYPE_CHECKING:
    import pyarrow as pa
    from sqlalchemy import Connection, Engine

#: Stop looking after this many bad rows: the batch is reported with the ones found.
MAX_BAD_ROWS: Final = 1000
_MYSQL_ROW_CODES: Final = frozenset(
    {1048, 1062, 1136, 1264, 1265, 1292, 1364, 1366, 1406, 1451, 1452, 1690, 3819, 4025, 4078}
)
_AUTH_SQLSTATES: Final = frozenset({"28000", "28P01"})
_MYSQL_AUTH_CODES: Final = frozenset({1044, 1045, 1698})


@dataclass(frozen=True)
class BadRow:
    index: int  # row index in the batch's Arrow table
    column: str | None
    reason: str


def is_database_error(exc: BaseException) -> bool:
    """An error the database or its driver raised: SQLAlchemy's wrapper, or the DB-API error of
    psycopg / PyMySQL raised on the driver cursor the writers use directly."""
    return isinstance(exc, DBAPIError) or type(exc).__module__.split(".")[0] in ("psycopg", "pymysql")


def driver_error(exc: BaseException) -> BaseException:
    """The DB-API exception under SQLAlchemy's wrapper (or the exception itself)."""
    return exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc


def _mysql_code(exc: BaseException) -> int | None:
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def is_row_error(exc: BaseException) -> bool:
    """A refusal caused by the rows' content (data exception, constraint), not by the connection."""
    orig = driver_error(exc)
    state = getattr(orig, "sqlstate", None)
    if isinstance(state, str):
        return state[:2] in ("22", "23")
    return _mysql_code(orig) in _MYSQL_ROW_CODES


def is_auth_error(exc: BaseException) -> bool:
    orig = driver_error(exc)
    state = getattr(orig, "sqlstate", None)
    if isinstance(state, str) and state in _AUTH_SQLSTATES:
        return True
    text = str(orig)
    return _mysql_code(orig) in _MYSQL_AUTH_CODES or "password authentication failed" in text


def describe(exc: BaseException) -> tuple[str | None, str]:
    """(column, reason) of a database error, as far as the database says."""
    orig = driver_error(exc)
    diag = getattr(orig, "diag", None)
    if diag is not None:  # psycopg
        column = diag.column_name
        if column is None and diag.context:
            m = re.search(r"column ([^:]+):", diag.context)
            column = m.group(1).strip().strip('"') if m else None
        reason = str(diag.message_primary or orig).strip()
        if diag.message_detail:
            reason += f" ({diag.message_detail.strip()})"
        return column, reason
    text = str(orig.args[1]) if len(getattr(orig, "args", ())) > 1 else str(orig)
    m = re.search(r"[Cc]olumn [`']([^`']+)[`']", text)
    return (m.group(1) if m else None), text.strip()


def find_bad_rows(
    engine: Engine, apply: Callable[[Connection, pa.Table], Any], rows: pa.Table
) -> list[BadRow]:
    """The rows ``apply`` cannot write, found by bisection in a rolled-back transaction."""
    bad: list[BadRow] = []
    with engine.connect() as conn:
        outer = conn.begin()
        try:

            def attempt(lo: int, hi: int) -> None:
                if hi <= lo or len(bad) >= MAX_BAD_ROWS:
                    return
                savepoint = conn.begin_nested()
                try:
                    apply(conn, rows.slice(lo, hi - lo))
                except Exception as exc:
                    if not is_database_error(exc):
                        raise
                    savepoint.rollback()
                    if not is_row_error(exc):
                        raise
                    if hi - lo == 1:
                        column, reason = describe(exc)
                        bad.append(BadRow(lo, column, reason))
                        return
                    mid = (lo + hi) // 2
                    attempt(lo, mid)
                    attempt(mid, hi)
                    return
                savepoint.commit()

            attempt(0, rows.num_rows)
        finally:
            outer.rollback()
    return bad
