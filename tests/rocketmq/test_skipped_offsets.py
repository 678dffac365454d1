"""A range read never passes over offsets the broker skipped.

A queue's offsets are dense, so a pull whose next offset passes messages it did not return has
lost them: a broker does that when its consume queue points into a commit log it cannot read (a
file removed under it). A healthy broker cannot be made to imitate it, so the client's one pull
request (``_pull_body``, the wire seam) is played by a broker that skips, for a while or for good.
"""

from __future__ import annotations

import pytest

from sluice.connectors.rocketmq.client import RocketMQClient, delivered_through
from sluice.connectors.rocketmq.codec import encode_stored_message
from sluice.connectors.rocketmq.errors import SkippedOffsetsError
from sluice.connectors.rocketmq.values import Message, MessageQueue

MQ = MessageQueue("T", "broker-a", 0)
QUEUE_END = 10


def stored(offset: int) -> bytes:
    return encode_stored_message(
        Message("T", "broker-a", 0, offset, f"m{offset}".encode(), None, None, {}, 1, 2, ""),
        system_properties={"UNIQ_KEY": f"id{offset}"},
    )


class SkippingBroker:
    """Answers pulls of a 10-message queue, passing over ``skipped`` offsets for the first ``times``
    pulls that meet them (as RocketMQ answers when the commit log under them is gone)."""

    def __init__(self, skipped: range, times: int) -> None:
        self.skipped = skipped
        self.times = times
        self.pulls: list[int] = []

    async def pull_body(self, mq: MessageQueue, offset: int, max_count: int) -> tuple[bytes, int, int, int]:
        self.pulls.append(offset)
        end = min(offset + max_count, QUEUE_END)
        skipping = self.times > 0 and any(o in self.skipped for o in range(offset, end))
        if skipping:
            self.times -= 1
        body = b"".join(stored(o) for o in range(offset, end) if not (skipping and o in self.skipped))
        return body, end, 0, QUEUE_END


async def read_with(broker: SkippingBroker, max_per_request: int) -> list[int]:
    client = RocketMQClient("127.0.0.1:1")
    client._pull_body = broker.pull_body  # type: ignore[method-assign]
    columns = await client.pull_range_columns(
        MQ, 0, QUEUE_END, max_per_request=max_per_request, concurrency=2
    )
    assert columns.body == [f"m{o}".encode() for o in columns.queue_offset]
    return columns.queue_offset


@pytest.mark.parametrize("max_per_request", [3, 10])
async def test_offsets_skipped_once_are_looked_for_again_and_read(max_per_request: int) -> None:
    broker = SkippingBroker(range(4, 6), times=1)
    assert await read_with(broker, max_per_request) == list(range(QUEUE_END))
    assert broker.times == 0 and 4 in broker.pulls  # it skipped, and was asked again from offset 4


async def test_offsets_skipped_for_good_fail_the_read_naming_queue_and_offsets() -> None:
    broker = SkippingBroker(range(4, 6), times=100)
    with pytest.raises(SkippedOffsetsError, match=r"skipped offsets \[4, 6\) of topic 'T' queue broker-a:0"):
        await read_with(broker, 10)


@pytest.mark.parametrize(
    ("offset", "offsets", "through"),
    [
        (5, [], 5),  # nothing returned
        (5, [5, 6, 7], 8),  # all of them
        (5, [6, 7], 5),  # the first one skipped
        (5, [5, 6, 8, 9], 7),  # a hole in the middle
        (5, [5], 6),
    ],
)
def test_delivered_through(offset: int, offsets: list[int], through: int) -> None:
    assert delivered_through(offset, offsets) == through
