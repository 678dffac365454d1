"""RocketMQ offset planning: positions from the real broker, start policies, the data-loss check.

The broker cannot be made to drop messages by retention within a test, so "below the min offset" is
covered by table cases of ``check_data_loss`` (the same function the reader calls on executors);
the reader's "beyond the max offset" path runs against the real broker in test_spark_source.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from sluice.activities.sink_runner import QueueView
from sluice.connectors.model import BatchPlan, DataLossPolicy, PartitionRange
from sluice.connectors.planner import PlanRequest, plan_next
from sluice.connectors.planning import AtTimestamp, Earliest, Latest, SpecificPositions
from sluice.connectors.rocketmq.errors import TopicNotFoundError
from sluice.connectors.rocketmq.offsets import (
    DataLossError,
    check_data_loss,
    earliest_offsets,
    latest_offsets,
    resolve_start_policy,
)
from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.connectors.rocketmq.values import MessageQueue, OutgoingMessage
from sluice.deploy.local.config import StackConfig
from tests.store.helpers import offsets


@pytest.fixture(scope="module")
def client(stack_config: StackConfig) -> Iterator[SyncRocketMQClient]:
    with SyncRocketMQClient(stack_config.namesrv_address) as c:
        yield c


def _send(client: SyncRocketMQClient, topic: str, queue_id: int, bodies: list[bytes]) -> None:
    client.send_batch(MessageQueue(topic, "broker-a", queue_id), [OutgoingMessage(body=b) for b in bodies])


def _await_latest(client: SyncRocketMQClient, topic: str, expected: dict[str, int]) -> None:
    """The broker acknowledges a send before its consume queue (which max offset reads) is
    dispatched, ~150 ms later under load; wait boundedly for it, then require exact values."""
    deadline = time.monotonic() + 5
    while latest_offsets(client, topic) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    assert latest_offsets(client, topic) == expected


def test_latest_and_earliest_follow_writes(client: SyncRocketMQClient, topic_name: str) -> None:
    keys = [f"broker-a:{i}" for i in range(4)]
    assert earliest_offsets(client, topic_name) == dict.fromkeys(keys, 0)
    assert latest_offsets(client, topic_name) == dict.fromkeys(keys, 0)
    _send(client, topic_name, 0, [b"a%d" % i for i in range(5)])
    _send(client, topic_name, 2, [b"b%d" % i for i in range(3)])
    expected = {"broker-a:0": 5, "broker-a:1": 0, "broker-a:2": 3, "broker-a:3": 0}
    _await_latest(client, topic_name, expected)
    assert earliest_offsets(client, topic_name) == dict.fromkeys(keys, 0)


def test_unknown_topic_is_named(client: SyncRocketMQClient) -> None:
    with pytest.raises(TopicNotFoundError, match="T_does_not_exist_x"):
        latest_offsets(client, "T_does_not_exist_x")


def test_start_policies_resolve_against_the_broker(client: SyncRocketMQClient, topic_name: str) -> None:
    _send(client, topic_name, 1, [b"old-%d" % i for i in range(4)])
    time.sleep(0.05)  # store timestamps have millisecond resolution: separate the two sends
    boundary_ms = int(time.time() * 1000)
    time.sleep(0.05)
    _send(client, topic_name, 1, [b"new-%d" % i for i in range(3)])
    _send(client, topic_name, 3, [b"x"])

    assert offsets(resolve_start_policy(client, topic_name, Earliest())) == {
        f"broker-a:{i}": 0 for i in range(4)
    }
    assert offsets(resolve_start_policy(client, topic_name, Latest())) == {
        "broker-a:0": 0,
        "broker-a:1": 7,
        "broker-a:2": 0,
        "broker-a:3": 1,
    }
    at = offsets(
        resolve_start_policy(client, topic_name, AtTimestamp(boundary_ms), partitions=["broker-a:1"])
    )
    assert at == {"broker-a:1": 4}
    future = offsets(resolve_start_policy(client, topic_name, AtTimestamp(boundary_ms + 3_600_000)))
    assert future == {"broker-a:0": 0, "broker-a:1": 7, "broker-a:2": 0, "broker-a:3": 1}
    assert offsets(resolve_start_policy(client, topic_name, AtTimestamp(0)))["broker-a:1"] == 0
    assert offsets(
        resolve_start_policy(client, topic_name, SpecificPositions({"broker-a:1": 2}, default="latest"))
    ) == {
        "broker-a:0": 0,
        "broker-a:1": 2,
        "broker-a:2": 0,
        "broker-a:3": 1,
    }


def test_start_policy_names_missing_queue(client: SyncRocketMQClient, topic_name: str) -> None:
    with pytest.raises(Exception, match="broker-a:9"):
        offsets(resolve_start_policy(client, topic_name, Earliest(), partitions=["broker-a:9"]))


def test_plan_from_broker_positions_with_data_loss_check(client: SyncRocketMQClient, topic_name: str) -> None:
    """The driver-side sequence a task runs: resolve, plan, check, all from real positions."""
    _send(client, topic_name, 0, [b"m%d" % i for i in range(10)])
    _await_latest(client, topic_name, {"broker-a:0": 10, "broker-a:1": 0, "broker-a:2": 0, "broker-a:3": 0})
    view = QueueView(client, [topic_name], task_id=0, task_count=1)
    plan = plan_next(PlanRequest("c", 0, 0, {}, max_units=6), view).plan
    assert plan is not None
    checked = check_data_loss(plan.ranges, earliest_offsets(client, topic_name), DataLossPolicy.FAIL)
    assert checked == (PartitionRange("broker-a:0", 0, 6, topic_name),)


def R(p: str, s: int, e: int, t: str = "T") -> PartitionRange:
    return PartitionRange(partition=p, start=s, end=e, topic=t)


MINS = {"q:0": 10, "q:1": 0}

# name, ranges, max_offsets, SKIP result, FAIL message (None: FAIL returns the same as SKIP)
DATA_LOSS_CASES: list[
    tuple[str, list[PartitionRange], dict[str, int] | None, tuple[PartitionRange, ...], str | None]
] = [
    ("all retained", [R("q:0", 10, 20), R("q:1", 0, 5)], None, (R("q:0", 10, 20), R("q:1", 0, 5)), None),
    (
        "start below min",
        [R("q:0", 4, 20)],
        None,
        (R("q:0", 10, 20),),
        r"queue q:0: \[4, 10\) was removed",
    ),
    ("whole range below min", [R("q:0", 2, 6)], None, (R("q:0", 6, 6),), r"\[2, 6\) was removed"),
    ("empty range below min is fine", [R("q:0", 3, 3)], None, (R("q:0", 3, 3),), None),
    ("vanished queue", [R("q:7", 0, 5)], None, (R("q:7", 5, 5),), r"queue q:7: \[0, 5\) is gone"),
    ("end beyond max", [R("q:1", 0, 9)], {"q:1": 6}, (R("q:1", 0, 6),), r"\[6, 9\) is missing"),
    (
        "range entirely beyond max",
        [R("q:1", 8, 9)],
        {"q:1": 6},
        (R("q:1", 8, 8),),
        r"\[8, 9\) is missing",
    ),
    ("end at max is fine", [R("q:1", 0, 6)], {"q:1": 6}, (R("q:1", 0, 6),), None),
    ("below min and beyond max", [R("q:0", 5, 30)], {"q:0": 25}, (R("q:0", 10, 25),), r"\[5, 10\)"),
]


@pytest.mark.parametrize(
    ("name", "ranges", "maxes", "skipped", "fail_message"),
    DATA_LOSS_CASES,
    ids=[c[0] for c in DATA_LOSS_CASES],
)
def test_check_data_loss(
    name: str,
    ranges: list[PartitionRange],
    maxes: dict[str, int] | None,
    skipped: tuple[PartitionRange, ...],
    fail_message: str | None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="sluice.connectors.data_loss"):
        assert check_data_loss(ranges, MINS, DataLossPolicy.SKIP, max_offsets=maxes) == skipped
    if fail_message is None:
        assert check_data_loss(ranges, MINS, DataLossPolicy.FAIL, max_offsets=maxes) == skipped
        assert not caplog.records
        return
    assert caplog.records and "skipping lost data in topic 'T'" in caplog.records[0].getMessage()
    with pytest.raises(DataLossError, match=fail_message) as info:
        check_data_loss(ranges, MINS, DataLossPolicy.FAIL, max_offsets=maxes)
    assert "topic 'T'" in str(info.value)


def test_check_data_loss_on_a_plan_keeps_plan_ends() -> None:
    plan = BatchPlan("c", 0, 3, (R("q:0", 0, 15), R("q:1", 0, 2)))
    checked = check_data_loss(plan.ranges, MINS, DataLossPolicy.SKIP)
    assert [r.end.offset for r in checked] == [15, 2]
    assert checked[0].start.offset == 10
