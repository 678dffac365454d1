"""One asyncio TCP connection to a name server or broker, multiplexed by opaque id.

Lifecycle:
1. ``await Connection.open(address, service=...)`` connects (with a timeout) and starts a reader task.
2. ``await conn.request(cmd, timeout_s)`` writes a frame and waits for the response whose opaque
   matches; many requests may be in flight at once on one connection.
3. When the peer closes or sends garbage, every waiting request fails with BrokerUnavailableError
   (or NameServerUnavailableError) / ProtocolError and the connection reports ``closed``; the pool
   in the client then opens a new one.
4. ``await conn.close()`` fails what is still waiting and closes the socket.

Requests the server sends to the client (e.g. a broker's CHECK_TRANSACTION_STATE or
NOTIFY_CONSUMER_IDS_CHANGED) are ignored: Sluice registers no producer or consumer group.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket

from sluice.connectors.rocketmq.errors import (
    BrokerUnavailableError,
    NameServerUnavailableError,
    ProtocolError,
    RequestTimeoutError,
    RetriableError,
    UnansweredError,
)
from sluice.connectors.rocketmq.remoting import RemotingCommand, decode_payload, encode_frame, frame_length

log = logging.getLogger(__name__)

_READ_LIMIT = 4 * 1024 * 1024


def split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"rocketmq: address {address!r} is not host:port")
    return host.strip("[]"), int(port)


class Connection:
    """A connection to one server; see the module docstring for its lifecycle."""

    def __init__(
        self, address: str, service: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ):
        self.address = address
        self.service = service  # "name server" or "broker", for error messages
        self._reader = reader
        self._writer = writer
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._closed_reason: str | None = None
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    def _unavailable(self, detail: str, *, written: bool = False) -> RetriableError:
        """The error for a lost connection; ``written``: a request was on it, so the broker may have
        carried it out (UnansweredError)."""
        if self.service == "name server":
            cls: type[RetriableError] = NameServerUnavailableError
        else:
            cls = UnansweredError if written else BrokerUnavailableError
        return cls(f"rocketmq: {self.service} {self.address} {detail}")

    @classmethod
    async def open(cls, address: str, *, service: str, timeout_s: float) -> Connection:
        host, port = split_address(address)
        err_cls = NameServerUnavailableError if service == "name server" else BrokerUnavailableError
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, limit=_READ_LIMIT), timeout=timeout_s
            )
        except TimeoutError:
            raise err_cls(
                f"rocketmq: {service} {address} did not accept a connection within {timeout_s:g}s"
            ) from None
        except OSError as exc:
            raise err_cls(f"rocketmq: cannot connect to {service} {address}: {exc.strerror or exc}") from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(address, service, reader, writer)

    @property
    def closed(self) -> bool:
        return self._closed_reason is not None

    async def request(self, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send ``cmd`` and wait for its response (matched by opaque)."""
        if self._closed_reason is not None:
            raise self._unavailable(f"connection is closed ({self._closed_reason})")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        self._pending[cmd.opaque] = fut
        try:
            # One deadline for writing and answering: a peer that stopped reading (full socket
            # buffers) must time out like one that stopped answering.
            async with asyncio.timeout(timeout_s):
                self._writer.write(encode_frame(cmd))
                await self._writer.drain()
                return await fut
        except TimeoutError:
            raise RequestTimeoutError(
                f"rocketmq: {self.service} {self.address} did not answer request code {cmd.code} "
                f"within {timeout_s:g}s"
            ) from None
        except (ConnectionError, OSError) as exc:
            self._fail_all(f"write failed: {exc}")
            raise self._unavailable(f"dropped the connection: {exc}", written=True) from None
        finally:
            self._pending.pop(cmd.opaque, None)

    async def _read_loop(self) -> None:
        reason = "closed by peer"
        try:
            while True:
                prefix = await self._reader.readexactly(4)
                payload = await self._reader.readexactly(frame_length(prefix))
                cmd = decode_payload(payload)
                if not cmd.is_response:
                    continue
                fut = self._pending.get(cmd.opaque)
                if fut is not None and not fut.done():
                    fut.set_result(cmd)
        except asyncio.IncompleteReadError:
            reason = "closed by peer"
        except ProtocolError as exc:
            reason = f"sent a malformed frame: {exc}"
            log.warning("rocketmq: %s %s %s", self.service, self.address, reason)
        except (ConnectionError, OSError) as exc:
            reason = f"connection lost: {exc}"
        except asyncio.CancelledError:
            reason = "closed by client"
        finally:
            self._fail_all(reason)
            self._writer.close()

    def _fail_all(self, reason: str) -> None:
        if self._closed_reason is None:
            self._closed_reason = reason
        for fut in list(self._pending.values()):
            if not fut.done():
                fut.set_exception(self._unavailable(reason, written=True))
        self._pending.clear()

    async def close(self) -> None:
        self._fail_all("closed by client")
        self._read_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._read_task
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()
