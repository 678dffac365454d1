"""The remoting client against the real broker of the local stack, checked with RocketMQ's own tools.

Interop both ways (mqadmin sendMessage -> our pull; our send -> mqadmin queryMsgByOffset), exact
replays of offset ranges, offset bounds, errors, consumer offsets, batch splitting, the sync
facade from threads, and (marked ``fault``) a broker restart in the middle of a send loop.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from sluice.activities.sink_runner import matching_topics
from sluice.connectors.rocketmq import (
    MessageQueue,
    MessageTooLargeError,
    NameServerUnavailableError,
    OffsetOutOfRangeError,
    OutgoingMessage,
    RocketMQClient,
    RocketMQError,
    SyncRocketMQClient,
    TopicNotFoundError,
)
from sluice.connectors.rocketmq.client import pull_offset_verdict
from sluice.connectors.rocketmq.remoting import ResponseCode
from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.rocketmq import BROKER_NAME, mqadmin

pytestmark = pytest.mark.timeout(300)


@pytest_asyncio.fixture
async def client(stack_config: StackConfig) -> AsyncIterator[RocketMQClient]:
    async with RocketMQClient(stack_config.namesrv_address) as c:
        yield c


def _mq(topic: str, queue_id: int) -> MessageQueue:
    return MessageQueue(topic, BROKER_NAME, queue_id)


async def _wait_max_offset(client: RocketMQClient, mq: MessageQueue, expected: int) -> None:
    """Sends are acknowledged before the consume queue is dispatched; wait until they are visible."""
    for _ in range(200):
        if await client.max_offset(mq) >= expected:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{mq} never reached max offset {expected}")


def _run_admin(cfg: StackConfig, *args: str) -> str:
    result = mqadmin(cfg, *args)
    assert result.returncode == 0, f"mqadmin {args[0]} failed: {result.stdout[-800:]}{result.stderr[-800:]}"
    return result.stdout


def _parse_query_msg(stdout: str) -> dict[str, object]:
    """The fields of ``mqadmin queryMsgByOffset`` output ("Name:   value" lines)."""
    fields = dict(re.findall(r"^([A-Za-z ]+?):\s+(.*)$", stdout, flags=re.M))
    props_text = fields["Properties"].strip()[1:-1]
    props = dict(item.split("=", 1) for item in props_text.split(", ") if item)
    return {
        "tags": fields["Tags"].strip()[1:-1],
        "keys": fields["Keys"].strip()[1:-1],
        "properties": props,
        "queue_offset": int(fields["Queue Offset"]),
        "body": Path(fields["Message Body Path"].strip()).read_bytes(),
    }


async def test_messages_sent_by_the_official_tool_are_pulled_identically(
    client: RocketMQClient, stack_config: StackConfig, topic_name: str
) -> None:
    sent = [(f"body {i} é ✓", f"key-{i}", f"tag{i}") for i in range(3)]
    for body, keys, tags in sent:
        _run_admin(stack_config, "sendMessage", "-t", topic_name, "-p", body, "-k", keys, "-c", tags,
                   "-b", BROKER_NAME, "-i", "1")  # fmt: skip
    mq = _mq(topic_name, 1)
    await _wait_max_offset(client, mq, 3)
    result = await client.pull(mq, 0, 32)
    got = [(m.body.decode(), m.keys, m.tags) for m in result.messages]
    assert got == sent
    assert [m.queue_offset for m in result.messages] == [0, 1, 2]
    assert all(m.properties == {} and m.topic == topic_name and m.queue_id == 1 for m in result.messages)
    assert result.next_offset == 3 and result.max_offset == 3


async def test_messages_sent_by_sluice_are_read_identically_by_the_official_tool(
    client: RocketMQClient, stack_config: StackConfig, topic_name: str
) -> None:
    mq = _mq(topic_name, 3)
    outgoing = [
        OutgoingMessage(b"first \x00\xff binary", keys="k1 k2", tags="tagA", properties={"source": "file-1"}),
        OutgoingMessage("second ü".encode(), keys="k3", tags="tagB", properties={"a": "1", "b": "two words"}),
    ]
    result = await client.send_batch(mq, outgoing)
    assert (result.first_offset, result.count, result.offsets) == (0, 2, (0, 1))
    for offset, msg, msg_id in zip(result.offsets, outgoing, result.msg_ids, strict=True):
        out = _run_admin(stack_config, "queryMsgByOffset", "-t", topic_name, "-b", BROKER_NAME, "-i", "3",
                         "-o", str(offset))  # fmt: skip
        seen = _parse_query_msg(out)
        assert seen["body"] == msg.body
        assert (seen["keys"], seen["tags"], seen["queue_offset"]) == (msg.keys, msg.tags, offset)
        props = seen["properties"]
        assert isinstance(props, dict)
        assert props["UNIQ_KEY"] == msg_id
        assert {k: v for k, v in props.items() if k in msg.properties} == dict(msg.properties)
    # and our own pull sees exactly what was sent, with the ids the send reported
    await _wait_max_offset(client, mq, 2)
    pulled = (await client.pull(mq, 0)).messages
    assert [(m.body, m.keys, m.tags, m.properties, m.msg_id) for m in pulled] == [
        (o.body, o.keys, o.tags, dict(o.properties), i) for o, i in zip(outgoing, result.msg_ids, strict=True)
    ]


async def test_pulling_a_range_twice_gives_identical_messages(
    client: RocketMQClient, topic_name: str
) -> None:
    mq = _mq(topic_name, 0)
    bodies = [f"m{i:04d}".encode() for i in range(300)]
    await client.send_batch(mq, [OutgoingMessage(b, keys=f"k{i}") for i, b in enumerate(bodies)])
    await _wait_max_offset(client, mq, 300)
    first = await client.pull_range(mq, 17, 263)
    second = await client.pull_range(mq, 17, 263, max_per_request=50, concurrency=3)
    assert first == second
    assert [m.body for m in first] == bodies[17:263]
    assert [m.queue_offset for m in first] == list(range(17, 263))


async def test_offset_bounds(client: RocketMQClient, topic_name: str) -> None:
    mq = _mq(topic_name, 2)
    await client.send_batch(mq, [OutgoingMessage(b"a"), OutgoingMessage(b"b")])
    await _wait_max_offset(client, mq, 2)
    assert (await client.min_offset(mq), await client.max_offset(mq)) == (0, 2)
    at_end = await client.pull(mq, 2)
    assert (at_end.messages, at_end.next_offset, at_end.max_offset) == ((), 2, 2)
    with pytest.raises(OffsetOutOfRangeError) as info:
        await client.pull(mq, 5)
    assert (info.value.requested, info.value.min_offset, info.value.max_offset) == (5, 0, 2)
    assert topic_name in str(info.value) and "broker-a:2" in str(info.value)
    assert await client.search_offset(mq, int(time.time() * 1000) - 3_600_000) == 0


async def test_waiting_for_messages_is_answered_by_the_first_one_stored(
    client: RocketMQClient, topic_name: str
) -> None:
    queues = [_mq(topic_name, i) for i in range(4)]
    await client.send_batch(queues[1], [OutgoingMessage(b"before")])
    await _wait_max_offset(client, queues[1], 1)
    caught_up = {mq: await client.max_offset(mq) for mq in queues}
    assert not await client.wait_for_messages(caught_up, 0.5), "nothing was sent: the hold ends empty"
    assert await client.wait_for_messages({queues[1]: 0}, 5.0), "a message already there answers at once"

    async def send_later() -> None:
        await asyncio.sleep(0.5)
        await client.send_batch(queues[3], [OutgoingMessage(b"new")])

    sender = asyncio.create_task(send_later())
    # Held by the broker: only a message stored during the wait can make it True.
    assert await client.wait_for_messages(caught_up, 20.0)
    await sender
    assert [m.body for m in (await client.pull(queues[3], caught_up[queues[3]])).messages] == [b"new"]


@pytest.mark.parametrize(
    ("offset", "code", "lo", "hi", "verdict"),
    [
        (5, ResponseCode.SUCCESS, 0, 10, "ok"),
        (10, ResponseCode.PULL_NOT_FOUND, 0, 10, "ok"),  # at the end: nothing new yet
        (0, ResponseCode.PULL_NOT_FOUND, 0, 0, "ok"),  # empty queue
        (3, ResponseCode.PULL_OFFSET_MOVED, 5, 10, "below"),  # removed by retention
        (3, ResponseCode.PULL_NOT_FOUND, 5, 10, "below"),  # a slave answering "not found"
        (11, ResponseCode.PULL_OFFSET_MOVED, 0, 10, "beyond"),
        (11, ResponseCode.PULL_NOT_FOUND, 0, 10, "beyond"),
    ],
)
def test_pull_offset_verdict(offset: int, code: int, lo: int, hi: int, verdict: str) -> None:
    # Retention cannot be forced on the local broker within a test, so "below min" is checked here.
    assert pull_offset_verdict(offset, code, lo, hi) == verdict


async def test_unknown_topic_raises_topic_not_found(client: RocketMQClient) -> None:
    topic = f"NOPE_{uuid.uuid4().hex[:10]}"
    assert not await client.topic_exists(topic)
    with pytest.raises(TopicNotFoundError, match=topic):
        await client.queues(topic)
    with pytest.raises(TopicNotFoundError, match=topic):
        await client.pull(_mq(topic, 0), 0)


async def test_unreachable_name_server_raises_name_server_unavailable() -> None:
    async with RocketMQClient("127.0.0.1:1", max_retries=1, retry_backoff_s=0.01) as c:
        with pytest.raises(NameServerUnavailableError, match="127.0.0.1:1"):
            await c.queues("anything")


async def test_create_topic_is_idempotent(client: RocketMQClient, stack_config: StackConfig) -> None:
    topic = f"SLUICE_CT_{uuid.uuid4().hex[:10]}"
    assert not await client.topic_exists(topic)
    await client.create_topic(topic, queue_count=3)
    await client.create_topic(topic, queue_count=3)
    assert await client.queues(topic) == [_mq(topic, q) for q in range(3)]
    assert topic in _run_admin(stack_config, "topicList")
    with pytest.raises(RocketMQError, match="cluster 'NoSuchCluster'"):
        await client.create_topic(topic, cluster="NoSuchCluster")


async def test_all_topics_lists_a_new_topic_sorted(client: RocketMQClient) -> None:
    """The name server's topic list (a sink's topics.regex is matched against it) has a topic as
    soon as it is created; the whole-name match picks it and nothing else of that prefix."""
    topic = f"SLUICE_AT_{uuid.uuid4().hex[:10]}"
    assert topic not in await client.all_topics()
    await client.create_topic(topic, queue_count=1)
    listed = await client.all_topics()
    assert topic in listed and listed == sorted(listed)
    assert matching_topics(listed, topic[:-1] + ".") == [topic]
    assert matching_topics(listed, topic[:-1]) == []  # a prefix alone does not match (fullmatch)


async def test_message_over_the_broker_limit_raises_message_too_large(
    stack_config: StackConfig, topic_name: str
) -> None:
    mq = _mq(topic_name, 0)
    big = OutgoingMessage(b"x" * (4 * 1024 * 1024 + 1))
    async with RocketMQClient(stack_config.namesrv_address) as c:  # checked before sending
        with pytest.raises(MessageTooLargeError, match="message 0"):
            await c.send_batch(mq, [big])
    async with RocketMQClient(stack_config.namesrv_address, max_message_bytes=8 * 1024 * 1024) as c:
        with pytest.raises(MessageTooLargeError, match="broker"):  # the broker's own verdict
            await c.send_batch(mq, [big])
        assert await c.max_offset(mq) == 0


async def test_large_batches_are_split_but_every_message_lands(
    client: RocketMQClient, topic_name: str
) -> None:
    mq = _mq(topic_name, 1)
    count = 12_000  # ~4.7 MB stored: more than one request under the 4 MiB limit
    msgs = [OutgoingMessage(f"{i:06d}".encode() + b"." * 300) for i in range(count)]
    result = await client.send_batch(mq, msgs)
    assert result.count == count and len(set(result.msg_ids)) == count
    assert result.offsets == tuple(range(count))
    await _wait_max_offset(client, mq, count)
    pulled = await client.pull_range(mq, 0, count)
    assert [m.body for m in pulled] == [m.body for m in msgs]
    assert [m.msg_id for m in pulled] == list(result.msg_ids)


async def test_consumer_offsets(client: RocketMQClient, stack_config: StackConfig, topic_name: str) -> None:
    group = f"SLUICE_G_{uuid.uuid4().hex[:10]}"
    mq = _mq(topic_name, 2)
    await client.send_batch(mq, [OutgoingMessage(f"{i}".encode()) for i in range(5)])
    assert await client.query_consumer_offset(group, mq) is None
    await client.update_consumer_offset(group, mq, 4)
    assert await client.query_consumer_offset(group, mq) == 4
    out = _run_admin(stack_config, "consumerProgress", "-g", group)
    rows = [line.split() for line in out.splitlines() if line.startswith(topic_name)]
    # columns: topic, broker, queue id, broker offset, consumer offset, ...
    assert [topic_name, BROKER_NAME, "2", "5", "4"] in [row[:5] for row in rows]


def test_sync_client_from_threads(stack_config: StackConfig, topic_name: str) -> None:
    errors: list[BaseException] = []
    with SyncRocketMQClient(stack_config.namesrv_address) as sync:
        queues = sync.queues(topic_name)

        def produce(mq: MessageQueue) -> None:
            try:
                for n in range(5):
                    sync.send_batch(
                        mq, [OutgoingMessage(f"{mq.queue_id}-{n}-{i}".encode()) for i in range(20)]
                    )
            except BaseException as exc:  # surfaced by the assertion below
                errors.append(exc)

        threads = [threading.Thread(target=produce, args=(mq,)) for mq in queues]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        for mq in queues:
            deadline = time.monotonic() + 10
            while sync.max_offset(mq) < 100 and time.monotonic() < deadline:
                time.sleep(0.05)
            bodies = [m.body.decode() for m in sync.pull_range(mq, 0, 100)]
            assert bodies == [f"{mq.queue_id}-{n}-{i}" for n in range(5) for i in range(20)]


@pytest.mark.fault
def test_broker_restart_during_a_send_loop_loses_no_acknowledged_message(
    stack_config: StackConfig, topic_name: str
) -> None:
    from sluice.deploy.local.stack import restart_service

    mq = _mq(topic_name, 0)
    acked: list[bytes] = []
    failures: list[str] = []
    restart = threading.Thread(target=restart_service, args=(stack_config, "broker"), daemon=True)
    with SyncRocketMQClient(stack_config.namesrv_address, request_timeout_s=3.0, retry_backoff_s=0.1) as sync:
        n = 0
        while n < 20 or restart.is_alive():
            if n == 20:
                restart.start()
            body = f"n{n:05d}".encode()
            try:
                sync.send_batch(mq, [OutgoingMessage(body)])
                acked.append(body)
                n += 1
            except RocketMQError as exc:  # retries exhausted while the broker is down: try again
                failures.append(type(exc).__name__)
                time.sleep(0.2)
        for extra in range(20):  # and the client keeps working afterwards
            body = f"after{extra:03d}".encode()
            sync.send_batch(mq, [OutgoingMessage(body)])
            acked.append(body)
        deadline = time.monotonic() + 30
        end = sync.max_offset(mq)
        while end < len(acked) and time.monotonic() < deadline:
            time.sleep(0.1)
            end = sync.max_offset(mq)
        stored = [m.body for m in sync.pull_range(mq, sync.min_offset(mq), end)]
    missing = [b for b in acked if b not in set(stored)]
    assert missing == []
    # at-least-once: a send retried after a dropped connection may appear twice, never out of order
    assert [b for i, b in enumerate(stored) if b not in stored[:i]] == acked
