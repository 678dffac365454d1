"""Worker and task leases in the store: the SQL behind activities.leases.

A worker renews one row (``worker_leases``) every second; each task activity it runs
holds a row (``task_leases``) naming the worker, the attempt's Temporal task token and the
connector's ``task.heartbeat.timeout.s``. A task whose worker has not renewed for that long is
lost: ``claim_lost`` deletes its row and returns it, in the same statement, so of several workers
looking at once exactly one fails the attempt. Every time is the database's, so workers' clocks
never matter.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sqlalchemy import Connection, delete, text
from sqlalchemy.dialects.postgresql import insert

from sluice.activities.store.schema import StoreTables

#: A dead worker's row, its tasks all claimed, is deleted once it is this old (a live one renews).
FORGET_WORKER_S = 60


@dataclass(frozen=True)
class TaskAttempt:
    """One attempt of a task activity, as its lease names it."""

    #: Temporal's token of the attempt: failing it never touches a later attempt of the task
    task_token: bytes
    connector: str
    task_id: int
    #: the task's workflow run: its next workflow task skips the lost worker's sticky queue
    workflow_id: str
    run_id: str


@dataclass(frozen=True)
class LostTask:
    """A task attempt whose worker stopped renewing its lease."""

    attempt: TaskAttempt
    #: the lost worker's Temporal identity (``pid@host``)
    worker: str
    #: seconds since that worker last renewed
    silent_s: float


def renew(conn: Connection, tables: StoreTables, worker_id: str, identity: str) -> None:
    """The worker is alive now."""
    t = tables.worker_leases
    stmt = insert(t).values(worker_id=worker_id, identity=identity)
    conn.execute(
        stmt.on_conflict_do_update(index_elements=[t.c.worker_id], set_={"renewed_at": text("now()")})
    )


def hold(
    conn: Connection, tables: StoreTables, worker_id: str, attempt: TaskAttempt, timeout_s: float
) -> None:
    """``attempt`` runs on ``worker_id`` and is lost ``timeout_s`` after the worker's last renewal."""
    conn.execute(
        tables.task_leases.insert().values(worker_id=worker_id, timeout_s=timeout_s, **asdict(attempt))
    )


def release(conn: Connection, tables: StoreTables, task_token: bytes) -> None:
    """The attempt ended on its own worker (done, failed, stopped)."""
    conn.execute(delete(tables.task_leases).where(tables.task_leases.c.task_token == task_token))


def leave(conn: Connection, tables: StoreTables, worker_id: str) -> None:
    """The worker stops: nothing of it is left to claim."""
    conn.execute(delete(tables.task_leases).where(tables.task_leases.c.worker_id == worker_id))
    conn.execute(delete(tables.worker_leases).where(tables.worker_leases.c.worker_id == worker_id))


def claim_lost(
    conn: Connection, tables: StoreTables, worker_id: str, floor_s: float, most: int
) -> list[LostTask]:
    """Delete and return the leases of up to ``most`` tasks (the longest lost first) whose worker
    (not ``worker_id``) has been silent for longer than the task's timeout, or ``floor_s`` if that
    is longer (a timeout shorter than a few renewals would claim live workers' tasks); forget dead
    workers with no task left. Leases another claimer holds locked are skipped, not waited for."""
    q = f'"{tables.schema}"'
    rows = conn.execute(
        text(
            f"WITH lost AS (SELECT t.task_token FROM {q}.task_leases AS t "
            f"JOIN {q}.worker_leases AS w ON t.worker_id = w.worker_id "
            "WHERE w.worker_id <> :me "
            "AND w.renewed_at < now() - make_interval(secs => greatest(t.timeout_s, :floor)) "
            "ORDER BY w.renewed_at, t.started_at LIMIT :most FOR UPDATE OF t SKIP LOCKED) "
            f"DELETE FROM {q}.task_leases AS t USING lost, {q}.worker_leases AS w "
            "WHERE t.task_token = lost.task_token AND w.worker_id = t.worker_id "
            "RETURNING t.task_token, t.connector, t.task_id, t.workflow_id, t.run_id, w.identity, "
            "extract(epoch FROM now() - w.renewed_at) AS silent_s"
        ),
        {"me": worker_id, "floor": floor_s, "most": most},
    ).all()
    conn.execute(
        text(
            f"DELETE FROM {q}.worker_leases AS w WHERE w.worker_id <> :me "
            "AND w.renewed_at < now() - make_interval(secs => :forget) "
            f"AND NOT EXISTS (SELECT 1 FROM {q}.task_leases AS t WHERE t.worker_id = w.worker_id)"
        ),
        {"me": worker_id, "forget": FORGET_WORKER_S},
    )
    return [LostTask(TaskAttempt(bytes(r[0]), *r[1:5]), r[5], float(r[6])) for r in rows]
