"""Backfill requests in the store (connectors.backfills): made by ``sluice connector backfill``,
read by the connector's source tasks before each planning, cancelled by ``--cancel``."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, func, insert, select, update

from sluice.activities.store.schema import StoreTables
from sluice.connectors.backfills import Backfill


def add(conn: Connection, t: StoreTables, connector: str, tables: Sequence[str], condition: str) -> Backfill:
    row = conn.execute(
        insert(t.backfills)
        .values(connector=connector, tables=list(tables), condition=condition)
        .returning(t.backfills)
    ).one()
    return _request(row)


def listed(conn: Connection, t: StoreTables, connector: str) -> list[Backfill]:
    """The connector's requests, oldest first."""
    b = t.backfills
    return [_request(r) for r in conn.execute(select(b).where(b.c.connector == connector).order_by(b.c.id))]


def cancel(conn: Connection, t: StoreTables, connector: str, request: int | None) -> list[int]:
    """Cancel request ``request`` (None: every one not cancelled yet); the ids cancelled now."""
    b = t.backfills
    q = update(b).where(b.c.connector == connector, b.c.cancelled_at.is_(None))
    if request is not None:
        q = q.where(b.c.id == request)
    return sorted(int(r.id) for r in conn.execute(q.values(cancelled_at=func.now()).returning(b.c.id)))


def forget(conn: Connection, t: StoreTables, connector: str) -> None:
    """A deleted connector's requests (a connector created again under its name starts clean)."""
    conn.execute(t.backfills.delete().where(t.backfills.c.connector == connector))


def _request(row: object) -> Backfill:
    r = row._mapping  # type: ignore[attr-defined]
    return Backfill(
        id=int(r["id"]),
        tables=tuple(r["tables"]),
        condition=str(r["condition"]),
        requested_ms=int(r["requested_at"].timestamp() * 1000),
        cancelled=r["cancelled_at"] is not None,
    )
