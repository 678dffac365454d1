"""Connection behaviour against misbehaving peers that a healthy broker cannot be made to imitate.

A tiny asyncio TCP server speaking Sluice's own frame encoding plays the peer: one that answers out
of order (responses must still reach the right request, matched by opaque), one that never answers
(RequestTimeoutError naming the service and address), one that sends garbage (every waiting request
fails with the unavailable error, never hangs), one that is not listening at all, and one that
takes a send and never answers it (stored or not, nobody knows: the client must not send it again).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from sluice.connectors.rocketmq.client import RocketMQClient
from sluice.connectors.rocketmq.connection import Connection
from sluice.connectors.rocketmq.errors import (
    AuthError,
    BrokerUnavailableError,
    NameServerUnavailableError,
    RequestTimeoutError,
    SendOutcomeUnknownError,
    UnansweredError,
)
from sluice.connectors.rocketmq.remoting import (
    FLAG_RESPONSE,
    RemotingCommand,
    decode_payload,
    encode_frame,
    frame_length,
    request,
)
from sluice.connectors.rocketmq.values import MessageQueue, OutgoingMessage

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()


async def read_command(reader: asyncio.StreamReader) -> RemotingCommand:
    prefix = await reader.readexactly(4)
    return decode_payload(await reader.readexactly(frame_length(prefix)))


def answer(req: RemotingCommand, body: bytes) -> bytes:
    return encode_frame(RemotingCommand(code=0, opaque=req.opaque, flag=FLAG_RESPONSE, body=body))


async def test_responses_are_matched_by_opaque_even_out_of_order() -> None:
    async def reverse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reqs = [await read_command(reader) for _ in range(5)]
        # a request from the server to the client is ignored, not mistaken for a response
        writer.write(encode_frame(RemotingCommand(code=40, opaque=reqs[0].opaque)))
        for req in reversed(reqs):
            writer.write(answer(req, req.ext_fields["n"].encode()))
        await writer.drain()
        await reader.read()

    async with serve(reverse) as address:
        conn = await Connection.open(address, service="broker", timeout_s=5)
        try:
            results = await asyncio.gather(*(conn.request(request(11, {"n": i}), 5) for i in range(5)))
        finally:
            await conn.close()
    assert [r.body for r in results] == [b"0", b"1", b"2", b"3", b"4"]


async def test_a_silent_peer_times_out_naming_the_address() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    async with serve(silent) as address:
        conn = await Connection.open(address, service="broker", timeout_s=5)
        try:
            with pytest.raises(RequestTimeoutError, match=f"broker {address}.*code 30"):
                await conn.request(request(30, {"topic": "T"}), 0.2)
            assert not conn.closed  # a late answer is dropped; the connection stays usable
        finally:
            await conn.close()


@pytest.mark.parametrize(
    ("garbage", "service", "error"),
    [
        (b"\x7f\xff\xff\xff", "broker", BrokerUnavailableError),  # announces a 2 GiB frame
        (b"\x00\x00\x00\x08\x00\x00\x00\x09not json", "name server", NameServerUnavailableError),
    ],
)
async def test_garbage_fails_waiting_requests_and_closes(
    garbage: bytes, service: str, error: type[Exception]
) -> None:
    async def rude(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_command(reader)
        writer.write(garbage)
        await writer.drain()
        await reader.read()

    async with serve(rude) as address:
        conn = await Connection.open(address, service=service, timeout_s=5)
        try:
            with pytest.raises(error, match="malformed frame"):
                await conn.request(request(105, {"topic": "T"}), 5)
            assert conn.closed
            with pytest.raises(error, match="connection is closed"):
                await conn.request(request(105, {"topic": "T"}), 5)
        finally:
            await conn.close()


async def test_refused_connection_names_the_service() -> None:
    async with serve(lambda r, w: asyncio.sleep(0)) as address:
        pass  # the port is now closed
    with pytest.raises(NameServerUnavailableError, match=f"cannot connect to name server {address}"):
        await Connection.open(address, service="name server", timeout_s=2)


async def test_a_peer_that_hangs_up_on_a_written_request_leaves_its_outcome_unknown() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_command(reader)
        writer.close()

    async with serve(hang_up) as address:
        conn = await Connection.open(address, service="broker", timeout_s=5)
        try:
            with pytest.raises(UnansweredError, match=f"broker {address}"):
                await conn.request(request(320, {"b": "T"}), 5)
        finally:
            await conn.close()


@pytest.mark.parametrize("answers", ["never", "hangs up"])
async def test_an_unanswered_send_is_not_sent_again(answers: str) -> None:
    """A send the broker may have stored is raised, not retried (a retry would store it twice);
    the batch's re-run finds what was stored. Reads are retried as before."""
    received: list[int] = []

    async def taker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                cmd = await read_command(reader)
            except asyncio.IncompleteReadError:
                return
            received.append(cmd.code)
            if answers == "hangs up":
                writer.close()
                return

    async with serve(taker) as address:
        client = RocketMQClient("127.0.0.1:1", request_timeout_s=0.3, max_retries=3, retry_backoff_s=0.01)

        async def at_the_peer(topic: str, broker_name: str, *, refresh: bool = False) -> str:
            return address

        client._broker_address = at_the_peer  # type: ignore[method-assign]
        try:
            with pytest.raises(SendOutcomeUnknownError, match="outcome unknown"):
                await client.send_batch(MessageQueue("T", "b", 0), [OutgoingMessage(b"x")])
            assert len(received) == 1  # sent once, never again
            received.clear()
            with pytest.raises(BrokerUnavailableError, match="after 4 attempts"):
                await client.max_offset(MessageQueue("T", "b", 0))
            assert len(received) == 4  # a read is retried
        finally:
            await client.close()


async def test_a_refusal_names_the_cluster_and_the_key() -> None:
    """A replicator's client names which cluster refused and which key signed (connectors.replicator
    .cluster): the peer answers as a broker with ACL on answers an unknown access key."""
    from sluice.connectors.replicator.cluster import dest_cluster

    async def refuses(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                req = await read_command(reader)
            except asyncio.IncompleteReadError:
                return
            writer.write(encode_frame(RemotingCommand(
                code=16, opaque=req.opaque, flag=FLAG_RESPONSE, remark="No accessKey is configured"
            )))  # fmt: skip

    async with serve(refuses) as address:
        cluster = dest_cluster({
            "dest.endpoint": address, "dest.cluster": "DR", "dest.acl.enable": "true",
            "dest.access.key": "AK", "dest.secret.key": "SK",
        })  # fmt: skip
        client = RocketMQClient(cluster.namesrv, **cluster.client_options())

        async def at_the_peer(topic: str, broker_name: str, *, refresh: bool = False) -> str:
            return address

        client._broker_address = at_the_peer  # type: ignore[method-assign]
        try:
            with pytest.raises(AuthError) as refused:
                await client.send_batch(MessageQueue("T", "b", 0), [OutgoingMessage(b"x")])
        finally:
            await client.close()
    message = str(refused.value)
    assert f"target cluster DR ({address}) (signed with dest.access.key)" in message, message
    assert "No accessKey is configured" in message and "SK" not in message
