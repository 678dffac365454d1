"""A PostgreSQL sink batch staged by the Spark tasks that compute its records (``StagesOnExecutors``).

Each Spark task COPYs its partition's rows, per target table, into a staging table of its own in
the target database (schema ``sluice_staging``, UNLOGGED: nothing of it needs to survive a crash,
since a re-run of the plan stages it again), and returns a ``StagedTable`` per table: where the
rows are and what they are, never the rows. The driver then merges every partition's staging
tables into the target with the same statements a batch written from the driver uses
(``write_postgres.merge``), commits the positions in that transaction and drops the staging
tables in it: a batch is committed whole with its positions, or not at all.

Staged columns are text: COPY reads CSV into a typed column with the type's input function, and
the merge's ``text::type`` cast calls the same function, so a staged value converts exactly as a
directly copied one would. Records of one key come from one queue, read by one partition, but a
key of the value (``pk.mode=record_value``) may cross queues: the merge reduces the union to the
last record per key unless one partition staged the whole table with no key repeated.

A staging table's name is fixed by the plan (connector and task, batch, partition, table), so a
re-run of a crashed batch, or a Spark task run twice, replaces it rather than adding to it; a
task's first staged batch drops what an earlier run of the task left behind.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from sluice.connectors.jdbc.write_postgres import copy_arrow, quote, run
from sluice.connectors.jdbc.writes import OP_COLUMN, ORD_COLUMN, TableWrite

if TYPE_CHECKING:
    import pyarrow as pa
    from sqlalchemy import Connection


#: The schema of the staging tables, in the target database.
STAGING_SCHEMA: Final = "sluice_staging"

#: Bits of a staged row's order taken by its index within its partition: the partition's number
#: above them keeps record order across a batch's partitions.
_ORDINAL_BITS: Final = 40


@dataclass(frozen=True)
class StagedTable:
    """One partition's rows of one target table, in a staging table (what reaches the driver)."""

    write: TableWrite
    #: the staging table's name in ``STAGING_SCHEMA``
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
    return "s" + hashlib.sha1(f"{connector}/{task_id}".encode()).hexdigest()[:12]


def staging_name(prefix: str, batch_id: int, partition: int, index: int) -> str:
    return f"{prefix}_{batch_id}_{partition}_{index}"


def ordered(rows: pa.Table, partition: int) -> pa.Table:
    """``rows`` with their order column made unique across the batch's partitions."""
    import pyarrow as pa
    import pyarrow.compute as pc

    at = rows.schema.get_field_index(ORD_COLUMN)
    order = pc.add(rows.column(at), pa.scalar(partition << _ORDINAL_BITS, pa.int64()))
    return rows.set_column(at, ORD_COLUMN, order)


def stage_rows(conn: Connection, name: str, rows: pa.Table, chunk_rows: int) -> None:
    """``rows`` into the staging table ``name``, made anew as text columns (module docstring)."""
    table = f"{quote(STAGING_SCHEMA)}.{quote(name)}"
    columns = ", ".join(f"{quote(c)} text" for c in rows.column_names)
    run(conn, f"DROP TABLE IF EXISTS {table}")
    run(conn, f"CREATE UNLOGGED TABLE {table} ({columns})")
    copy_arrow(conn, table, rows, chunk_rows)


def staged_union(tables: Sequence[StagedTable], columns: Sequence[str], types: Mapping[str, str]) -> str:
    """The staged rows of ``tables`` as one parenthesised query of ``columns``, typed as the target
    table's ``types``, then the order and op columns (a column a partition did not stage is null)."""
    selects = []
    for t in tables:
        staged = set(t.write.columns)
        values = [
            f"{quote(c)}::{types[c]} AS {quote(c)}" if c in staged else f"NULL::{types[c]} AS {quote(c)}"
            for c in columns
        ]
        values += [f"{quote(ORD_COLUMN)}::bigint AS {quote(ORD_COLUMN)}", quote(OP_COLUMN)]
        selects.append(f"SELECT {', '.join(values)} FROM {quote(STAGING_SCHEMA)}.{quote(t.staging)}")
    return "(" + " UNION ALL ".join(selects) + ")"


def prepare_schema(conn: Connection, prefix: str) -> None:
    """Create the staging schema if needed and drop the staging tables an earlier run of the task
    (``prefix``) left behind (a crash between staging and merging)."""
    run(conn, "SELECT pg_advisory_xact_lock(hashtext(%s))", [f"sluice-staging/{STAGING_SCHEMA}"])
    run(conn, f"CREATE SCHEMA IF NOT EXISTS {quote(STAGING_SCHEMA)}")
    _drop_named(conn, f"{prefix}_")


def drop_batch(conn: Connection, prefix: str, batch_id: int) -> None:
    """Drop every staging table of one batch of a task (``prefix``), whichever Spark task made it."""
    _drop_named(conn, f"{prefix}_{batch_id}_")


def _drop_named(conn: Connection, start: str) -> None:
    names = run(
        conn,
        "SELECT tablename FROM pg_tables WHERE schemaname = %s AND starts_with(tablename, %s)",
        [STAGING_SCHEMA, start],
    )
    if names:
        tables = ", ".join(f"{quote(STAGING_SCHEMA)}.{quote(str(n))}" for (n,) in names)
        run(conn, f"DROP TABLE IF EXISTS {tables}")


def process() -> tuple[int, str]:
    """This process and its host, as a ``StagedTable`` names them."""
    return os.getpid(), socket.gethostname()
