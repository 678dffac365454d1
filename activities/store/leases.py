"""Worker and task leases in the store: the SQL behind activities.leases.

A worker renews one row (``worker_leases``) every second; each task activity it runs
holds a row (``task_leases``) naming the worker, the attempt's Temporal task token and the
connector's ``task.heartbeat.timeout.s``. A task whose worker has not renewed for that long, or
whose worker a worker on the same machine saw end (``mark_ended``), is lost: ``claim_lost``
deletes its row and returns it, in the same statement, so of several workers looking at once
exactly one fails the attempt. Every time is the database's, so workers' clocks
never matter.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sqlalchemy import Connection, delete, select, text, update
from sqlalchemy.dialects.postgresql import insert

from sluice.activities.processes import Process
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
    #: seconds since that worker last renewed; None when its process was seen to end
    silent_s: float | None


def renew(
    conn: Connection, tables: StoreTables, worker_id: str, identity: str, process: Process | None
) -> None:
    """The worker is alive now (``process``: where it runs, if others on its machine can check)."""
    t = tables.worker_leases
    where = {} if process is None else {"machine": process.machine, "pid": process.pid,
                                        "pid_started": process.started}  # fmt: skip
    stmt = insert(t).values(worker_id=worker_id, identity=identity, **where)
    conn.execute(
        stmt.on_conflict_do_update(index_elements=[t.c.worker_id], set_={"renewed_at": text("now()")})
    )


def others_on(conn: Connection, tables: StoreTables, worker_id: str, machine: str) -> dict[str, Process]:
    """The processes of the other workers recorded on ``machine`` and not yet seen to end."""
    t = tables.worker_leases
    rows = conn.execute(
        select(t.c.worker_id, t.c.pid, t.c.pid_started).where(
            t.c.machine == machine, t.c.worker_id != worker_id, t.c.ended.is_(False)
        )
    ).all()
    return {row.worker_id: Process(machine, row.pid, row.pid_started) for row in rows}


def mark_ended(conn: Connection, tables: StoreTables, worker_ids: list[str]) -> None:
    """These workers' processes ended: their tasks are lost now, whatever their timeout."""
    t = tables.worker_leases
    conn.execute(update(t).where(t.c.worker_id.in_(worker_ids)).values(ended=True))


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
    conn: Connection, tables: StoreTables, worker_id: str, floor_s: float, most: int, *, steady: bool = True
) -> list[LostTask]:
    """Delete and return the leases of up to ``most`` tasks (those of ended workers, then the
    longest lost) whose worker (not ``worker_id``) was seen to end or, if ``steady``, has been
    silent for longer than the task's timeout, or ``floor_s`` if that is longer (a timeout shorter
    than a few renewals would claim live workers' tasks); forget dead workers with no task left.
    Leases another claimer holds locked are skipped, not waited for."""
    q = f'"{tables.schema}"'
    rows = conn.execute(
        text(
            f"WITH lost AS (SELECT t.task_token FROM {q}.task_leases AS t "
            f"JOIN {q}.worker_leases AS w ON t.worker_id = w.worker_id "
            "WHERE w.worker_id <> :me AND (w.ended OR (:steady "
            "AND w.renewed_at < now() - make_interval(secs => greatest(t.timeout_s, :floor)))) "
            "ORDER BY w.ended DESC, w.renewed_at, t.started_at LIMIT :most FOR UPDATE OF t SKIP LOCKED) "
            f"DELETE FROM {q}.task_leases AS t USING lost, {q}.worker_leases AS w "
            "WHERE t.task_token = lost.task_token AND w.worker_id = t.worker_id "
            "RETURNING t.task_token, t.connector, t.task_id, t.workflow_id, t.run_id, w.identity, "
            "CASE WHEN w.ended THEN NULL ELSE extract(epoch FROM now() - w.renewed_at) END AS silent_s"
        ),
        {"me": worker_id, "floor": floor_s, "most": most, "steady": steady},
    ).all()
    conn.execute(
        text(
            f"DELETE FROM {q}.worker_leases AS w WHERE w.worker_id <> :me "
            "AND (w.ended OR w.renewed_at < now() - make_interval(secs => :forget)) "
            f"AND NOT EXISTS (SELECT 1 FROM {q}.task_leases AS t WHERE t.worker_id = w.worker_id)"
        ),
        {"me": worker_id, "forget": FORGET_WORKER_S},
    )
    return [
        LostTask(TaskAttempt(bytes(r[0]), *r[1:5]), r[5], None if r[6] is None else float(r[6])) for r in rows
    ]
