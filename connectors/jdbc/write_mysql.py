"""MySQL/MariaDB dialect of the JDBC sink: ``LOAD DATA LOCAL INFILE`` into a staging table, then merge.

Why LOAD DATA and not multi-row ``INSERT … ON DUPLICATE KEY UPDATE``: measured by
``bench/mysql_write_bench.py`` on this machine (MariaDB 10.11, PyMySQL, 2 cores shared with other
work at a load average of ~14, 200,000 rows of ~104 bytes upserted into a keyed InnoDB table, two
passes: insert then update), LOAD DATA + merge did 21,019 and 18,363 rows/s in two runs, PyMySQL's
``executemany`` of multi-row INSERTs 12,249 and 10,174 rows/s: a ratio of 1.7-1.8. The multi-row
path spends its time turning Arrow columns into Python tuples and escaping every value in pure
Python; here Arrow builds the tab-separated file column-wise in C++ and the server parses it.
Absolute figures move with the machine's load; the ratio held.

The rows are staged, not loaded straight into the target, for two reasons: LOAD DATA LOCAL turns
conversion errors into warnings (the server cannot stop the client's stream), so the stage holds
text only and the typed ``INSERT … SELECT`` that follows runs under strict SQL mode and fails on a
value that does not fit; and the stage is where a batch is reduced to its last record per key
before ``DELETE … JOIN``, ``INSERT``, ``INSERT … ON DUPLICATE KEY UPDATE`` or ``UPDATE … JOIN``.
That reduction is a ``ROW_NUMBER() OVER (PARTITION BY key ORDER BY __sluice_ord DESC)`` window, run
only when a key repeats in the batch (checked in Arrow first; the window costs about as much as the
merge itself). The inserts still read ``ORDER BY __sluice_ord``, so keys the target's collation
folds together ('A' and 'a') keep record order.
``batch.size`` bounds the rows of one LOAD DATA statement (one temporary file each).

The file format is MySQL's default: tab-separated, ``\\`` escapes, ``\\N`` for NULL. Binary values
travel as hex and are ``UNHEX``-ed by the merge. The session uses UTC (``time_zone='+00:00'``).
DDL commits implicitly in MySQL, so tables are created/evolved before the data transaction.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from sluice.connectors.jdbc.ddl import qualified
from sluice.connectors.jdbc.ddl import quote as _quote
from sluice.connectors.jdbc.urls import Dialect
from sluice.connectors.jdbc.writes import OP_COLUMN, ORD_COLUMN, TableWrite, unique_keys

if TYPE_CHECKING:
    import pyarrow as pa
    from sqlalchemy import Connection

STAGE_TABLE = "__sluice_stage"
CHUNK_ROWS: Final = 50_000
#: Session settings of every sink connection: UTC, strict (a value that does not fit is an error).
SESSION_INIT: Final = (
    "SET time_zone = '+00:00', sql_mode = 'STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,"
    "NO_ENGINE_SUBSTITUTION,NO_AUTO_VALUE_ON_ZERO'"
)
CONNECT_ARGS: Final = {"local_infile": True, "init_command": SESSION_INIT, "charset": "utf8mb4"}
_ESCAPES: Final = (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r"), ("\0", "\\0"))
_NEEDS_ESCAPE: Final = "[\\\\\\t\\n\\r\\x00]"
_BINARY_TYPES: Final = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})


def quote(name: str) -> str:
    return _quote(Dialect.MYSQL, name)


def run(conn: Connection, sql: str, params: Sequence[Any] | None = None) -> Any:
    """Execute on the driver cursor (no ``%`` or ``:name`` parsing of identifiers from data)."""
    raw: Any = conn.connection.driver_connection
    with raw.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall() if cur.description else None


def tsv_bytes(rows: pa.Table) -> bytes:
    """``rows`` (string columns) as MySQL's default LOAD DATA format, built column-wise in Arrow."""
    # pyarrow, numpy: config validation imports this module (the jdbc-sink class)
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if rows.num_rows == 0:
        return b""
    cols = []
    for col in rows.columns:
        a = pc.cast(col.combine_chunks(), pa.large_string())
        # One scan per column (most hold no character to escape) instead of five replaces.
        if pc.any(pc.match_substring_regex(a, _NEEDS_ESCAPE)).as_py():
            for raw, escaped in _ESCAPES:
                a = pc.replace_substring(a, raw, escaped)
        cols.append(pc.fill_null(a, "\\N"))
    # The line break goes on the last (short) column, not on the joined lines: one pass less.
    empty, newline = pa.scalar("", pa.large_string()), pa.scalar("\n", pa.large_string())
    cols[-1] = pc.binary_join_element_wise(cols[-1], empty, newline)
    lines = pc.binary_join_element_wise(*cols, pa.scalar("\t", pa.large_string()))
    arr = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
    offsets = arr.buffers()[1]
    data = arr.buffers()[2]
    off = np.frombuffer(offsets, dtype=np.int64, count=len(arr) + 1, offset=arr.offset * 8)
    return data.to_pybytes()[int(off[0]) : int(off[-1])]


def load_tsv(
    conn: Connection, target: str, columns: Sequence[str], rows: pa.Table, chunk_rows: int = CHUNK_ROWS
) -> int:
    """``LOAD DATA LOCAL INFILE`` of ``rows`` into ``target`` (already quoted), one statement per
    ``chunk_rows`` rows (``batch.size``: bounds the file and the client's memory per statement)."""
    cols = ", ".join(quote(c) for c in columns)
    for start in range(0, rows.num_rows, max(1, chunk_rows)):
        payload = tsv_bytes(rows.slice(start, chunk_rows))
        fd, path = tempfile.mkstemp(prefix="sluice-load-", suffix=".tsv")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
            quoted_path = path.replace("\\", "\\\\").replace("'", "\\'")
            run(
                conn,
                f"LOAD DATA LOCAL INFILE '{quoted_path}' INTO TABLE {target} CHARACTER SET utf8mb4 "
                f"FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n' ({cols})",
            )
        finally:
            os.unlink(path)
    return int(rows.num_rows)


def _expr(col: str, kind: str, alias: str) -> str:
    ref = f"{alias}.{quote(col)}"
    return f"UNHEX({ref})" if kind in _BINARY_TYPES else ref


def apply(
    conn: Connection, w: TableWrite, rows: pa.Table, types: dict[str, str], chunk_rows: int = CHUNK_ROWS
) -> None:
    """Apply ``rows`` (``w.columns`` then ``ORD_COLUMN``, ``OP_COLUMN``; all text) to the target.

    ``types`` are the target's column data types (``table_columns``), for the UNHEX of binaries.
    """
    stage = quote(STAGE_TABLE)
    run(conn, f"DROP TEMPORARY TABLE IF EXISTS {stage}")
    stage_cols = ", ".join(f"{quote(c)} LONGTEXT NULL" for c in w.columns)
    run(
        conn,
        f"CREATE TEMPORARY TABLE {stage} ({stage_cols}, {quote(ORD_COLUMN)} BIGINT NOT NULL, "
        f"{quote(OP_COLUMN)} CHAR(1) NOT NULL) CHARACTER SET utf8mb4",
    )
    load_tsv(conn, stage, [*w.columns, ORD_COLUMN, OP_COLUMN], rows, chunk_rows)
    merge(conn, w, stage, types, unique=unique_keys(rows, w.pk))


def merge(conn: Connection, w: TableWrite, staged: str, types: dict[str, str], *, unique: bool) -> None:
    """Apply the text rows of ``staged`` (a table or a parenthesised query of ``w.columns``, then
    ``ORD_COLUMN`` and ``OP_COLUMN``) to the target. ``unique``: no key repeats in them, so they
    are merged as they are, without the window that keeps the last record per key."""
    target = qualified(Dialect.MYSQL, w.schema, w.table)
    cols = ", ".join(quote(c) for c in w.columns)
    values = ", ".join(_expr(c, types.get(c, ""), "l") for c in w.columns)
    op, ord_ = quote(OP_COLUMN), quote(ORD_COLUMN)
    if not w.pk:  # keyless insert: every row, in record order
        run(conn, f"INSERT INTO {target} ({cols}) SELECT {values} FROM {staged} AS l ORDER BY l.{ord_}")
        return
    keys = ", ".join(quote(k) for k in w.pk)
    # The last record per key: the stage itself when no key repeats in the batch (the common case;
    # the window costs about as much as the merge), else a ROW_NUMBER() window over it.
    last = (
        staged
        if unique
        else f"(SELECT * FROM (SELECT s.*, ROW_NUMBER() OVER (PARTITION BY {keys} ORDER BY s.{ord_} DESC) "
        f"AS __sluice_rn FROM {staged} AS s) AS r WHERE r.__sluice_rn = 1)"
    )
    match = " AND ".join(f"t.{quote(k)} = {_expr(k, types.get(k, ''), 'l')}" for k in w.pk)
    if w.deletes:
        run(conn, f"DELETE t FROM {target} AS t JOIN {last} AS l ON {match} WHERE l.{op} = 'd'")
        # the stage is read again below: MySQL cannot reopen a temporary table in one statement only
    updates = [c for c in w.columns if c not in w.pk]
    if w.mode == "insert":
        run(conn, f"INSERT INTO {target} ({cols}) SELECT {values} FROM {last} AS l WHERE l.{op} = 'u' "
            f"ORDER BY l.{ord_}")  # fmt: skip
    elif w.mode == "upsert":
        sets = ", ".join(f"{quote(c)} = VALUES({quote(c)})" for c in updates or w.pk[:1])
        run(
            conn,
            f"INSERT INTO {target} ({cols}) SELECT {values} FROM {last} AS l WHERE l.{op} = 'u' "
            f"ORDER BY l.{ord_} ON DUPLICATE KEY UPDATE {sets}",
        )
    elif updates:
        sets = ", ".join(f"t.{quote(c)} = {_expr(c, types.get(c, ''), 'l')}" for c in updates)
        run(conn, f"UPDATE {target} AS t JOIN {last} AS l ON {match} SET {sets} WHERE l.{op} = 'u'")


def table_columns(conn: Connection, schema: str, table: str) -> dict[str, str] | None:
    """The target table's columns and their data types, or None when it does not exist."""
    found = run(
        conn,
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = COALESCE(NULLIF(%s, ''), DATABASE()) AND table_name = %s "
        "ORDER BY ordinal_position",
        [schema, table],
    )
    return {str(n): str(t).lower() for n, t in found} if found else None


def empty_table(conn: Connection, schema: str, table: str) -> bool:
    """A TRUNCATE event (``truncate.enabled``): the table emptied inside the batch's transaction by
    ``DELETE`` — MySQL's ``TRUNCATE TABLE`` commits implicitly, which would break exactly once (the
    rows before it and the ledger row would commit apart). False when the table does not exist."""
    if table_columns(conn, schema, table) is None:
        return False
    run(conn, f"DELETE FROM {qualified(Dialect.MYSQL, schema, table)}")
    return True
