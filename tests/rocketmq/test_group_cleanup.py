"""Deleting consumer groups and topics against the real broker of the local stack.

A sink mirrors its offsets into consumer group ``sluice-<connector>`` and creates the group's
``%RETRY%`` topic; deleting the connector must remove both from every broker and name server, leave
the data topics alone, be a no-op the second time, and give up in bounded time when nothing answers.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from sluice.connectors.rocketmq import (
    MessageQueue,
    OutgoingMessage,
    RequestTimeoutError,
    RocketMQClient,
    RocketMQError,
    SyncRocketMQClient,
)
from sluice.connectors.rocketmq.client import retry_topic
from sluice.connectors.rocketmq.offsets import consumer_group
from sluice.connectors.rocketmq.routing import loads_lenient
from sluice.connectors.rocketmq.transport import BROKER
from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.rocketmq import BROKER_NAME

pytestmark = pytest.mark.timeout(300)

GET_ALL_TOPIC_CONFIG = 21  # RequestCode: the broker's own topic table


@pytest_asyncio.fixture
async def client(stack_config: StackConfig) -> AsyncIterator[RocketMQClient]:
    async with RocketMQClient(stack_config.namesrv_address) as c:
        yield c


async def _broker_topics(client: RocketMQClient) -> set[str]:
    """Topics the brokers themselves hold, not the name server's routes: a topic deleted only from
    the name server would be registered again by its broker within 30 s."""
    names: set[str] = set()
    for address in (await client._masters("list topics")).values():
        resp = await client._admin_call(address, BROKER, GET_ALL_TOPIC_CONFIG, {}, "topic configs")
        doc = loads_lenient(resp.body, "topic configs")
        assert isinstance(doc, dict)
        names.update(doc["topicConfigTable"])
    return names


async def _assert_present(client: RocketMQClient, group: str) -> None:
    assert group in await client.groups()
    topic = retry_topic(group)
    assert await client.topic_exists(topic)
    assert topic in await client.all_topics()
    assert topic in await _broker_topics(client)


async def _assert_gone(client: RocketMQClient, group: str, mq: MessageQueue) -> None:
    assert group not in await client.groups()
    assert await client.query_consumer_offset(group, mq) is None  # cleanOffset: the offsets went too
    topic = retry_topic(group)
    assert not await client.topic_exists(topic)
    assert topic not in await client.all_topics()
    assert topic not in await _broker_topics(client)


async def test_a_mirrored_group_and_its_retry_topic_are_deleted_and_deleting_again_is_a_no_op(
    client: RocketMQClient, topic_name: str
) -> None:
    group = consumer_group(f"sink-{uuid.uuid4().hex[:8]}")
    mq = MessageQueue(topic_name, BROKER_NAME, 1)
    await client.send_batch(mq, [OutgoingMessage(f"{i}".encode()) for i in range(3)])
    await client.update_consumer_offset(group, mq, 3)  # what the sink runner does after a batch
    assert await client.query_consumer_offset(group, mq) == 3
    await _assert_present(client, group)

    await client.delete_group(group)
    await client.delete_topic(retry_topic(group))
    await _assert_gone(client, group, mq)
    assert await client.topic_exists(topic_name)  # the data topic is not the group's
    assert [m.body for m in await client.pull_range(mq, 0, 3)] == [b"0", b"1", b"2"]

    await client.delete_group(group)  # nothing left to delete: no error, nothing changes
    await client.delete_topic(retry_topic(group))
    await _assert_gone(client, group, mq)


async def test_a_group_mirrored_again_after_deletion_gets_its_retry_topic_back(
    client: RocketMQClient, topic_name: str
) -> None:
    """The client remembers which groups it prepared; deleting must make it forget, or a connector
    created again under the same name would lose its retry topic (and tools would not see it)."""
    group = consumer_group(f"again-{uuid.uuid4().hex[:8]}")
    mq = MessageQueue(topic_name, BROKER_NAME, 0)
    await client.update_consumer_offset(group, mq, 0)
    await client.delete_group(group)
    await client.delete_topic(retry_topic(group))
    await _assert_gone(client, group, mq)

    await client.update_consumer_offset(group, mq, 0)
    assert await client.query_consumer_offset(group, mq) == 0
    await _assert_present(client, group)
    await client.delete_group(group)
    await client.delete_topic(retry_topic(group))


def test_the_sync_client_deletes_and_lists_groups(stack_config: StackConfig, topic_name: str) -> None:
    group = consumer_group(f"sync-{uuid.uuid4().hex[:8]}")
    mq = MessageQueue(topic_name, BROKER_NAME, 2)
    with SyncRocketMQClient(stack_config.namesrv_address) as sync:
        sync.update_consumer_offset(group, mq, 0)
        assert group in sync.groups() and sync.topic_exists(retry_topic(group))
        sync.delete_group(group, timeout_s=30)
        sync.delete_topic(retry_topic(group), timeout_s=30)
        assert group not in sync.groups() and not sync.topic_exists(retry_topic(group))
        assert sync.topic_exists(topic_name)


@pytest.fixture
def silent_server() -> Iterator[str]:
    """An address that accepts connections (the kernel's backlog) and never answers a request."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def _closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def test_deleting_without_a_name_server_fails_fast_with_a_rocketmq_error() -> None:
    with SyncRocketMQClient(_closed_port(), retry_backoff_s=0.01) as sync:
        t0 = time.monotonic()
        with pytest.raises(RocketMQError, match="name server"):
            sync.delete_group("sluice-nowhere")
        with pytest.raises(RocketMQError, match="name server"):
            sync.delete_topic("%RETRY%sluice-nowhere")
        assert time.monotonic() - t0 < 10


def test_a_deadline_bounds_a_delete_that_would_wait_out_every_retry(silent_server: str) -> None:
    # Unbounded, this waits 10 s per request and retries 4 times; the deadline cuts it short.
    with SyncRocketMQClient(silent_server) as sync:
        t0 = time.monotonic()
        with pytest.raises(RequestTimeoutError, match="delete consumer group 'sluice-x'.*within 0.5 s"):
            sync.delete_group("sluice-x", timeout_s=0.5)
        with pytest.raises(RequestTimeoutError, match="delete topic"):
            sync.delete_topic("%RETRY%sluice-x", timeout_s=0.5)
        assert time.monotonic() - t0 < 5
