"""jdbc-sink's barrier state in the target database, committed with the rows it decided.

A truncate that reaches the sink through several queues (``sluice.connectors.barriers``) is applied
at its first copy; the queues that have not passed their copy yet owe it, and their rows before it
are left out. That state lives in ``sluice_sink_barriers(connector, scope, state)`` in the *target*
database and is read and written in the batch's data transaction, so it commits or rolls back with
the rows (and with the positions or the ledger row): exact across batches, crashes and re-runs.

Several tasks of one connector share a scope's row. Each batch that may act on barriers locks its
scopes' rows (``SELECT … FOR UPDATE``), so one task's truncate and another task's rows from before
it cannot interleave: whichever commits second sees the other's decision.

A row is one *scope*: a barrier's source partition (``sluice.partition``: its table), whose rows it
orders. The row also holds the last offset of each queue's rows and each task's last batch. A batch
whose task or queues went back (a deleted and re-created connector of the same name, offsets reset
by hand) does not inherit another history's debts: the state starts empty, with a warning.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from sqlalchemy import text

from sluice.connectors.barriers import TopicBarriers
from sluice.connectors.jdbc import ledger
from sluice.connectors.jdbc.urls import Dialect

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from sluice.connectors.model import BatchPlan

log = logging.getLogger(__name__)

TABLE: Final = "sluice_sink_barriers"


@dataclass(frozen=True)
class Stored:
    """One scope's row (a source partition: a table): its barriers, the last offset each queue's
    rows had, and the last batch of each task, when they were committed."""

    barriers: TopicBarriers = field(default_factory=TopicBarriers)
    ends: Mapping[str, int] = field(default_factory=dict)
    batches: Mapping[str, int] = field(default_factory=dict)

    def to_text(self) -> str:
        return json.dumps(
            {
                "barriers": self.barriers.to_json(),
                "ends": dict(sorted(self.ends.items())),
                "batches": dict(sorted(self.batches.items())),
            }
        )

    @staticmethod
    def from_text(doc: str) -> Stored:
        data = json.loads(doc)
        return Stored(
            TopicBarriers.from_json(data.get("barriers") or {}),
            {str(k): int(v) for k, v in (data.get("ends") or {}).items()},
            {str(k): int(v) for k, v in (data.get("batches") or {}).items()},
        )

    def after(self, barriers: TopicBarriers, plan: BatchPlan, spans: Mapping[str, tuple[int, int]]) -> Stored:
        """The row once ``plan`` committed: ``barriers``, its queues' last offsets, its batch."""
        ends = {**self.ends, **{q: last for q, (_, last) in spans.items()}}
        return Stored(barriers, ends, {**self.batches, str(plan.task_id): plan.batch_id})

    def foreign(self, plan: BatchPlan, spans: Mapping[str, tuple[int, int]]) -> str:
        """Why this row is not the history ``plan`` continues ("" when it is): its task's batches
        or a queue's offsets went back (a re-created connector of the same name, offsets reset)."""
        done = self.batches.get(str(plan.task_id))
        if done is not None and done >= plan.batch_id:
            return f"task {plan.task_id} committed batch {done}, and this is batch {plan.batch_id}"
        back = {q: (self.ends[q], first) for q, (first, _) in spans.items() if first <= self.ends.get(q, -1)}
        return f"queues went back (queue: (last committed, first now)) {back}" if back else ""


def ensure(conn: Connection, dialect: Dialect) -> None:
    """Create the table when missing (``ledger.create_once``)."""
    body = "text" if dialect is Dialect.POSTGRESQL else "LONGTEXT"
    sql = (
        f"CREATE TABLE IF NOT EXISTS {TABLE} (connector VARCHAR(255) NOT NULL, "
        f"scope VARCHAR(255) NOT NULL, state {body} NOT NULL, PRIMARY KEY (connector, scope))"
    )
    ledger.create_once(conn, dialect, TABLE, sql)


def load(
    conn: Connection,
    dialect: Dialect,
    connector: str,
    plan: BatchPlan,
    spans: Mapping[str, Mapping[str, tuple[int, int]]],
) -> dict[str, Stored]:
    """Each scope's state, its row locked for the transaction. ``spans``: per scope, the first and
    last offset of its rows in each queue of this batch."""
    insert = "INSERT INTO" if dialect is Dialect.POSTGRESQL else "INSERT IGNORE INTO"
    conflict = " ON CONFLICT DO NOTHING" if dialect is Dialect.POSTGRESQL else ""
    out: dict[str, Stored] = {}
    for scope in sorted(spans):
        key = {"c": connector, "s": scope}
        # a row to lock, also for the first batch of a scope
        conn.execute(
            text(f"{insert} {TABLE} (connector, scope, state) VALUES (:c, :s, '{{}}'){conflict}"), key
        )
        doc = conn.execute(
            text(f"SELECT state FROM {TABLE} WHERE connector = :c AND scope = :s FOR UPDATE"), key
        ).scalar_one()
        stored = Stored.from_text(doc)
        why = stored.foreign(plan, spans[scope])
        if why:
            if stored.barriers.pending:
                log.warning(
                    "connector %s: the barrier state of %s belongs to another history (%s); it starts empty",
                    connector, scope, why,
                )  # fmt: skip
            stored = Stored()
        out[scope] = stored
    return out


def save(conn: Connection, connector: str, states: Mapping[str, Stored]) -> None:
    for scope, stored in sorted(states.items()):
        conn.execute(
            text(f"UPDATE {TABLE} SET state = :t WHERE connector = :c AND scope = :s"),
            {"c": connector, "s": scope, "t": stored.to_text()},
        )
