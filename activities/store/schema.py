"""Tables of the offset store and the versioned migration runner that creates them.

Why a hand-rolled runner rather than Alembic: the store has a handful of tables, it is migrated by the
runtime itself on every worker start (not by an operator), and several workers may start at once.
What it needs is small: a ``schema_version`` table, an ordered list of migrations, and a
PostgreSQL advisory lock so two workers migrating the same schema at the same moment serialise
instead of failing on "relation already exists".

Every table lives in one configurable PostgreSQL schema (default ``sluice``; tests use a fresh
schema each), so the tables are built per schema by :func:`store_tables` rather than declared once
at module level.

Rule for future migrations: append, never edit. Version 1 is created from the table definitions
below; any later change to those definitions must also be appended as an explicit ALTER migration
(version 2, 3, ...) so existing databases follow.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Connection,
    DateTime,
    Float,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    false,
    func,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")

PLANNED = "PLANNED"
COMMITTED = "COMMITTED"


def check_identifier(name: str, what: str) -> str:
    """Refuse anything but a plain SQL identifier: schema names end up in DDL text."""
    if not _IDENTIFIER.match(name):
        raise ValueError(
            f"invalid {what} {name!r}: expected letters, digits and '_' (max 63, not a digit first)"
        )
    return name


@dataclass(frozen=True)
class StoreTables:
    """The store's tables bound to one PostgreSQL schema."""

    schema: str
    metadata: MetaData
    schema_version: Table
    connector_registry: Table
    positions: Table
    batch_ledger: Table
    worker_leases: Table
    task_leases: Table
    backfills: Table


@lru_cache(maxsize=64)
def store_tables(schema: str) -> StoreTables:
    """Build (once per schema) the Core tables of the store in ``schema``."""
    check_identifier(schema, "offset store schema")
    md = MetaData(schema=schema)
    now = func.now()
    schema_version = Table(
        "schema_version",
        md,
        Column("version", Integer, primary_key=True),
        Column("description", Text, nullable=False),
        Column("applied_at", DateTime(timezone=True), nullable=False, server_default=now),
    )
    connector_registry = Table(
        "connector_registry",
        md,
        Column("name", String(255), primary_key=True),
        Column("kind", String(16), nullable=False),
        Column("created_at", DateTime(timezone=True), nullable=False, server_default=now),
        Column("deleted_at", DateTime(timezone=True), nullable=True),
        CheckConstraint("kind IN ('source', 'sink')", name="connector_registry_kind"),
    )
    # One row per partition a connector reads: a source partition (topic '') or a RocketMQ queue
    # ("broker-a:0") of a topic read by a sink. The position is versioned JSON (connectors.positions).
    positions = Table(
        "positions",
        md,
        Column("connector", String(255), primary_key=True),
        Column("topic", String(255), primary_key=True),
        Column("partition", Text, primary_key=True),
        Column("position", JSONB, nullable=False),
        # Last writer, for inspection and task-scoped reads; -1 when set by an admin.
        Column("task_id", Integer, nullable=False),
        Column("batch_id", BigInteger, nullable=True),
        Column("updated_at", DateTime(timezone=True), nullable=False, server_default=now),
    )
    batch_ledger = Table(
        "batch_ledger",
        md,
        Column("connector", String(255), primary_key=True),
        Column("task_id", Integer, primary_key=True),
        Column("batch_id", BigInteger, primary_key=True),
        Column("ranges", JSONB, nullable=False),
        Column("sink_state", JSONB, nullable=False),
        Column("status", String(16), nullable=False),
        Column("planned_at", DateTime(timezone=True), nullable=False, server_default=now),
        Column("committed_at", DateTime(timezone=True), nullable=True),
        Column("attempts", Integer, nullable=False, server_default=text("1")),
        CheckConstraint(f"status IN ('{PLANNED}', '{COMMITTED}')", name="batch_ledger_status"),
    )
    # Liveness (activities.leases): each worker renews its row; each task activity it runs holds a
    # row naming it, so another worker can fail the task's attempt once the lease is not renewed.
    worker_leases = Table(
        "worker_leases",
        md,
        Column("worker_id", String(64), primary_key=True),
        Column("identity", Text, nullable=False),
        Column("renewed_at", DateTime(timezone=True), nullable=False, server_default=now),
        # The worker's process (activities.processes): a worker on the same machine sees at once
        # that it ended. NULL where it cannot be checked (off Linux; workers before version 5).
        Column("machine", Text, nullable=True),
        Column("pid", Integer, nullable=True),
        Column("pid_started", BigInteger, nullable=True),
        # Seen to have ended by a worker on its machine: its tasks are lost now, not after a timeout.
        Column("ended", Boolean, nullable=False, server_default=false()),
    )
    task_leases = Table(
        "task_leases",
        md,
        # Temporal's token of the attempt: failing it never touches a later attempt of the task.
        Column("task_token", LargeBinary, primary_key=True),
        Column("worker_id", String(64), nullable=False, index=True),
        Column("connector", String(255), nullable=False),
        Column("task_id", Integer, nullable=False),
        Column("workflow_id", Text, nullable=False),
        Column("run_id", Text, nullable=False),
        # The connector's task.heartbeat.timeout.s: how long the worker may be silent.
        Column("timeout_s", Float, nullable=False),
        Column("started_at", DateTime(timezone=True), nullable=False, server_default=now),
    )
    # Backfill requests (connectors.backfills): a source task reads its connector's before each
    # planning; their progress is in the snapshot partitions' positions, not here.
    backfills = Table(
        "backfills",
        md,
        Column("id", BigInteger, primary_key=True, autoincrement=True),
        Column("connector", String(255), nullable=False, index=True),
        Column("tables", JSONB, nullable=False),
        Column("condition", Text, nullable=False),
        Column("requested_at", DateTime(timezone=True), nullable=False, server_default=now),
        Column("cancelled_at", DateTime(timezone=True), nullable=True),
    )
    return StoreTables(
        schema,
        md,
        schema_version,
        connector_registry,
        positions,
        batch_ledger,
        worker_leases,
        task_leases,
        backfills,
    )


def _legacy_position_tables(schema: str) -> tuple[Table, Table]:
    """The two integer position tables of store versions 1-2, for migrations only."""
    md = MetaData(schema=schema)
    now = func.now()
    source_offsets = Table(
        "source_offsets",
        md,
        Column("connector", String(255), primary_key=True),
        Column("partition", Text, primary_key=True),
        Column("position", BigInteger, nullable=False),
        Column("task_id", Integer, nullable=False),
        Column("batch_id", BigInteger, nullable=True),
        Column("updated_at", DateTime(timezone=True), nullable=False, server_default=now),
        CheckConstraint("position >= 0", name="source_offsets_position"),
    )
    sink_positions = Table(
        "sink_positions",
        md,
        Column("connector", String(255), primary_key=True),
        Column("topic", String(255), primary_key=True),
        Column("queue", String(255), primary_key=True),
        Column("position", BigInteger, nullable=False),
        Column("task_id", Integer, nullable=False),
        Column("batch_id", BigInteger, nullable=True),
        Column("updated_at", DateTime(timezone=True), nullable=False, server_default=now),
        CheckConstraint("position >= 0", name="sink_positions_position"),
    )
    return source_offsets, sink_positions


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Callable[[Connection, StoreTables], None]


def _v1_initial(conn: Connection, tables: StoreTables) -> None:
    legacy = _legacy_position_tables(tables.schema)
    for table in (tables.connector_registry, *legacy, tables.batch_ledger):
        table.create(conn, checkfirst=True)


def _v2_ledger_status_index(conn: Connection, tables: StoreTables) -> None:
    # pending_plan() and prune_ledger() look batches up by status per task.
    conn.execute(
        text(
            f'CREATE INDEX IF NOT EXISTS batch_ledger_status_idx ON "{tables.schema}".batch_ledger '
            "(connector, task_id, status, batch_id)"
        )
    )


def _v3_one_positions_table(conn: Connection, tables: StoreTables) -> None:
    """Source offsets and sink positions (integers) become rows of one table of JSON positions.

    Existing positions are kept: an integer n becomes ``{"v": 1, "key": [n]}``, the same position.
    Ledger ranges keep their integer bounds, which ``PartitionRange.from_json`` still reads.
    """
    q = f'"{tables.schema}"'
    tables.positions.create(conn, checkfirst=True)
    conn.execute(
        text(
            f"INSERT INTO {q}.positions "
            "(connector, topic, partition, position, task_id, batch_id, updated_at) "
            "SELECT connector, '', partition, "
            "jsonb_build_object('v', 1, 'key', jsonb_build_array(position)), "
            f"task_id, batch_id, updated_at FROM {q}.source_offsets "
            "UNION ALL SELECT connector, topic, queue, "
            "jsonb_build_object('v', 1, 'key', jsonb_build_array(position)), task_id, batch_id, updated_at "
            f"FROM {q}.sink_positions"
        )
    )
    conn.execute(text(f"DROP TABLE {q}.source_offsets, {q}.sink_positions"))


def _v4_leases(conn: Connection, tables: StoreTables) -> None:
    tables.worker_leases.create(conn, checkfirst=True)
    tables.task_leases.create(conn, checkfirst=True)


def _v5_worker_processes(conn: Connection, tables: StoreTables) -> None:
    # A store first migrated by this release has the columns already (version 4 creates the table).
    conn.execute(
        text(
            f'ALTER TABLE "{tables.schema}".worker_leases ADD COLUMN IF NOT EXISTS machine text, '
            "ADD COLUMN IF NOT EXISTS pid integer, ADD COLUMN IF NOT EXISTS pid_started bigint, "
            "ADD COLUMN IF NOT EXISTS ended boolean NOT NULL DEFAULT false"
        )
    )


def _v6_backfills(conn: Connection, tables: StoreTables) -> None:
    tables.backfills.create(conn, checkfirst=True)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "offsets, sink positions, batch ledger, connector registry", _v1_initial),
    Migration(2, "ledger index by status", _v2_ledger_status_index),
    Migration(3, "one table of versioned JSON positions", _v3_one_positions_table),
    Migration(4, "worker and task leases", _v4_leases),
    Migration(5, "the process of each worker lease", _v5_worker_processes),
    Migration(6, "backfill requests", _v6_backfills),
)


def advisory_lock_key(schema: str) -> int:
    """A stable signed 64-bit key per schema (Python's hash() is salted per process)."""
    digest = hashlib.blake2b(f"sluice.store.migrate:{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def migrate(conn: Connection, schema: str, migrations: tuple[Migration, ...] = MIGRATIONS) -> list[int]:
    """Apply the missing migrations inside the caller's transaction; return the versions applied.

    The transaction-scoped advisory lock is taken first, before even ``CREATE SCHEMA IF NOT
    EXISTS`` (which itself races on the catalog's unique index), so concurrent callers run one
    after the other; the second sees the first's versions and applies nothing.
    """
    tables = store_tables(schema)
    conn.execute(select(func.pg_advisory_xact_lock(advisory_lock_key(schema))))
    conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
    tables.schema_version.create(conn, checkfirst=True)
    current = conn.execute(select(func.coalesce(func.max(tables.schema_version.c.version), 0))).scalar_one()
    applied: list[int] = []
    for migration in sorted(migrations, key=lambda m: m.version):
        if migration.version <= current:
            continue
        migration.apply(conn, tables)
        conn.execute(
            tables.schema_version.insert().values(
                version=migration.version, description=migration.description
            )
        )
        applied.append(migration.version)
    return applied


def current_version(conn: Connection, schema: str) -> int:
    """The schema's migration version, 0 when the store was never migrated."""
    tables = store_tables(schema)
    exists = conn.execute(
        text("SELECT to_regclass(:name) IS NOT NULL"), {"name": f'"{schema}".schema_version'}
    ).scalar_one()
    if not exists:
        return 0
    return int(conn.execute(select(func.coalesce(func.max(tables.schema_version.c.version), 0))).scalar_one())
