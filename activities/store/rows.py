"""Row-level SQL of the offset store: position upserts, locked reads, registry, key formats.

Kept apart from :mod:`activities.store.offsets` so the store class reads as the protocol
(record, commit, admin) while the statements it runs live here. Every function takes the caller's
connection: none of them opens or ends a transaction.
"""

from __future__ import annotations

import re

from sqlalchemy import Connection, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from activities.store.errors import batch_ref
from activities.store.schema import StoreTables
from connectors.model import BatchPlan, PartitionRange

# RocketMQ topic names never contain '/', so the first '/' splits "topic/broker-a:0".
SINK_KEY = re.compile(r"^(?P<topic>[^/]+)/(?P<queue>[^/]+:\d+)$")


def range_key(r: PartitionRange) -> str:
    """The position key of a range, as in ``BatchPlan.end_positions()``."""
    return f"{r.topic}/{r.partition}" if r.topic else r.partition


def fmt_ranges(ranges: tuple[PartitionRange, ...]) -> str:
    return ", ".join(f"{range_key(r)}[{r.start},{r.end})" for r in ranges) or "(none)"


def plan_kind(plan: BatchPlan) -> str | None:
    """'sink' when the ranges are topic queues, 'source' otherwise, None for a plan without ranges."""
    with_topic = {bool(r.topic) for r in plan.ranges}
    if not with_topic:
        return None
    if len(with_topic) > 1:
        ref = batch_ref(plan.connector, plan.task_id, plan.batch_id)
        raise ValueError(f"{ref}: ranges mix topic queues and source partitions")
    return "sink" if True in with_topic else "source"


def split_sink_key(connector: str, key: str) -> tuple[str, str]:
    m = SINK_KEY.match(key)
    if not m:
        raise ValueError(
            f"connector {connector!r} is a sink: position key {key!r} must be '<topic>/<broker>:<queue_id>'"
        )
    return m["topic"], m["queue"]


def registered_kind(conn: Connection, t: StoreTables, connector: str) -> str | None:
    reg = t.connector_registry
    kind = conn.execute(select(reg.c.kind).where(reg.c.name == connector)).scalar_one_or_none()
    return str(kind) if kind is not None else None


def register(conn: Connection, t: StoreTables, connector: str, kind: str) -> None:
    """Insert the connector, or revive it if it was deleted; the first kind recorded stays."""
    reg = t.connector_registry
    stmt = pg_insert(reg).values(name=connector, kind=kind)
    conn.execute(
        stmt.on_conflict_do_update(
            index_elements=[reg.c.name],
            set_={"deleted_at": None, "kind": kind},
            where=reg.c.deleted_at.is_not(None),
        )
    )


def locked_positions(conn: Connection, t: StoreTables, plan: BatchPlan) -> dict[str, int]:
    """Stored positions of the plan's partitions, row-locked until the transaction ends."""
    so, sp = t.source_offsets, t.sink_positions
    parts = [r.partition for r in plan.ranges if not r.topic]
    topics = sorted({r.topic for r in plan.ranges if r.topic})
    out: dict[str, int] = {}
    if parts:
        q = select(so.c.partition, so.c.position).where(
            so.c.connector == plan.connector, so.c.partition.in_(parts)
        )
        out.update({row.partition: int(row.position) for row in conn.execute(q.with_for_update())})
    if topics:
        q2 = select(sp.c.topic, sp.c.queue, sp.c.position).where(
            sp.c.connector == plan.connector, sp.c.topic.in_(topics)
        )
        out.update(
            {f"{row.topic}/{row.queue}": int(row.position) for row in conn.execute(q2.with_for_update())}
        )
    return out


def upsert_position(
    conn: Connection,
    t: StoreTables,
    connector: str,
    r: PartitionRange,
    task: int,
    batch: int | None,
    *,
    guarded: bool,
) -> bool:
    """Set the position of ``r``'s partition to ``r.end``; return False if the guard refused.

    ``guarded`` adds ``WHERE stored <= new`` to the update, so even a writer racing past the
    caller's locked check can never move a position backwards.
    """
    values = {"position": r.end, "task_id": task, "batch_id": batch}
    if r.topic:
        table, keys = t.sink_positions, {"connector": connector, "topic": r.topic, "queue": r.partition}
    else:
        table, keys = t.source_offsets, {"connector": connector, "partition": r.partition}
    stmt = pg_insert(table).values(**keys, **values)
    stmt = stmt.on_conflict_do_update(
        index_elements=[table.c[k] for k in keys],
        set_={**values, "updated_at": func.now()},
        where=(table.c.position <= r.end) if guarded else None,
    )
    return conn.execute(stmt.returning(table.c.position)).first() is not None
