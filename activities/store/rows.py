"""Row-level SQL of the offset store: position upserts, locked reads, registry.

Kept apart from :mod:`sluice.activities.store.offsets` so the store class reads as the protocol
(record, commit, admin) while the statements it runs live here. Every function takes the caller's
connection: none of them opens or ends a transaction.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection, and_, delete, func, or_, select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from sluice.activities.store.errors import batch_ref
from sluice.activities.store.schema import StoreTables
from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.positions import PartitionKey, Position


def fmt_ranges(ranges: tuple[PartitionRange, ...]) -> str:
    return ", ".join(f"{r.key}[{r.start},{r.end})" for r in ranges) or "(none)"


def plan_kind(plan: BatchPlan) -> str | None:
    """'sink' when the ranges are topic queues, 'source' otherwise, None for a plan without ranges."""
    with_topic = {bool(r.topic) for r in plan.ranges}
    if not with_topic:
        return None
    if len(with_topic) > 1:
        ref = batch_ref(plan.connector, plan.task_id, plan.batch_id)
        raise ValueError(f"{ref}: ranges mix topic queues and source partitions")
    return "sink" if True in with_topic else "source"


def key_kind(keys: Iterable[PartitionKey]) -> str:
    return "sink" if all(k.topic for k in keys) else "source"


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


def read_positions(
    conn: Connection,
    t: StoreTables,
    connector: str,
    *,
    task_id: int | None = None,
    lock: bool = False,
    keys: Iterable[PartitionKey] | None = None,
) -> dict[PartitionKey, Position]:
    """Stored positions of a connector (optionally only some keys, row-locked until commit)."""
    pos = t.positions
    q = select(pos.c.topic, pos.c.partition, pos.c.position).where(pos.c.connector == connector)
    if task_id is not None:
        q = q.where(pos.c.task_id == task_id)
    if keys is not None:
        wanted = list(keys)
        if not wanted:
            return {}
        q = q.where(or_(*(and_(pos.c.topic == k.topic, pos.c.partition == k.name) for k in wanted)))
    if lock:
        q = q.with_for_update()
    out: dict[PartitionKey, Position] = {}
    for row in conn.execute(q):
        key = PartitionKey(row.partition, row.topic)
        out[key] = Position.from_json(row.position, where=f"connector {connector!r} position of {key}")
    return out


def upsert_position(
    conn: Connection,
    t: StoreTables,
    connector: str,
    key: PartitionKey,
    position: Position,
    task: int,
    batch: int | None,
    *,
    guarded: bool,
) -> bool:
    """Store ``position`` for ``key``; return False if the guard refused.

    ``guarded`` adds ``WHERE stored key <= new key`` (jsonb arrays compare element by element) to
    the update, so even a writer racing past the caller's locked check can never move a position
    backwards.
    """
    pos = t.positions
    values = {"position": position.to_json(), "task_id": task, "batch_id": batch}
    stmt = pg_insert(pos).values(connector=connector, topic=key.topic, partition=key.name, **values)
    stmt = stmt.on_conflict_do_update(
        index_elements=[pos.c.connector, pos.c.topic, pos.c.partition],
        set_={**values, "updated_at": func.now()},
        where=(pos.c.position["key"] <= stmt.excluded.position["key"]) if guarded else None,
    )
    return conn.execute(stmt.returning(pos.c.partition)).first() is not None


def delete_positions(
    conn: Connection, t: StoreTables, connector: str, keys: Iterable[PartitionKey] | None
) -> None:
    """Remove the connector's positions: all of them, or only ``keys``."""
    pos = t.positions
    q = delete(pos).where(pos.c.connector == connector)
    if keys is not None:
        wanted = list(keys)
        if not wanted:
            return
        q = q.where(or_(*(and_(pos.c.topic == k.topic, pos.c.partition == k.name) for k in wanted)))
    conn.execute(q)
