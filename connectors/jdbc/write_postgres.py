"""PostgreSQL dialect of the JDBC sink: COPY into a staging table, then one merge per action.

COPY in CSV form is the fastest load path measured here (docs/design.md: Arrow -> CSV -> ``COPY FROM
STDIN`` 761k rows/s, Spark JDBC batched inserts 443k rows/s, row-by-row psycopg 115k rows/s); it
cannot resolve conflicts, so every mode but a plain keyless insert goes through a temporary
staging table (dropped at commit) typed like the target, reduced to the last record per key where
a key repeats (``DISTINCT ON … ORDER BY __sluice_ord DESC``: a merge refuses to touch one row
twice, and record order must decide), then applied: ``DELETE … USING`` for keys whose last
record is a tombstone, and ``INSERT``, an upsert or ``UPDATE … FROM`` for the rest. Everything
runs on the caller's connection, inside the caller's transaction. ``batch.size`` is the rows of
one CSV chunk written to the COPY stream.

An upsert is a ``MERGE`` (PostgreSQL 15 and later): it joins the staged rows to the target's key
index and inserts the rest as plain rows, where ``INSERT … ON CONFLICT DO UPDATE`` inserts every row
speculatively. Measured here, 100,000 rows into a 3-million-row table: 0.6 s against 1.1–1.5 s
for new keys, 1.25 against 1.77 s for existing ones. ``MERGE`` does not arbitrate a key that a
concurrent transaction inserts meanwhile (a unique violation) as ``ON CONFLICT`` does, and
PostgreSQL 15 and 16 refuse it on a view, where ``ON CONFLICT`` writes through an updatable one; so
it runs under a savepoint, and such a batch is applied again by ``ON CONFLICT``, as is every upsert
on an older server.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from sluice.connectors.jdbc.ddl import qualified
from sluice.connectors.jdbc.ddl import quote as _quote
from sluice.connectors.jdbc.urls import Dialect
from sluice.connectors.jdbc.writes import OP_COLUMN, ORD_COLUMN, TableWrite, unique_keys

if TYPE_CHECKING:
    import pyarrow as pa
    from sqlalchemy import Connection

STAGE_TABLE = "__sluice_stage"
CHUNK_ROWS = 50_000

#: The first server version (``server_version_num``) with ``MERGE``.
MERGE_SINCE = 150_000

#: The savepoint an upsert's ``MERGE`` runs under (module docstring).
MERGE_SAVEPOINT = "__sluice_merge"


def quote(name: str) -> str:
    return _quote(Dialect.POSTGRESQL, name)


def run(conn: Connection, sql: str, params: Sequence[Any] | None = None) -> Any:
    """Execute on the driver cursor (no SQLAlchemy bind-parameter parsing of names from data)."""
    raw: Any = conn.connection.driver_connection
    with raw.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall() if cur.description else None


def _csv_chunks(batches: Iterable[pa.RecordBatch]) -> Iterable[bytes]:
    import pyarrow.csv as pacsv  # pyarrow: config validation imports this module (the jdbc-sink class)

    # Strings quoted when needed and nulls left empty: PostgreSQL's CSV tells NULL from "".
    options = pacsv.WriteOptions(include_header=False, quoting_style="needed")
    for batch in batches:
        if batch.num_rows == 0:
            continue
        buf = io.BytesIO()
        pacsv.write_csv(batch, buf, options)
        yield buf.getvalue()


def copy_arrow(conn: Connection, target: str, rows: pa.Table, chunk_rows: int = CHUNK_ROWS) -> int:
    """COPY ``rows`` (its column names are the target's) into ``target`` (already quoted)."""
    cols = ", ".join(quote(c) for c in rows.column_names)
    raw: Any = conn.connection.driver_connection
    with raw.cursor() as cur, cur.copy(f"COPY {target} ({cols}) FROM STDIN WITH (FORMAT csv)") as copy:
        for chunk in _csv_chunks(rows.to_batches(max_chunksize=chunk_rows)):
            copy.write(chunk)
    return int(rows.num_rows)


def apply(conn: Connection, w: TableWrite, rows: pa.Table, chunk_rows: int = CHUNK_ROWS) -> None:
    """Apply ``rows`` (``w.columns`` then ``ORD_COLUMN``, ``OP_COLUMN``) to the target table."""
    target = qualified(Dialect.POSTGRESQL, w.schema, w.table)
    if w.mode == "insert" and not w.deletes:
        copy_arrow(conn, target, rows.select(list(w.columns)), chunk_rows)
        return
    stage = quote(STAGE_TABLE)
    cols = ", ".join(quote(c) for c in w.columns)
    run(conn, f"DROP TABLE IF EXISTS pg_temp.{stage}")
    run(
        conn,
        f"CREATE TEMP TABLE {stage} ON COMMIT DROP AS SELECT {cols}, 0::bigint AS {quote(ORD_COLUMN)}, "
        f"''::text AS {quote(OP_COLUMN)} FROM {target} WITH NO DATA",
    )
    copy_arrow(conn, stage, rows, chunk_rows)
    merge(conn, w, stage, unique=unique_keys(rows, w.pk))


def merge(conn: Connection, w: TableWrite, staged: str, *, unique: bool) -> None:
    """Apply the rows of ``staged`` (a table or a parenthesised query of ``w.columns``, then
    ``ORD_COLUMN`` and ``OP_COLUMN``) to the target table. ``unique``: no key repeats in them, so
    they are merged as they are, without reducing them to the last per key first."""
    target = qualified(Dialect.POSTGRESQL, w.schema, w.table)
    cols = ", ".join(quote(c) for c in w.columns)
    op = quote(OP_COLUMN)
    if w.mode == "insert" and not w.deletes:
        run(conn, f"INSERT INTO {target} ({cols}) SELECT {cols} FROM {staged} AS l")
        return
    keys = ", ".join(quote(k) for k in w.pk)
    last = (
        staged  # no key repeats: the stage as it is (the reduction sorts the batch)
        if unique
        else f"(SELECT DISTINCT ON ({keys}) * FROM {staged} AS s ORDER BY {keys}, {quote(ORD_COLUMN)} DESC)"
    )
    match = _key_match(w)
    if w.deletes:
        run(conn, f"DELETE FROM {target} AS t USING {last} AS l WHERE l.{op} = 'd' AND {match}")
    updates = [c for c in w.columns if c not in w.pk]
    if w.mode == "insert":
        run(conn, f"INSERT INTO {target} ({cols}) SELECT {cols} FROM {last} AS l WHERE l.{op} = 'u'")
    elif w.mode == "upsert":
        upsert(conn, w, target, last)
    elif updates:  # update: rows whose key is absent are ignored (Kafka Connect's update mode)
        sets = ", ".join(f"{quote(c)} = l.{quote(c)}" for c in updates)
        run(conn, f"UPDATE {target} AS t SET {sets} FROM {last} AS l WHERE l.{op} = 'u' AND {match}")


def _key_match(w: TableWrite) -> str:
    """The target row ``t`` and the staged row ``l`` have the same key."""
    return " AND ".join(f"t.{quote(k)} = l.{quote(k)}" for k in w.pk)


def upsert(conn: Connection, w: TableWrite, target: str, last: str) -> None:
    """Insert or update the ``last`` rows (a staged query, ``op`` column ``u`` for live ones) by key:
    a ``MERGE`` where the server has it, else (or when a concurrent insert wins a key) ``ON CONFLICT``."""
    import psycopg.errors as pgerr  # psycopg: config validation imports this module (the jdbc-sink class)

    cols = ", ".join(quote(c) for c in w.columns)
    updates = [c for c in w.columns if c not in w.pk]
    op = quote(OP_COLUMN)
    raw: Any = conn.connection.driver_connection
    if raw.info.server_version >= MERGE_SINCE:
        matched = (
            "UPDATE SET " + ", ".join(f"{quote(c)} = l.{quote(c)}" for c in updates)
            if updates
            else "DO NOTHING"
        )
        values = ", ".join(f"l.{quote(c)}" for c in w.columns)
        run(conn, f"SAVEPOINT {MERGE_SAVEPOINT}")
        try:
            run(
                conn,
                f"MERGE INTO {target} AS t USING (SELECT * FROM {last} AS s WHERE s.{op} = 'u') AS l "
                f"ON {_key_match(w)} WHEN MATCHED THEN {matched} "
                f"WHEN NOT MATCHED THEN INSERT ({cols}) VALUES ({values})",
            )
        except (
            pgerr.UniqueViolation,
            pgerr.SerializationFailure,
            pgerr.FeatureNotSupported,
            pgerr.WrongObjectType,
        ):
            run(conn, f"ROLLBACK TO SAVEPOINT {MERGE_SAVEPOINT}")
        else:
            run(conn, f"RELEASE SAVEPOINT {MERGE_SAVEPOINT}")
            return
    keys = ", ".join(quote(k) for k in w.pk)
    action = (
        "DO UPDATE SET " + ", ".join(f"{quote(c)} = EXCLUDED.{quote(c)}" for c in updates)
        if updates
        else "DO NOTHING"
    )
    run(
        conn,
        f"INSERT INTO {target} ({cols}) SELECT {cols} FROM {last} AS l WHERE l.{op} = 'u' "
        f"ON CONFLICT ({keys}) {action}",
    )


def table_columns(conn: Connection, schema: str, table: str) -> dict[str, str] | None:
    """The target table's columns and their types, or None when it does not exist."""
    name = qualified(Dialect.POSTGRESQL, schema or "public", table)
    exists = run(conn, "SELECT to_regclass(%s) IS NOT NULL", [name])
    if not exists[0][0]:
        return None
    found = run(
        conn,
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
        "WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
        [name],
    )
    return {str(n): str(t) for n, t in found}


def lock_table_name(conn: Connection, schema: str, table: str) -> None:
    """Serialise two tasks creating or altering one table (the catalog would race)."""
    run(conn, "SELECT pg_advisory_xact_lock(hashtext(%s))", [f"sluice-ddl/{schema}/{table}"])


def empty_table(conn: Connection, schema: str, table: str) -> bool:
    """A TRUNCATE event (``truncate.enabled``): the table emptied inside the batch's transaction —
    PostgreSQL's TRUNCATE is transactional, so it commits or rolls back with the rows and positions.
    False when the table does not exist (nothing to empty)."""
    if table_columns(conn, schema, table) is None:
        return False
    run(conn, f"TRUNCATE TABLE {qualified(Dialect.POSTGRESQL, schema or 'public', table)}")
    return True
