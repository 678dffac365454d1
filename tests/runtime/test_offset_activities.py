"""The offset activities (activities/offsets.py) against the real offset store: what ``read``
returns, ``alter`` takes back unchanged; ``null`` forgets a partition; reset forgets all and drops
uncommitted plans; a malformed request changes nothing."""

from __future__ import annotations

import dataclasses

import pytest
from temporalio.exceptions import ApplicationError

from sluice.activities.context import RuntimeContext
from sluice.activities.offsets import OFFSETS_ERROR, OffsetActivities
from sluice.activities.store import OffsetStore
from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.positions import PartitionKey, Position
from sluice.deploy.local.config import StackConfig
from sluice.worker.settings import settings
from sluice.workflows.types import OffsetsChange


@pytest.fixture
def acts(stack_config: StackConfig, fresh_schema: str) -> OffsetActivities:
    runtime = dataclasses.replace(
        settings().runtime, database_url=stack_config.database_url, store_schema=fresh_schema
    )
    return OffsetActivities(RuntimeContext(runtime))


def test_read_alter_reset_round_trip(acts: OffsetActivities) -> None:
    store: OffsetStore = acts.ctx.store
    src = PartitionKey("/data/in.txt")
    store.set_positions("c1", {src: Position.of(40, file="dev:ino")})
    store.set_positions("c2", {"/other": 9})  # another connector is never touched
    got = acts.read("c1")
    assert got == [
        {
            "partition": {"partition": "/data/in.txt"},
            "offset": {"position": {"v": 1, "key": [40], "meta": {"file": "dev:ino"}}},
        }
    ]

    got[0]["offset"]["position"]["key"] = [10]
    acts.alter(
        OffsetsChange("c1", [*got, {"partition": {"partition": "/data/b.txt"}, "offset": {"position": 3}}])
    )
    assert store.committed_positions("c1") == {
        src: Position.of(10, file="dev:ino"),
        PartitionKey("/data/b.txt"): Position.of(3),
    }
    acts.alter(OffsetsChange("c1", [{"partition": {"partition": "/data/b.txt"}, "offset": None}]))
    assert list(store.committed_positions("c1")) == [src]

    at = Position.of(10, file="dev:ino")
    plan = BatchPlan("c1", 0, 0, (PartitionRange(src.name, at, at.moved_to(20)),))
    store.record_plan(plan)
    acts.reset("c1")
    assert acts.read("c1") == [] and store.pending_plan("c1", 0) is None
    assert store.committed_positions("c2") == {PartitionKey("/other"): Position.of(9)}


def test_malformed_or_wrong_kind_changes_nothing(acts: OffsetActivities) -> None:
    store: OffsetStore = acts.ctx.store
    queue = PartitionKey("broker-a:0", "T")
    store.set_positions("sink", {queue: 5})
    before = store.committed_positions("sink")
    bad = [
        [
            {"partition": {"partition": "broker-a:0", "topic": "T"}, "offset": {"position": 1}},
            {"partition": 3, "offset": None},
        ],
        [{"partition": {"partition": "no-topic"}, "offset": {"position": 1}}],  # a sink's key needs its topic
    ]
    for offsets in bad:
        with pytest.raises(ApplicationError) as err:
            acts.alter(OffsetsChange("sink", offsets))
        assert (
            err.value.type == OFFSETS_ERROR
            and "connector" in err.value.message
            and "sink" in err.value.message
        )
        assert err.value.non_retryable
    assert store.committed_positions("sink") == before
