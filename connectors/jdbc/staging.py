"""A JDBC sink batch staged by the Spark tasks that compute its records (``StagesOnExecutors``).

Each Spark task loads its partition's rows, per target table, into a staging table of its own in
the target database, and returns a ``StagedTable`` per table: where the rows are and what they
are, never the rows. PostgreSQL: COPY into an UNLOGGED table of schema ``sluice_staging``
(nothing of it needs to survive a crash, since a re-run of the plan stages it again). MariaDB:
LOAD DATA LOCAL INFILE into a table of the connection's database. The driver then merges every
partition's staging tables into the target with the same statements a batch written from the
driver uses (``write_postgres.merge``, ``write_mysql.merge``) and commits the positions (or the
ledger row) with them: a batch is committed whole with its positions, or not at all. PostgreSQL
drops the staging tables in that transaction; MariaDB right after it (its DDL commits on its own).

Staged columns are text: COPY reads CSV into a typed column with the type's input function, and
the merge's ``text::type`` cast calls the same function, so a staged value converts exactly as a
directly copied one would; MariaDB's merge reads text stages already (``write_mysql``). Records of
one key come from one queue, read whole by one partition, but a key of the value
(``pk.mode=record_value``) may cross queues: the merge reduces the union to the last record per
key unless one partition staged the whole table with no key repeated.

A staging table's name is fixed by the plan (connector and task, batch, partition, table), so a
re-run of a crashed batch, or a Spark task run twice, replaces it rather than adding to it; each
staged batch of a task first drops what its earlier batches left behind (``prepare``).
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from sluice.connectors.jdbc import write_mysql as my
from sluice.connectors.jdbc import write_postgres as pg
from sluice.connectors.jdbc.urls import Dialect
from sluice.connectors.jdbc.writes import OP_COLUMN, ORD_COLUMN, TableWrite

if TYPE_CHECKING:
    import pyarrow as pa
    from sqlalchemy import Connection


#: The schema of PostgreSQL's staging tables, in the target database (MariaDB's are in the
#: connection's database).
STAGING_SCHEMA: Final = "sluice_staging"

#: Bits of a staged row's order taken by its index within its partition: the partition's number
#: above them keeps record order across a batch's partitions.
_ORDINAL_BITS: Final = 40


@dataclass(frozen=True)
class StagedTable:
    """One partition's rows of one target table, in a staging table (what reaches the driver)."""

    write: TableWrite
    #: the staging table's name (``staging_table`` qualifies it)
    staging: str
    #: the typed columns the rows were shaped into (shape.Shaped.fields), as a serialized Arrow schema
    fields: bytes
    rows: int
    #: no key repeats among these rows
    unique: bool
    #: the process that staged them and its host (the worker's log names them)
    pid: int
    host: str


def staging_prefix(connector: str, task_id: int) -> str:
    """The start of every staging table name of one task (short: PostgreSQL names have 63 bytes)."""
    return "sluice_stage_" + hashlib.sha1(f"{connector}/{task_id}".encode()).hexdigest()[:12]


def staging_name(prefix: str, batch_id: int, partition: int, index: int) -> str:
    return f"{prefix}_{batch_id}_{partition}_{index}"


def staging_table(dialect: Dialect, name: str) -> str:
    if dialect is Dialect.POSTGRESQL:
        return f"{pg.quote(STAGING_SCHEMA)}.{pg.quote(name)}"
    return my.quote(name)


def ordered(rows: pa.Table, partition: int) -> pa.Table:
    """``rows`` with their order column made unique across the batch's partitions."""
    import pyarrow as pa
    import pyarrow.compute as pc

    at = rows.schema.get_field_index(ORD_COLUMN)
    order = pc.add(rows.column(at), pa.scalar(partition << _ORDINAL_BITS, pa.int64()))
    return rows.set_column(at, ORD_COLUMN, order)


def stage_rows(conn: Connection, dialect: Dialect, name: str, rows: pa.Table, chunk_rows: int) -> None:
    """``rows`` into the staging table ``name``, made anew with text columns (the order column a
    number, so MariaDB sorts by it as one)."""
    table = staging_table(dialect, name)
    if dialect is Dialect.POSTGRESQL:
        columns = ", ".join(f"{pg.quote(c)} text" for c in rows.column_names)
        pg.run(conn, f"DROP TABLE IF EXISTS {table}")
        pg.run(conn, f"CREATE UNLOGGED TABLE {table} ({columns})")
        pg.copy_arrow(conn, table, rows, chunk_rows)
        return
    kinds = {ORD_COLUMN: "BIGINT NOT NULL", OP_COLUMN: "CHAR(1) NOT NULL"}
    columns = ", ".join(f"{my.quote(c)} {kinds.get(c, 'LONGTEXT NULL')}" for c in rows.column_names)
    my.run(conn, f"DROP TABLE IF EXISTS {table}")
    my.run(conn, f"CREATE TABLE {table} ({columns}) CHARACTER SET utf8mb4")
    my.load_tsv(conn, table, rows.column_names, rows, chunk_rows)


def staged_union(
    dialect: Dialect, tables: Sequence[StagedTable], columns: Sequence[str], types: Mapping[str, str]
) -> str:
    """The staged rows of ``tables`` as one parenthesised query of ``columns`` (PostgreSQL: typed
    as the target table's ``types``; MariaDB: text, as its merge reads a stage), then the order and
    op columns; a column a partition did not stage is null."""
    quote = pg.quote if dialect is Dialect.POSTGRESQL else my.quote

    def value(c: str, staged: set[str]) -> str:
        if dialect is Dialect.MYSQL:
            return f"{quote(c)} AS {quote(c)}" if c in staged else f"NULL AS {quote(c)}"
        return f"{quote(c)}::{types[c]} AS {quote(c)}" if c in staged else f"NULL::{types[c]} AS {quote(c)}"

    order = (
        quote(ORD_COLUMN)
        if dialect is Dialect.MYSQL
        else f"{quote(ORD_COLUMN)}::bigint AS {quote(ORD_COLUMN)}"
    )
    selects = [
        f"SELECT {', '.join([*(value(c, set(t.write.columns)) for c in columns), order, quote(OP_COLUMN)])} "
        f"FROM {staging_table(dialect, t.staging)}"
        for t in tables
    ]
    return "(" + " UNION ALL ".join(selects) + ")"


def prepare(conn: Connection, dialect: Dialect, prefix: str) -> None:
    """Make the staging schema (PostgreSQL) and drop the staging tables an earlier run of the task
    (``prefix``) left behind (a crash between staging and merging)."""
    if dialect is Dialect.POSTGRESQL:
        pg.run(conn, "SELECT pg_advisory_xact_lock(hashtext(%s))", [f"sluice-staging/{STAGING_SCHEMA}"])
        pg.run(conn, f"CREATE SCHEMA IF NOT EXISTS {pg.quote(STAGING_SCHEMA)}")
    _drop_named(conn, dialect, f"{prefix}_")


def drop_batch(conn: Connection, dialect: Dialect, prefix: str, batch_id: int) -> None:
    """Drop every staging table of one batch of a task (``prefix``), whichever Spark task made it."""
    _drop_named(conn, dialect, f"{prefix}_{batch_id}_")


def _drop_named(conn: Connection, dialect: Dialect, start: str) -> None:
    if dialect is Dialect.POSTGRESQL:
        names = pg.run(
            conn,
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND starts_with(tablename, %s)",
            [STAGING_SCHEMA, start],
        )
    else:
        names = my.run(
            conn,
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = DATABASE() AND LEFT(table_name, %s) = %s",
            [len(start), start],
        )
    if names:
        tables = ", ".join(staging_table(dialect, str(n)) for (n,) in names)
        (pg if dialect is Dialect.POSTGRESQL else my).run(conn, f"DROP TABLE IF EXISTS {tables}")


def process() -> tuple[int, str]:
    """This process and its host, as a ``StagedTable`` names them."""
    return os.getpid(), socket.gethostname()
