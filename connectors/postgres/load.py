"""Loading Arrow batches into PostgreSQL with ``COPY FROM STDIN`` inside the caller's transaction.

COPY in CSV form is the fastest path measured here (Arrow -> CSV -> COPY, DESIGN.md). Everything
runs on the one connection whose transaction also commits the batch's positions, so the rows are
visible exactly when the positions are.

Upsert goes through a temporary staging table (dropped at commit): COPY cannot resolve conflicts,
and ``INSERT .. ON CONFLICT DO UPDATE`` refuses to touch one row twice in a statement, so the
staged rows are first reduced to the last record per key (by record order ``__sluice_ord``).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, text

from connectors.postgres.ddl import qualified, quote_ident

if TYPE_CHECKING:
    import pyarrow as pa

ORD_COLUMN = "__sluice_ord"
STAGE_TABLE = "__sluice_stage"
CHUNK_ROWS = 50_000


def _csv_chunks(batches: Iterable[pa.RecordBatch]) -> Iterable[bytes]:
    import pyarrow.csv as pacsv

    # Strings are always quoted and nulls left empty: PostgreSQL's CSV tells NULL from ''.
    options = pacsv.WriteOptions(include_header=False, quoting_style="needed")
    for batch in batches:
        if batch.num_rows == 0:
            continue
        buf = io.BytesIO()
        pacsv.write_csv(batch, buf, options)
        yield buf.getvalue()


def copy_arrow(conn: Connection, target: str, columns: Sequence[str], table: pa.Table) -> int:
    """COPY ``table`` (columns in ``columns`` order) into ``target`` (already quoted); return rows."""
    cols = ", ".join(quote_ident(c) for c in columns)
    raw: Any = conn.connection.driver_connection  # psycopg.Connection in the caller's transaction
    with raw.cursor() as cur, cur.copy(f"COPY {target} ({cols}) FROM STDIN WITH (FORMAT csv)") as copy:
        for chunk in _csv_chunks(table.to_batches(max_chunksize=CHUNK_ROWS)):
            copy.write(chunk)
    return int(table.num_rows)


def insert_rows(conn: Connection, schema: str, table: str, columns: Sequence[str], rows: pa.Table) -> int:
    """Append ``rows`` to the target table."""
    return copy_arrow(conn, qualified(schema, table), columns, rows)


def upsert_rows(
    conn: Connection, schema: str, table: str, columns: Sequence[str], pk: Sequence[str], rows: pa.Table
) -> int:
    """Insert or update ``rows`` by ``pk``; the last row per key (``ORD_COLUMN`` order) wins.

    ``rows`` carries ``ORD_COLUMN`` after ``columns``. Returns the number of rows staged.
    """
    target = qualified(schema, table)
    stage = quote_ident(STAGE_TABLE)
    conn.execute(text(f"DROP TABLE IF EXISTS pg_temp.{stage}"))
    conn.execute(
        text(
            f"CREATE TEMP TABLE {stage} ON COMMIT DROP AS "
            f"SELECT {', '.join(quote_ident(c) for c in columns)}, 0::bigint AS {quote_ident(ORD_COLUMN)} "
            f"FROM {target} WITH NO DATA"
        )
    )
    staged = copy_arrow(conn, stage, [*columns, ORD_COLUMN], rows)
    col_list = ", ".join(quote_ident(c) for c in columns)
    keys = ", ".join(quote_ident(k) for k in pk)
    updates = [c for c in columns if c not in pk]
    action = (
        "DO UPDATE SET " + ", ".join(f"{quote_ident(c)} = EXCLUDED.{quote_ident(c)}" for c in updates)
        if updates
        else "DO NOTHING"
    )
    conn.execute(
        text(
            f"INSERT INTO {target} ({col_list}) "
            f"SELECT DISTINCT ON ({keys}) {col_list} FROM {stage} "
            f"ORDER BY {keys}, {quote_ident(ORD_COLUMN)} DESC "
            f"ON CONFLICT ({keys}) {action}"
        )
    )
    return staged


def table_columns(conn: Connection, schema: str, table: str) -> list[str] | None:
    """The target table's column names, or None when it does not exist."""
    rows = conn.execute(
        text(
            "SELECT a.attname FROM pg_attribute a "
            "WHERE a.attrelid = to_regclass(:name) AND a.attnum > 0 AND NOT a.attisdropped "
            "ORDER BY a.attnum"
        ),
        {"name": qualified(schema, table)},
    ).scalars()
    names = [str(n) for n in rows]
    if names:
        return names
    exists = conn.execute(text("SELECT to_regclass(:name) IS NOT NULL"), {"name": qualified(schema, table)})
    return [] if exists.scalar_one() else None
