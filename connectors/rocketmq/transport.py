"""Transport layer of the RocketMQ client: connection pool, retries, response checks, routes.

Resilience, in the order a call meets it:
1. Routes are cached per topic and refreshed every ``route_refresh_s`` and after any broker failure,
   so a broker that moved (failover, restart on another address) is found through the name server.
2. One connection per server address, shared by all calls (responses matched by opaque id).
3. Retriable failures (connection refused/reset, timeout, SYSTEM_BUSY, SERVICE_NOT_AVAILABLE, flow
   control) are retried with exponential backoff up to ``max_retries`` times; others raise at once.
4. With ``access_key``/``secret_key`` every request is signed like AclClientRPCHook.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Mapping
from typing import Self

from sluice.connectors.rocketmq.codec import UniqueIdGenerator
from sluice.connectors.rocketmq.connection import Connection
from sluice.connectors.rocketmq.errors import (
    AuthError,
    BrokerUnavailableError,
    MessageTooLargeError,
    NameServerUnavailableError,
    ProtocolError,
    RequestTimeoutError,
    RetriableError,
    RocketMQError,
    SendOutcomeUnknownError,
    TopicNotFoundError,
    UnansweredError,
)
from sluice.connectors.rocketmq.remoting import RemotingCommand, RequestCode, ResponseCode, request, sign
from sluice.connectors.rocketmq.routing import parse_topic_route
from sluice.connectors.rocketmq.values import TopicRoute

log = logging.getLogger(__name__)

NAME_SERVER = "name server"
BROKER = "broker"

_RETRIABLE_CODES = {
    ResponseCode.SYSTEM_BUSY,
    ResponseCode.SERVICE_NOT_AVAILABLE,
    ResponseCode.FLOW_CONTROL,
    ResponseCode.GO_AWAY,
    ResponseCode.FLUSH_DISK_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE,
    ResponseCode.FLUSH_SLAVE_TIMEOUT,
}


class Transport:
    """Connections, retries, response checks and routes shared by the client's operations."""

    def __init__(
        self,
        namesrv_addr: str,
        *,
        access_key: str | None = None,
        secret_key: str | None = None,
        request_timeout_s: float = 10.0,
        route_refresh_s: float = 30.0,
        connect_timeout_s: float = 3.0,
        max_retries: int = 4,
        retry_backoff_s: float = 0.2,
        max_message_bytes: int = 4 * 1024 * 1024,
        consumer_group: str = "SLUICE_READER",
        producer_group: str = "SLUICE_PRODUCER",
        label: str = "",
    ) -> None:
        self._namesrvs = [a.strip() for a in namesrv_addr.split(";") if a.strip()]
        if not self._namesrvs:
            raise ValueError("rocketmq: namesrv_addr is empty (expected 'host:port[;host:port]')")
        if (access_key is None) != (secret_key is None):
            raise ValueError("rocketmq: give both access_key and secret_key, or neither")
        self._access_key = access_key
        self._secret_key = secret_key
        self.request_timeout_s = request_timeout_s
        self.route_refresh_s = route_refresh_s
        self.connect_timeout_s = connect_timeout_s
        self.max_retries = max_retries
        self.retry_backoff_s = retry_backoff_s
        self.max_message_bytes = max_message_bytes
        self.consumer_group = consumer_group
        self.producer_group = producer_group
        #: how a refusal names these servers and the keys that signed for them (a replicator's
        #: "target cluster DR (127.0.0.1:29876), signed with dest.access.key"); "" for the worker's own
        self.label = label
        self._conns: dict[str, Connection] = {}
        self._conn_locks: dict[str, asyncio.Lock] = {}
        self._routes: dict[str, tuple[float, TopicRoute]] = {}
        self._known_topics: set[str] = set()
        self._prepared_groups: set[tuple[str, str]] = set()  # (consumer group, broker address)
        self._closed = False
        self._ids = UniqueIdGenerator()

    # -- lifecycle ----------------------------------------------------------------------------------

    async def close(self) -> None:
        self._closed = True
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            await conn.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- transport ----------------------------------------------------------------------------------

    async def _connection(self, address: str, service: str) -> Connection:
        if self._closed:
            raise RocketMQError("rocketmq: client is closed")
        conn = self._conns.get(address)
        if conn is not None and not conn.closed:
            return conn
        lock = self._conn_locks.setdefault(address, asyncio.Lock())
        async with lock:
            conn = self._conns.get(address)
            if conn is None or conn.closed:
                conn = await Connection.open(address, service=service, timeout_s=self.connect_timeout_s)
                self._conns[address] = conn
            return conn

    async def _send(
        self, address: str, service: str, cmd: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        if self._access_key is not None and self._secret_key is not None:
            cmd = sign(cmd, self._access_key, self._secret_key)
        conn = await self._connection(address, service)
        return await conn.request(cmd, timeout_s or self.request_timeout_s)

    async def _backoff(self, attempt: int) -> None:
        delay = self.retry_backoff_s * (2**attempt)
        await asyncio.sleep(min(delay, 5.0) * (0.8 + 0.4 * random.random()))

    def _check(self, resp: RemotingCommand, what: str, address: str, service: str, topic: str = "") -> None:
        """Raise the error matching a non-success response code."""
        code, remark = resp.code, (resp.remark or "").strip()
        if code == ResponseCode.SUCCESS:
            return
        detail = f"{what} at {service} {address}: code {code}{': ' + remark if remark else ''}"
        if code in _RETRIABLE_CODES:
            raise BrokerUnavailableError(f"rocketmq: {detail}")
        if code == ResponseCode.TOPIC_NOT_EXIST:
            raise TopicNotFoundError(topic or "?", detail)
        low = remark.lower()
        if code == ResponseCode.NO_PERMISSION or any(
            w in low for w in ("accesskey", "signature", "acl", "auth")
        ):
            raise AuthError(
                f"rocketmq: {self.label + ' ' if self.label else ''}permission denied for {detail}"
            )
        # Brokers report an oversized message as MESSAGE_ILLEGAL from the send checks, or as
        # SYSTEM_ERROR "message body size exceeded" from the store's encoder (batch path).
        if (
            code in (ResponseCode.MESSAGE_ILLEGAL, ResponseCode.SYSTEM_ERROR)
            and any(w in low for w in ("size exceeded", "too large", "over max", "exceeds", "body size over"))
            or (code == ResponseCode.MESSAGE_ILLEGAL and any(w in low for w in ("length", "size", "big")))
        ):
            raise MessageTooLargeError(f"rocketmq: {detail}")
        raise RocketMQError(f"rocketmq: {detail}")

    async def _namesrv_call(self, code: int, fields: Mapping[str, object], what: str) -> RemotingCommand:
        """Ask each name server in turn, retrying the round with backoff; responses are unchecked."""
        last: Exception | None = None
        for attempt in range(self.max_retries + 1):
            for address in self._namesrvs:
                try:
                    return await self._send(address, NAME_SERVER, request(code, fields))
                except RetriableError as exc:
                    last = exc
            if attempt < self.max_retries:
                await self._backoff(attempt)
        raise NameServerUnavailableError(
            f"rocketmq: no name server of {';'.join(self._namesrvs)} answered {what} "
            f"after {self.max_retries + 1} attempts: {last}"
        )

    async def _broker_call(
        self,
        topic: str,
        broker_name: str,
        code: int,
        fields: Mapping[str, object],
        what: str,
        body: bytes = b"",
        accept: frozenset[int] = frozenset(),
        timeout_s: float | None = None,
        once: bool = False,
    ) -> tuple[RemotingCommand, str]:
        """Send to the master of ``broker_name`` (from the topic's route) with retries.

        Response codes in ``accept`` are returned to the caller; other failures raise. ``timeout_s``
        replaces the request timeout (a long poll is answered only after its hold). ``once``: a
        request carried out twice would do harm (a send); one written but never answered is raised
        as SendOutcomeUnknownError instead of retried, while a refusal the broker answered, or a
        connection that failed before the request was written, is retried as any other.
        """
        last: Exception | None = None
        for attempt in range(self.max_retries + 1):
            try:
                address = await self._broker_address(topic, broker_name, refresh=attempt > 0)
                resp = await self._send(address, BROKER, request(code, fields, body), timeout_s)
                if resp.code not in accept:
                    self._check(resp, what, address, BROKER, topic)
                return resp, address
            except RetriableError as exc:
                if once and isinstance(exc, (RequestTimeoutError, UnansweredError)):
                    raise SendOutcomeUnknownError(f"rocketmq: {what}: outcome unknown: {exc}") from None
                last = exc
                log.info("rocketmq: retrying %s after: %s", what, exc)
                if attempt < self.max_retries:
                    await self._backoff(attempt)
        raise BrokerUnavailableError(f"rocketmq: {what} failed after {self.max_retries + 1} attempts: {last}")

    # -- routes -------------------------------------------------------------------------------------

    async def topic_route(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        cached = self._routes.get(topic)
        now = time.monotonic()
        if cached is not None and not refresh and now - cached[0] < self.route_refresh_s:
            return cached[1]
        what = f"route of topic {topic!r}"
        try:
            resp = await self._namesrv_call(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, "acceptStandardJsonOnly": True}, what
            )
        except NameServerUnavailableError:
            if cached is not None:  # keep serving a known route while the name server is away
                log.warning("rocketmq: name server unavailable; using cached %s", what)
                return cached[1]
            raise
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            self._routes.pop(topic, None)
            raise TopicNotFoundError(topic, f"unknown to name server {';'.join(self._namesrvs)}")
        self._check(resp, what, ";".join(self._namesrvs), NAME_SERVER, topic)
        route = parse_topic_route(topic, resp.body)
        self._routes[topic] = (now, route)
        self._known_topics.add(topic)
        return route

    async def _broker_address(self, topic: str, broker_name: str, *, refresh: bool = False) -> str:
        try:
            route = await self.topic_route(topic, refresh=refresh)
        except TopicNotFoundError as exc:
            if refresh and topic in self._known_topics:
                # A restarting broker unregisters its topics from the name server; a topic this
                # client has seen before is "unavailable for now" (retried), not "unknown".
                raise BrokerUnavailableError(
                    f"rocketmq: broker {broker_name!r} holding topic {topic!r} is not registered with "
                    f"name server {';'.join(self._namesrvs)} right now ({exc})"
                ) from None
            raise
        address = route.broker_addresses.get(broker_name)
        if address is None and not refresh:
            route = await self.topic_route(topic, refresh=True)
            address = route.broker_addresses.get(broker_name)
        if address is None:
            raise BrokerUnavailableError(
                f"rocketmq: broker {broker_name!r} holding topic {topic!r} has no live master "
                f"(known: {sorted(route.broker_addresses)})"
            )
        return address


def header_int(resp: RemotingCommand, name: str, what: str) -> int:
    raw = resp.ext_fields.get(name)
    try:
        return int(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ProtocolError(
            f"rocketmq: response to {what} lacks integer header field {name!r} (got {raw!r})"
        ) from None
