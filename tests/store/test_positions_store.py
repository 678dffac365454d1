"""Composite positions in the real store, and the upgrade from integer positions (migration 3)."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from sluice.activities.store import OffsetStore, PositionRegressionError
from sluice.activities.store.schema import MIGRATIONS, migrate
from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.positions import PartitionKey, Position, PositionFormatError
from sluice.deploy.local.config import StackConfig


def test_upgrade_from_integer_positions_keeps_positions_and_pending_plans(
    stack_config: StackConfig, pg_engine: Engine, fresh_schema: str
) -> None:
    """A store written by the previous release (migrations 1-2, integer tables, integer ledger
    ranges) migrates in place: every position and the uncommitted plan survive unchanged."""
    with pg_engine.begin() as conn:
        migrate(conn, fresh_schema, MIGRATIONS[:2])
        s = f'"{fresh_schema}"'
        conn.execute(
            text(
                f"INSERT INTO {s}.source_offsets (connector, partition, position, task_id, batch_id) "
                "VALUES ('src', '/data/a.txt', 1200, 0, 4)"
            )
        )
        conn.execute(
            text(
                f"INSERT INTO {s}.sink_positions (connector, topic, queue, position, task_id, batch_id) "
                "VALUES ('snk', 'orders', 'broker-a:1', 77, 1, 9)"
            )
        )
        conn.execute(
            text(
                f"INSERT INTO {s}.batch_ledger (connector, task_id, batch_id, ranges, sink_state, status) "
                "VALUES ('snk', 1, 10, "
                """'[{"topic": "orders", "partition": "broker-a:1", "start": 77, "end": 90}]', """
                """'{"file.length": "5"}', 'PLANNED')"""
            )
        )
    store = OffsetStore(stack_config.database_url, schema=fresh_schema, engine=pg_engine)
    store.migrate()
    assert store.committed_positions("src") == {PartitionKey("/data/a.txt"): Position((1200,))}
    assert store.committed_positions("snk") == {PartitionKey("broker-a:1", "orders"): Position((77,))}
    pending = store.pending_plan("snk", 1)
    assert pending == BatchPlan(
        "snk", 1, 10, (PartitionRange("broker-a:1", 77, 90, "orders"),), {"file.length": "5"}
    )
    store.commit(pending)  # the old plan commits on the new code
    assert store.committed_positions("snk") == {PartitionKey("broker-a:1", "orders"): Position((90,))}
    with pg_engine.connect() as conn:
        old = conn.execute(text(f"SELECT to_regclass('\"{fresh_schema}\".source_offsets')")).scalar()
    assert old is None


def test_composite_positions_round_trip_and_never_move_backwards(store: OffsetStore) -> None:
    def plan(batch: int, start: tuple[str, int], end: tuple[str, int]) -> BatchPlan:
        rng = PartitionRange("orders", Position(start), Position(end, (("gtid", f"g-{batch}"),)))
        return BatchPlan("jdbc", 0, batch, (rng,))

    first = plan(0, ("2024-01-01T00:00:00", 0), ("2024-01-02T10:00:00", 17))
    store.record_plan(first)
    store.commit(first)
    assert store.pending_plan("jdbc", 0) is None
    (stored,) = store.committed_positions("jdbc").values()
    assert stored == Position(("2024-01-02T10:00:00", 17), (("gtid", "g-0"),))

    second = plan(1, ("2024-01-02T10:00:00", 17), ("2024-01-02T10:00:00", 250))
    store.record_plan(second)
    assert store.pending_plan("jdbc", 0) == second
    store.commit(second)
    assert store.committed_positions("jdbc")[PartitionKey("orders")].key == ("2024-01-02T10:00:00", 250)

    stale = plan(2, ("2024-01-01T00:00:00", 0), ("2024-01-02T10:00:00", 100))
    store.record_plan(stale)
    with pytest.raises(PositionRegressionError, match=r"orders: stored \(2024-01-02T10:00:00, 250\)"):
        store.commit(stale)


def test_moved_positions_may_go_backwards_without_touching_the_ledger(store: OffsetStore) -> None:
    """What the planner does for a replaced file under file.replaced=restart or data.loss=skip."""
    first = BatchPlan("files", 0, 0, (PartitionRange("/in.txt", 0, 500),))
    store.record_plan(first)
    store.commit(first)
    store.move_positions("files", 0, {PartitionKey("/in.txt"): Position.of(0, id="new-file")})
    assert store.committed_positions("files") == {PartitionKey("/in.txt"): Position.of(0, id="new-file")}
    assert store.last_batch_id("files", 0) == 0


def test_positions_of_an_unknown_version_are_a_clear_error(store: OffsetStore, pg_engine: Engine) -> None:
    with pg_engine.begin() as conn:
        conn.execute(
            text(
                f'INSERT INTO "{store.schema}".positions (connector, topic, partition, position, task_id) '
                """VALUES ('future', '', 'p', '{"v": 9, "key": [1]}', 0)"""
            )
        )
    with pytest.raises(PositionFormatError, match="connector 'future' position of p: position version 9"):
        store.committed_positions("future")
