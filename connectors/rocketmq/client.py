"""Asyncio RocketMQ client over the remoting protocol (name server + brokers).

What it does for Sluice's micro-batches: routes, min/max offsets, offset by timestamp, pull by exact
queue offset, batch send, consumer offsets, and the administration a connector's life needs (create
topics; list and delete consumer groups; delete topics). It registers no producer or consumer
group with heartbeats: every call is a stateless request, so replaying a range is just pulling it
again. Connection pooling, retries, route refresh and ACL signing live in transport.py. A send
retried after a timeout or dropped connection may store the batch twice (at-least-once).

One instance per event loop. ``SyncRocketMQClient`` (sync_client.py) wraps it for threads.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from sluice.connectors.rocketmq.codec import (
    EncodedBatch,
    decode_columns,
    decode_messages,
    encode_batch_entries,
    messages_from_columns,
    stored_size,
)
from sluice.connectors.rocketmq.errors import (
    BrokerUnavailableError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    ProtocolError,
    RetriableError,
    RocketMQError,
    SkippedOffsetsError,
    TopicNotFoundError,
)
from sluice.connectors.rocketmq.remoting import RemotingCommand, RequestCode, ResponseCode, request
from sluice.connectors.rocketmq.routing import ClusterInfo, loads_lenient, parse_cluster_info
from sluice.connectors.rocketmq.transport import BROKER, NAME_SERVER, Transport, header_int
from sluice.connectors.rocketmq.values import (
    Message,
    MessageColumns,
    MessageQueue,
    OutgoingMessage,
    PullResult,
    SendResult,
    TopicRoute,
)

__all__ = [
    "Message", "MessageQueue", "OutgoingMessage", "PullResult", "RocketMQClient", "SendResult", "TopicRoute",
    "retry_topic",
]  # fmt: skip

log = logging.getLogger(__name__)

DEFAULT_TOPIC = "TBW102"
PULL_SYSFLAG_SUBSCRIPTION = 0x4
PULL_SYSFLAG_SUSPEND = 0x2  # PullSysFlag.FLAG_SUSPEND: the broker holds the pull until a message arrives
SUBSCRIPTION_GROUP_NOT_EXIST = 26
#: GET_CONSUMER_CONNECTION_LIST's answer for a group with no consumer connected.
CONSUMER_NOT_ONLINE = 206
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
# Pauses before re-checking an offset past the queue's end (consume-queue dispatch lag).
_DISPATCH_GRACE_S = (0.05, 0.1, 0.2, 0.4)
# How much longer than its hold a long poll may take to be answered (network, the broker's timer).
_HOLD_GRACE_S = 2.0


def retry_topic(group: str) -> str:
    """The ``%RETRY%`` topic brokers pair with consumer group ``group`` (MixAll.getRetryTopic)."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def _topic_fields(topic: str, queue_count: int, perm: int = 6) -> dict[str, object]:
    """Header of UPDATE_AND_CREATE_TOPIC: read/write queues, perm (6: read + write)."""
    return {
        "topic": topic,
        "defaultTopic": DEFAULT_TOPIC,
        "readQueueNums": queue_count,
        "writeQueueNums": queue_count,
        "perm": perm,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": False,
    }


class RocketMQClient(Transport):
    """Asyncio client; see the module docstring. Options are documented on Transport."""

    async def queues(self, topic: str) -> list[MessageQueue]:
        return list((await self.topic_route(topic)).queues)

    async def topic_exists(self, topic: str) -> bool:
        try:
            await self.topic_route(topic, refresh=True)
        except TopicNotFoundError:
            return False
        return True

    async def all_topics(self) -> list[str]:
        """Every topic the name server knows (GET_ALL_TOPIC_LIST_FROM_NAMESERVER), sorted; a sink's
        ``topics.regex`` is matched against it."""
        resp = await self._namesrv_call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {}, "topic list")
        self._check(resp, "topic list", ";".join(self._namesrvs), NAME_SERVER)
        try:
            listed = json.loads(resp.body.decode("utf-8")).get("topicList") or []
        except (UnicodeDecodeError, ValueError, AttributeError) as exc:
            raise ValueError(f"rocketmq: the name server's topic list is not JSON: {exc}") from None
        return sorted(str(t) for t in listed)

    async def create_topic(
        self, topic: str, *, queue_count: int = 4, cluster: str | None = None, perm: int = 6
    ) -> None:
        """Create (or update) the topic on every master of ``cluster`` (default: every known broker)."""
        if queue_count < 1:
            raise ValueError(f"rocketmq: topic {topic!r}: queue_count must be >= 1, got {queue_count}")
        info = await self.cluster_info()
        if cluster is None:
            brokers = sorted(info.masters)
        elif cluster in info.clusters:
            brokers = [b for b in info.clusters[cluster] if b in info.masters]
        else:
            raise RocketMQError(
                f"rocketmq: cannot create topic {topic!r}: cluster {cluster!r} unknown "
                f"(known: {sorted(info.clusters)})"
            )
        if not brokers:
            raise BrokerUnavailableError(f"rocketmq: cannot create topic {topic!r}: no live master broker")
        fields = _topic_fields(topic, queue_count, perm)
        for name in brokers:
            what = f"create topic {topic!r} on broker {name}"
            await self._admin_call(
                info.masters[name], BROKER, RequestCode.UPDATE_AND_CREATE_TOPIC, fields, what, topic
            )
        # The broker registers the topic with the name server asynchronously; wait for the route.
        deadline = time.monotonic() + self.request_timeout_s
        while True:
            try:
                route = await self.topic_route(topic, refresh=True)
                if {q.broker_name for q in route.queues} >= set(brokers):
                    return
            except TopicNotFoundError:
                pass
            if time.monotonic() > deadline:
                raise RocketMQError(
                    f"rocketmq: topic {topic!r} was created but its route did not appear "
                    f"at name server {';'.join(self._namesrvs)}"
                )
            await asyncio.sleep(0.1)

    async def delete_topic(self, topic: str) -> None:
        """Delete ``topic`` (its queues and messages) on every master broker, then its route on
        every name server; a topic nobody knows is a no-op (brokers and name servers answer success).

        Brokers go first because each re-registers the topics it holds with the name servers every
        30 s: a route deleted first would come back. Every name server is told, not only the first
        that answers, since each keeps its own route table.
        """
        masters = await self._masters(f"delete topic {topic!r}")
        fields = {"topic": topic}
        for name, address in sorted(masters.items()):
            what = f"delete topic {topic!r} on broker {name}"
            await self._admin_call(address, BROKER, RequestCode.DELETE_TOPIC_IN_BROKER, fields, what, topic)
        for address in self._namesrvs:
            what = f"delete topic {topic!r} from the name server"
            await self._admin_call(
                address, NAME_SERVER, RequestCode.DELETE_TOPIC_IN_NAMESRV, fields, what, topic
            )
        # Forget it here too: a cached route would send requests to queues that are gone, and a
        # "known" topic missing from the name server would be taken for a restarting broker.
        self._routes.pop(topic, None)
        self._known_topics.discard(topic)
        self._prepared_groups = {(g, a) for g, a in self._prepared_groups if retry_topic(g) != topic}

    # -- consumer groups ----------------------------------------------------------------------------

    async def groups(self) -> list[str]:
        """Names of the subscription groups any master broker knows (the brokers' built-in ones
        included), sorted: how tools and tests see which consumer groups exist on the broker."""
        masters = await self._masters("list consumer groups")
        names: set[str] = set()
        for name, address in sorted(masters.items()):
            what = f"consumer groups of broker {name}"
            resp = await self._admin_call(
                address, BROKER, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {}, f"list {what}"
            )
            doc = loads_lenient(resp.body, what)
            table = doc.get("subscriptionGroupTable") if isinstance(doc, dict) else None
            if not isinstance(table, dict):
                raise ProtocolError(f"rocketmq: {what} at broker {address} has no subscriptionGroupTable")
            names.update(str(group) for group in table)
        return sorted(names)

    async def delete_group(self, group: str) -> None:
        """Delete consumer group ``group`` and its committed offsets on every master broker; a
        group a broker does not know is a no-op there (it answers success).

        The group's ``%RETRY%`` topic is a topic of its own: ``delete_topic(retry_topic(group))``.
        """
        masters = await self._masters(f"delete consumer group {group!r}")
        fields = {"groupName": group, "cleanOffset": True}
        for name, address in sorted(masters.items()):
            what = f"delete consumer group {group!r} on broker {name}"
            await self._admin_call(address, BROKER, RequestCode.DELETE_SUBSCRIPTIONGROUP, fields, what)
        # A later update_consumer_offset for the same name must set the group up again.
        self._prepared_groups = {(g, a) for g, a in self._prepared_groups if g != group}

    async def cluster_info(self) -> ClusterInfo:
        """The name server's cluster membership (GET_BROKER_CLUSTER_INFO, what ``mqadmin
        clusterList`` shows): clusters -> broker names, broker name -> master address. A broker
        that stopped or never registered is absent."""
        resp = await self._namesrv_call(RequestCode.GET_BROKER_CLUSTER_INFO, {}, "cluster info")
        self._check(resp, "cluster info", ";".join(self._namesrvs), NAME_SERVER)
        return parse_cluster_info(resp.body)

    async def _masters(self, what: str) -> dict[str, str]:
        """Broker name -> master address of every broker in the name server's cluster info.

        Raises BrokerUnavailableError when there is none: an administrative change that reached no
        broker must not look like one that succeeded.
        """
        masters = (await self.cluster_info()).masters
        if not masters:
            raise BrokerUnavailableError(f"rocketmq: cannot {what}: no live master broker")
        return masters

    async def _admin_call(
        self, address: str, service: str, code: int, fields: Mapping[str, object], what: str, topic: str = ""
    ) -> RemotingCommand:
        """One administrative request to one server, checked, retried with backoff while retriable.

        Administration targets servers by address (every master, every name server), not a topic's
        route, so ``_broker_call`` and ``_namesrv_call`` (first server that answers) do not fit.
        """
        attempt = 0
        while True:
            try:
                resp = await self._send(address, service, request(code, fields))
                self._check(resp, what, address, service, topic)
                return resp
            except RetriableError:
                if attempt >= self.max_retries:
                    raise
                await self._backoff(attempt)
                attempt += 1

    # -- offsets ------------------------------------------------------------------------------------

    async def _offset_call(self, code: int, mq: MessageQueue, extra: Mapping[str, object], what: str) -> int:
        fields = {"topic": mq.topic, "queueId": mq.queue_id, **extra}
        resp, _ = await self._broker_call(mq.topic, mq.broker_name, code, fields, f"{what} of {mq}")
        return header_int(resp, "offset", f"{what} of {mq}")

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self._offset_call(RequestCode.GET_MIN_OFFSET, mq, {}, "min offset")

    async def max_offset(self, mq: MessageQueue) -> int:
        """The next offset to be written (one past the last message)."""
        return await self._offset_call(RequestCode.GET_MAX_OFFSET, mq, {"committed": True}, "max offset")

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return await self._offset_call(
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, mq, {"timestamp": timestamp_ms}, "offset by timestamp"
        )

    async def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        fields = {"consumerGroup": group, "topic": mq.topic, "queueId": mq.queue_id, "commitOffset": offset}
        what = f"update offset of group {group!r} on {mq}"
        code = RequestCode.UPDATE_CONSUMER_OFFSET
        resp, address = await self._broker_call(
            mq.topic, mq.broker_name, code, fields, what, accept=frozenset({SUBSCRIPTION_GROUP_NOT_EXIST})
        )
        if resp.code == SUBSCRIPTION_GROUP_NOT_EXIST:  # brokers only auto-create groups on pull
            await self._create_group(address, group)
            await self._broker_call(mq.topic, mq.broker_name, code, fields, what)
        if (group, address) not in self._prepared_groups:
            await self._ensure_retry_topic(group, address)
            self._prepared_groups.add((group, address))

    async def _ensure_retry_topic(self, group: str, address: str) -> None:
        """Create the group's ``%RETRY%`` topic, as brokers do for every consumer that heartbeats.

        Sluice never heartbeats, but operators' tools (``mqadmin consumerProgress``, the dashboard)
        find a group's queues and offsets through that topic's route. Failing here only costs
        visibility, so it is logged, never raised: the offset itself is already stored.
        """
        topic = retry_topic(group)
        try:
            if await self.topic_exists(topic):
                return
            resp = await self._send(
                address, BROKER, request(RequestCode.UPDATE_AND_CREATE_TOPIC, _topic_fields(topic, 1))
            )
            self._check(resp, f"create topic {topic!r}", address, BROKER, topic)
        except RocketMQError as exc:
            log.warning(
                "rocketmq: consumer group %r has no retry topic, tools will not show it: %s", group, exc
            )

    async def _create_group(self, address: str, group: str) -> None:
        config = {
            "groupName": group,
            "consumeEnable": True,
            "consumeFromMinEnable": True,
            "consumeBroadcastEnable": True,
            "retryQueueNums": 1,
            "retryMaxTimes": 16,
            "brokerId": 0,
            "whichBrokerWhenConsumeSlowly": 1,
            "notifyConsumerIdsChangedEnable": True,
        }
        body = json.dumps(config).encode()
        resp = await self._send(
            address, BROKER, request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
        )
        self._check(resp, f"create consumer group {group!r}", address, BROKER)

    async def group_online(self, group: str, topic: str) -> bool:
        """Whether a consumer of ``group`` is connected to a broker of ``topic`` (what
        ``mqadmin consumerConnection`` shows)."""
        route = await self.topic_route(topic)
        for broker in sorted({q.broker_name for q in route.queues}):
            resp, _ = await self._broker_call(
                topic, broker, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group},
                f"connections of group {group!r}", accept=frozenset({CONSUMER_NOT_ONLINE}),
            )  # fmt: skip
            if resp.code == ResponseCode.SUCCESS:
                return True
        return False

    async def query_consumer_offset(self, group: str, mq: MessageQueue) -> int | None:
        """The group's committed offset on the queue, or None when it never committed one."""
        fields = {
            "consumerGroup": group,
            "topic": mq.topic,
            "queueId": mq.queue_id,
            "setZeroIfNotFound": False,
        }
        what = f"query offset of group {group!r} on {mq}"
        resp, _ = await self._broker_call(
            mq.topic,
            mq.broker_name,
            RequestCode.QUERY_CONSUMER_OFFSET,
            fields,
            what,
            accept=frozenset({ResponseCode.QUERY_NOT_FOUND, SUBSCRIPTION_GROUP_NOT_EXIST}),
        )
        if resp.code != ResponseCode.SUCCESS:
            return None
        return header_int(resp, "offset", what)

    # -- data ---------------------------------------------------------------------------------------

    async def pull(self, mq: MessageQueue, offset: int, max_count: int = 32) -> PullResult:
        """Up to ``max_count`` messages from ``offset`` (fewer if the broker caps a transfer).

        Returns no messages at the end of the queue; raises OffsetOutOfRangeError when ``offset`` is
        below the queue's min offset or beyond its max offset.
        """
        body, next_off, min_off, max_off = await self._pull_body(mq, offset, max_count)
        return PullResult(tuple(decode_messages(body, mq.broker_name)), next_off, min_off, max_off)

    async def _pull_body(self, mq: MessageQueue, offset: int, max_count: int) -> tuple[bytes, int, int, int]:
        """One pull request: the stored messages' bytes (empty when none) and the next, min and max
        offsets; the checks and errors documented on ``pull``."""
        if offset < 0 or max_count < 1:
            raise ValueError(
                f"rocketmq: pull {mq}: offset {offset} and max_count {max_count} must be >= 0 / >= 1"
            )
        fields = self._pull_fields(mq, offset, max_count)
        accept = frozenset(
            {
                ResponseCode.SUCCESS,
                ResponseCode.PULL_NOT_FOUND,
                ResponseCode.PULL_RETRY_IMMEDIATELY,
                ResponseCode.PULL_OFFSET_MOVED,
                SUBSCRIPTION_GROUP_NOT_EXIST,
            }
        )
        what = f"pull {mq} at offset {offset}"
        code = RequestCode.PULL_MESSAGE
        for attempt in range(len(_DISPATCH_GRACE_S) + 1):
            resp, address = await self._broker_call(
                mq.topic, mq.broker_name, code, fields, what, accept=accept
            )
            if resp.code == SUBSCRIPTION_GROUP_NOT_EXIST:  # broker without autoCreateSubscriptionGroup
                await self._create_group(address, self.consumer_group)
                resp, _ = await self._broker_call(mq.topic, mq.broker_name, code, fields, what, accept=accept)
            min_off = header_int(resp, "minOffset", what)
            max_off = header_int(resp, "maxOffset", what)
            verdict = pull_offset_verdict(offset, resp.code, min_off, max_off)
            if verdict == "below":
                raise OffsetOutOfRangeError(mq, offset, min_off, max_off)
            if verdict == "ok":
                break
            # Beyond the end. The consume queue is built from the commit log asynchronously, so an
            # offset just acknowledged by a send can be invisible for a few milliseconds: look again
            # briefly before calling it out of range.
            if attempt == len(_DISPATCH_GRACE_S):
                raise OffsetOutOfRangeError(mq, offset, min_off, max_off)
            await asyncio.sleep(_DISPATCH_GRACE_S[attempt])
        next_off = header_int(resp, "nextBeginOffset", what)
        body = resp.body if resp.code == ResponseCode.SUCCESS else b""
        return body, next_off, min_off, max_off

    async def wait_for_messages(self, positions: Mapping[MessageQueue, int], timeout_s: float) -> bool:
        """Whether a message at or past its position arrives in any of the queues within
        ``timeout_s``; True as soon as one does.

        One long-polling pull per queue (PullSysFlag.FLAG_SUSPEND, as the Java push consumer
        pulls): the broker holds each until a message is stored at that offset or the hold ends, so
        an idle consumer learns of new messages at once instead of after a sleep. The pulls that
        are still held when one answers are dropped (their answers, if any, are discarded). An
        offset that moved or a failing broker answers True: the caller's next planning meets it.

        The sink loop does not use it yet. Tried in place of its idle sleep, it woke the sink at a
        source batch's first message, so the sink ran more and smaller batches: bench-db's job lost
        ~20 % of its rows/s and took ~30 % more CPU while each batch still costs ~1 s of fixed work.
        """
        if not positions or timeout_s <= 0:
            return False
        hold_ms = max(1, int(timeout_s * 1000))
        waits = [asyncio.create_task(self._held_pull(mq, at, hold_ms)) for mq, at in positions.items()]
        try:
            for done in asyncio.as_completed(waits, timeout=timeout_s + _HOLD_GRACE_S):
                if await done:
                    return True
            return False
        except TimeoutError:
            return False
        finally:
            for wait in waits:
                wait.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    def _pull_fields(
        self, mq: MessageQueue, offset: int, max_count: int, hold_ms: int = 0
    ) -> dict[str, object]:
        """PullMessageRequestHeader of a pull by offset, every tag; held by the broker for
        ``hold_ms`` when nothing is there yet (a long poll) if that is above 0."""
        return {
            "consumerGroup": self.consumer_group,
            "topic": mq.topic,
            "queueId": mq.queue_id,
            "queueOffset": offset,
            "maxMsgNums": max_count,
            "sysFlag": PULL_SYSFLAG_SUBSCRIPTION | (PULL_SYSFLAG_SUSPEND if hold_ms > 0 else 0),
            "commitOffset": 0,
            "suspendTimeoutMillis": hold_ms,
            "subscription": "*",
            "subVersion": 0,
            "expressionType": "TAG",
        }

    async def _held_pull(self, mq: MessageQueue, offset: int, hold_ms: int) -> bool:
        fields = self._pull_fields(mq, offset, 1, hold_ms)
        accept = frozenset({ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY})
        try:
            resp, _ = await self._broker_call(
                mq.topic,
                mq.broker_name,
                RequestCode.PULL_MESSAGE,
                fields,
                f"wait for {mq} at offset {offset}",
                accept=accept | {ResponseCode.SUCCESS, ResponseCode.PULL_OFFSET_MOVED},
                timeout_s=hold_ms / 1000 + _HOLD_GRACE_S,
            )
        except RocketMQError as exc:
            log.debug("rocketmq: long poll of %s ended: %s", mq, exc)
            return True
        return resp.code not in accept

    async def pull_range(
        self, mq: MessageQueue, start: int, end: int, *, max_per_request: int = 32, concurrency: int = 8
    ) -> list[Message]:
        """Exactly the messages with offsets in ``[start, end)``, pulled with requests in flight.

        Same pulls, checks and errors as ``pull_range_columns``, one Message per message.
        """
        columns = await self.pull_range_columns(
            mq, start, end, max_per_request=max_per_request, concurrency=concurrency
        )
        return messages_from_columns(columns)

    async def pull_range_columns(
        self, mq: MessageQueue, start: int, end: int, *, max_per_request: int = 32, concurrency: int = 8
    ) -> MessageColumns:
        """Exactly the messages with offsets in ``[start, end)``, as columns (codec.decode_columns).

        The range is cut into chunks pulled concurrently on the shared connection (brokers cap each
        pull at maxTransferCountOnMessageInMemory, 32 by default, so a serial loop is latency-bound).
        Raises OffsetOutOfRangeError if part of the range is no longer (or not yet) in the queue, and
        SkippedOffsetsError if the broker keeps passing over offsets it indexes without returning
        them: a range is read whole or not at all.
        """
        out = MessageColumns(mq.broker_name)
        if end <= start:
            return out
        sem = asyncio.Semaphore(max(1, concurrency))

        async def chunk(lo: int, hi: int) -> MessageColumns:
            part = MessageColumns(mq.broker_name)
            offset, looks = lo, 0
            async with sem:
                while offset < hi:
                    body, next_off, min_off, max_off = await self._pull_body(
                        mq, offset, min(max_per_request, hi - offset)
                    )
                    got = decode_columns(body, mq.broker_name).within(offset, hi)
                    if next_off <= offset and not len(got):
                        raise OffsetOutOfRangeError(mq, offset, min_off, max_off)
                    delivered = delivered_through(offset, got.queue_offset)
                    passed = min(max(next_off, delivered), hi)  # where the broker would go on
                    part.extend(got.within(offset, delivered))  # itself when nothing was skipped
                    if delivered == passed:
                        offset, looks = passed, 0
                        continue
                    # The broker passed offsets it did not return: look again from the first one.
                    if looks == len(_DISPATCH_GRACE_S):
                        resumed = min((o for o in got.queue_offset if o > delivered), default=passed)
                        raise SkippedOffsetsError(mq, delivered, resumed)
                    await asyncio.sleep(_DISPATCH_GRACE_S[looks])
                    offset, looks = delivered, looks + 1
            return part

        bounds = range(start, end, max_per_request)
        parts = await asyncio.gather(*(chunk(lo, min(lo + max_per_request, end)) for lo in bounds))
        for part in parts:
            out.extend(part)
        return out

    async def send_batch(self, mq: MessageQueue, messages: Sequence[OutgoingMessage]) -> SendResult:
        """Send ``messages`` to ``mq`` as one batch request (several if over max_message_bytes)."""
        ids = self._ids.take(len(messages))
        return await self.send_encoded(
            mq, EncodedBatch.of_entries(encode_batch_entries(messages, ids, mq.topic), ids)
        )

    def message_ids(self, count: int) -> list[str]:
        """Fresh UNIQ_KEY values, for callers that encode batch entries themselves."""
        return self._ids.take(count)

    async def send_encoded(self, mq: MessageQueue, batch: EncodedBatch) -> SendResult:
        """Send encoded entries as one batch request (several if over max_message_bytes)."""
        if not len(batch):
            raise ValueError(f"rocketmq: send to {mq}: no messages")
        groups: list[tuple[int, int]] = []  # [start, stop) entry ranges, each within the size limit
        start = size = 0
        for index, entry_size in enumerate(batch.entry_sizes()):
            stored = stored_size(entry_size, mq.topic)
            if stored > self.max_message_bytes:
                raise MessageTooLargeError(
                    f"rocketmq: message {index} for {mq} takes {stored} bytes stored, over the limit of "
                    f"{self.max_message_bytes} (maxMessageSize)"
                )
            if size + stored > self.max_message_bytes and index > start:
                groups.append((start, index))
                start, size = index, 0
            size += stored
        groups.append((start, len(batch)))
        offsets: list[int] = []
        for lo, hi in groups:
            first = await self._send_group(mq, batch.slice(lo, hi))
            offsets += range(first, first + hi - lo)
        return SendResult(mq, offsets[0], len(batch), tuple(batch.ids), tuple(offsets))

    async def _send_group(self, mq: MessageQueue, group: EncodedBatch) -> int:
        fields: dict[str, Any] = {
            "a": self.producer_group,
            "b": mq.topic,
            "c": DEFAULT_TOPIC,
            "d": 4,
            "e": mq.queue_id,
            "f": 0,
            "g": int(time.time() * 1000),
            "h": 0,
            "i": "WAIT\x01true\x02",
            "j": 0,
            "k": False,
            "m": True,
            "n": mq.broker_name,
        }
        what = f"send {len(group)} messages to {mq}"
        resp, _ = await self._broker_call(
            mq.topic, mq.broker_name, RequestCode.SEND_BATCH_MESSAGE, fields, what, body=bytes(group.data),
            once=True,
        )  # fmt: skip
        return header_int(resp, "queueOffset", what)


def delivered_through(offset: int, offsets: Sequence[int]) -> int:
    """Where the unbroken run of ``offsets`` (ascending, as a pull returns them) that starts at
    ``offset`` ends: a queue's offsets are dense, so a pull that returns fewer messages than its next
    offset passes over has skipped the rest, and the range must not be read past them."""
    if offsets and offsets[0] == offset and offsets[-1] == offset + len(offsets) - 1:
        return offset + len(offsets)  # the usual answer, checked without a loop
    run = offset
    for got in offsets:
        if got != run:
            break
        run += 1
    return run


def pull_offset_verdict(offset: int, code: int, min_offset: int, max_offset: int) -> str:
    """Classify a pull's offset against the queue bounds the broker reported.

    "below": retention removed it (data loss); "beyond": past the end (maybe not dispatched yet);
    "ok": inside ``[min_offset, max_offset]`` — pulling exactly at max is the normal "nothing new".
    Brokers answer PULL_OFFSET_MOVED for both bad cases; the bounds are checked too because a slave
    or proxy may answer "not found" instead.
    """
    if offset < min_offset:
        return "below"
    if code == ResponseCode.PULL_OFFSET_MOVED or offset > max_offset:
        return "beyond"
    return "ok"
