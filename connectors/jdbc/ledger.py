"""The sink's own batch ledger in the target database, for exactly once when the offset store is elsewhere.

When the target is not the offset store's database (a MariaDB target, another PostgreSQL
database), one transaction cannot span both. The sink then writes a row of
``sluice_sink_batches(connector, task_id, batch_id, nonce, positions, committed_at)`` in its data
transaction, and the store's positions commit right after, in the store's own transaction:

1. ``record_plan`` stores the plan PLANNED with ``sink_state = {"jdbc.nonce": <random>}``
   (``JdbcSinkTask.prepare``), before anything is written.
2. Target transaction: if this ledger already holds (connector, task, batch) with that nonce, the
   batch was applied by an earlier attempt that died before step 3 — write nothing; otherwise write
   the rows and insert the ledger row. Commit.
3. Store transaction: positions move, the batch becomes COMMITTED.

A crash between 2 and 3 leaves the plan pending; its re-run finds the ledger row and only does 3.
The nonce tells a batch of a deleted and re-created connector of the same name (batch ids start
again at 0) from the one that was applied. Rows older than :data:`KEEP_BATCHES` per task are pruned
in the same transaction.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

from sqlalchemy import text

from sluice.connectors.jdbc.urls import Dialect

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from sluice.connectors.model import BatchPlan

TABLE: Final = "sluice_sink_batches"
NONCE_KEY: Final = "jdbc.nonce"
KEEP_BATCHES: Final = 100


def create_sql(dialect: Dialect) -> str:
    stamp = (
        "timestamptz NOT NULL DEFAULT now()"
        if dialect is Dialect.POSTGRESQL
        else ("DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)")
    )
    text_type = "text" if dialect is Dialect.POSTGRESQL else "LONGTEXT"
    return (
        f"CREATE TABLE IF NOT EXISTS {TABLE} (connector VARCHAR(255) NOT NULL, task_id INTEGER NOT NULL, "
        f"batch_id BIGINT NOT NULL, nonce VARCHAR(64) NOT NULL, positions {text_type} NOT NULL, "
        f"committed_at {stamp}, PRIMARY KEY (connector, task_id, batch_id))"
    )


def ensure(conn: Connection, dialect: Dialect) -> None:
    """Create the ledger when missing (``create_once``)."""
    create_once(conn, dialect, TABLE, create_sql(dialect))


def create_once(conn: Connection, dialect: Dialect, table: str, sql: str) -> None:
    """Run ``sql`` (a ``CREATE TABLE IF NOT EXISTS table``). PostgreSQL's is not safe against
    itself: two sinks starting at once into one database both create it and one fails on
    ``pg_type``'s unique index. A transaction-scoped advisory lock makes them take turns (the
    transaction is this check and what follows it, so the wait is short)."""
    if dialect is Dialect.POSTGRESQL:
        conn.execute(text(f"SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.{table}'))"))
    conn.execute(text(sql))


def already_applied(conn: Connection, plan: BatchPlan, nonce: str) -> bool:
    """Whether an earlier attempt of this very plan committed its rows here (locks the row)."""
    key = {"c": plan.connector, "t": plan.task_id, "b": plan.batch_id}
    found = conn.execute(
        text(f"SELECT nonce FROM {TABLE} WHERE connector = :c AND task_id = :t AND batch_id = :b FOR UPDATE"),
        key,
    ).scalar_one_or_none()
    if found is None:
        return False
    if found == nonce:
        return True
    # a batch of an earlier connector with the same name: not this plan
    conn.execute(text(f"DELETE FROM {TABLE} WHERE connector = :c AND task_id = :t AND batch_id = :b"), key)
    return False


def record(conn: Connection, plan: BatchPlan, nonce: str) -> None:
    """Mark ``plan`` applied, inside the data transaction; prune old rows of the task."""
    positions = {str(k): list(p.key) for k, p in plan.end_positions().items()}
    key = {"c": plan.connector, "t": plan.task_id, "b": plan.batch_id}
    conn.execute(
        text(
            f"INSERT INTO {TABLE} (connector, task_id, batch_id, nonce, positions) "
            "VALUES (:c, :t, :b, :n, :p)"
        ),
        {**key, "n": nonce, "p": json.dumps(positions, sort_keys=True)},
    )
    conn.execute(
        text(f"DELETE FROM {TABLE} WHERE connector = :c AND task_id = :t AND batch_id < :b"),
        {**key, "b": plan.batch_id - KEEP_BATCHES},
    )
