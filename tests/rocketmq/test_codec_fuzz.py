"""Property tests of the remoting frame and message codecs (pure, no services).

1. Frames and stored messages built by Sluice's encoders decode back equal.
2. Random, truncated or bit-flipped bytes fed to the decoders raise ProtocolError — never another
   exception and never a hang (the module's pytest timeout catches runaway loops).
3. Table-driven checks of ACL signing, lenient name-server JSON and batch-entry validation.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sluice.connectors.rocketmq.codec import (
    MAGIC_V1,
    SYSFLAG_COMPRESSED,
    SYSTEM_PROPERTIES,
    UniqueIdGenerator,
    decode_messages,
    decode_properties,
    encode_batch_entries,
    encode_properties,
    encode_stored_message,
)
from sluice.connectors.rocketmq.errors import MessageTooLargeError, ProtocolError
from sluice.connectors.rocketmq.remoting import (
    SERIALIZE_JSON,
    SERIALIZE_ROCKETMQ,
    RemotingCommand,
    decode_frame,
    encode_frame,
    sign,
)
from sluice.connectors.rocketmq.routing import loads_lenient, parse_cluster_info, parse_topic_route
from sluice.connectors.rocketmq.values import Message, MessageQueue, OutgoingMessage

# No per-example deadline (timings vary on a shared machine); a hang still fails via the timeout.
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
pytestmark = pytest.mark.timeout(300)

text_nosep = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00\x01\x02"),
    min_size=1,
    max_size=20,
)
prop_names = text_nosep.filter(lambda s: s not in SYSTEM_PROPERTIES)

commands = st.builds(
    RemotingCommand,
    code=st.integers(-32768, 32767),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(0, 3),
    ext_fields=st.dictionaries(text_nosep, st.text(max_size=30), max_size=6),
    body=st.binary(max_size=200),
    remark=st.none() | st.text(min_size=1, max_size=40),
    language=st.sampled_from(["JAVA", "PYTHON", "GO"]),
    version=st.integers(0, 32767),
    serialize_type=st.sampled_from([SERIALIZE_JSON, SERIALIZE_ROCKETMQ]),
)


@FUZZ
@given(commands)
def test_frame_roundtrip(cmd: RemotingCommand) -> None:
    assert decode_frame(encode_frame(cmd)) == cmd


@FUZZ
@given(st.binary(max_size=300))
def test_random_frames_raise_protocol_error(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_frame(data)


@FUZZ
@given(commands, st.data())
def test_truncated_or_extended_frames_raise_protocol_error(cmd: RemotingCommand, data: st.DataObject) -> None:
    frame = encode_frame(cmd)
    cut = data.draw(st.integers(0, len(frame) - 1))
    with pytest.raises(ProtocolError):
        decode_frame(frame[:cut])
    with pytest.raises(ProtocolError):
        decode_frame(frame + b"\x00")


@FUZZ
@given(commands, st.data())
def test_corrupted_frames_never_raise_anything_else(cmd: RemotingCommand, data: st.DataObject) -> None:
    frame = bytearray(encode_frame(cmd))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.integers(0, 255))
    with contextlib.suppress(ProtocolError):
        decode_frame(bytes(frame))


messages = st.builds(
    Message,
    topic=st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-%0123456789", min_size=1, max_size=200),
    broker_name=st.just("broker-a"),
    queue_id=st.integers(0, 1000),
    queue_offset=st.integers(0, 2**62),
    body=st.binary(max_size=300),
    keys=st.none() | text_nosep,
    tags=st.none() | text_nosep,
    properties=st.dictionaries(prop_names, text_nosep, max_size=5),
    born_timestamp_ms=st.integers(0, 2**45),
    store_timestamp_ms=st.integers(0, 2**45),
    msg_id=st.text(alphabet="0123456789ABCDEF", min_size=32, max_size=32),
)
hosts = st.sampled_from([b"\x7f\x00\x00\x01", b"\x20\x01" + b"\x00" * 13 + b"\x01"])


@FUZZ
@given(st.lists(messages, min_size=1, max_size=5), hosts, hosts)
def test_stored_messages_roundtrip(msgs: list[Message], born: bytes, store: bytes) -> None:
    buf = b"".join(
        encode_stored_message(m, born_host=born, store_host=store, system_properties={"UNIQ_KEY": m.msg_id})
        for m in msgs
    )
    assert decode_messages(buf, "broker-a") == msgs


def test_offset_msg_id_without_uniq_key() -> None:
    msg = Message("T", "broker-a", 1, 7, b"b", None, None, {}, 1, 2, "")
    buf = encode_stored_message(msg, commit_log_offset=0x1234)
    (decoded,) = decode_messages(buf, "broker-a")
    # store host 127.0.0.1, port 10911, commit log offset: RocketMQ's offset message id
    assert decoded.msg_id == "7F00000100002A9F0000000000001234"


def test_compressed_body_is_inflated() -> None:
    msg = Message("T", "broker-a", 0, 0, b"payload " * 50, "k", "t", {"a": "1"}, 1, 2, "A" * 32)
    raw = encode_stored_message(
        Message(**{**msg.__dict__, "body": zlib.compress(msg.body)}),
        sysflag=SYSFLAG_COMPRESSED | (3 << 8),
        system_properties={"UNIQ_KEY": msg.msg_id},
    )
    assert decode_messages(raw, "broker-a") == [msg]


@FUZZ
@given(st.lists(messages, min_size=1, max_size=3), st.data())
def test_truncated_message_buffers_raise_protocol_error(msgs: list[Message], data: st.DataObject) -> None:
    parts = [encode_stored_message(m) for m in msgs]
    buf = b"".join(parts)
    # A cut exactly between two messages leaves a valid (shorter) pull body, so avoid those.
    boundaries = {sum(len(p) for p in parts[:i]) for i in range(1, len(parts))}
    cut = data.draw(st.integers(1, len(buf) - 1).filter(lambda c: c not in boundaries))
    with pytest.raises(ProtocolError):
        decode_messages(buf[:cut], "broker-a")


@FUZZ
@given(st.lists(messages, min_size=1, max_size=3), st.data())
def test_corrupted_message_buffers_never_raise_anything_else(
    msgs: list[Message], data: st.DataObject
) -> None:
    buf = bytearray(b"".join(encode_stored_message(m) for m in msgs))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
    with contextlib.suppress(ProtocolError):
        decode_messages(bytes(buf), "broker-a")


@FUZZ
@given(st.binary(min_size=1, max_size=400))
def test_random_message_buffers_raise_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_messages(data, "broker-a")


@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes_with_valid_magic_raise_protocol_error(tail: bytes) -> None:
    data = struct.pack(">ii", 8 + len(tail), MAGIC_V1) + tail
    with pytest.raises(ProtocolError):
        decode_messages(data, "broker-a")


@FUZZ
@given(st.dictionaries(prop_names, text_nosep, max_size=8))
def test_properties_roundtrip(props: dict[str, str]) -> None:
    assert decode_properties(encode_properties(props)) == props


outgoing = st.builds(
    OutgoingMessage,
    body=st.binary(max_size=100),
    keys=st.none() | text_nosep,
    tags=st.none() | text_nosep,
    properties=st.dictionaries(prop_names, text_nosep, max_size=3),
)


@FUZZ
@given(st.lists(outgoing, min_size=1, max_size=5))
def test_batch_entries_layout(msgs: list[OutgoingMessage]) -> None:
    ids = UniqueIdGenerator().take(len(msgs))
    entries = encode_batch_entries(msgs, ids, "T")
    for msg, uniq, entry in zip(msgs, ids, entries, strict=True):
        # magic, bodyCRC and flag 0, as RocketMQ's MessageDecoder.encodeMessage writes them
        body_len = len(msg.body)
        assert struct.unpack_from(">iiiii", entry) == (len(entry), 0, 0, 0, body_len)
        assert entry[20 : 20 + body_len] == msg.body
        (plen,) = struct.unpack_from(">h", entry, 20 + body_len)
        props = decode_properties(entry[22 + body_len :].decode())
        assert plen == len(entry) - 22 - body_len
        expected = dict(msg.properties)
        expected.update({"UNIQ_KEY": uniq, "WAIT": "true"})
        if msg.keys is not None:
            expected["KEYS"] = msg.keys
        if msg.tags is not None:
            expected["TAGS"] = msg.tags
        assert props == expected


@pytest.mark.parametrize(
    ("msg", "error", "fragment"),
    [
        (OutgoingMessage(b"x", properties={"KEYS": "k"}), ValueError, "reserved"),
        (OutgoingMessage(b"x", properties={"a\x01": "v"}), ValueError, "separator"),
        (OutgoingMessage(b"x", properties={"a": ""}), ValueError, "empty"),
        (OutgoingMessage(b"x", tags="t\x02"), ValueError, "separator"),
        (OutgoingMessage(b"x", properties={"a": "v" * 40000}), MessageTooLargeError, "properties"),
        (OutgoingMessage("text"), TypeError, "not bytes"),  # type: ignore[arg-type]
    ],
)
def test_batch_entry_validation(msg: OutgoingMessage, error: type[Exception], fragment: str) -> None:
    with pytest.raises(error, match=fragment) as info:
        encode_batch_entries([OutgoingMessage(b"ok"), msg], ["A" * 32, "B" * 32], "TopicX")
    assert "message 1" in str(info.value) and "TopicX" in str(info.value)


def test_unique_ids_are_unique_and_shaped_like_uniq_key() -> None:
    gen = UniqueIdGenerator()
    ids = gen.take(5000) + gen.take(5000)
    assert len(set(ids)) == 10000
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


def test_acl_signature_matches_the_documented_algorithm() -> None:
    cmd = RemotingCommand(code=10, opaque=1, ext_fields={"topic": "T", "b": "2", "a": "1"}, body=b"BODY")
    signed = sign(cmd, "ak", "sk")
    # Values sorted by field name (AccessKey, a, b, topic), concatenated, then the body.
    content = b"ak" + b"1" + b"2" + b"T" + b"BODY"
    expected = base64.b64encode(hmac.new(b"sk", content, hashlib.sha1).digest()).decode()
    assert signed.ext_fields == {"topic": "T", "b": "2", "a": "1", "AccessKey": "ak", "Signature": expected}
    assert sign(signed, "ak", "sk") == signed  # re-signing ignores the old signature


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"a":{0:"x:1",1:"y"}}', {"a": {"0": "x:1", "1": "y"}}),
        (b'{"a":"{0:not a key}"}', {"a": "{0:not a key}"}),
        (b'{"a":"q\\"{1:z}", "b":{2:"w"}}', {"a": 'q"{1:z}', "b": {"2": "w"}}),
    ],
)
def test_lenient_json(raw: bytes, expected: object) -> None:
    assert loads_lenient(raw, "doc") == expected


def test_route_and_cluster_parsing() -> None:
    route = parse_topic_route(
        "T",
        b'{"queueDatas":[{"brokerName":"b2","readQueueNums":2,"writeQueueNums":1,"perm":6},'
        b'{"brokerName":"b1","readQueueNums":1,"writeQueueNums":1,"perm":2},'
        b'{"brokerName":"b3","readQueueNums":1,"writeQueueNums":1,"perm":6}],'
        b'"brokerDatas":[{"brokerName":"b1","brokerAddrs":{0:"h1:1"}},{"brokerName":"b2","brokerAddrs":{"0":"h2:1",'
        b'"1":"h2s:1"}},{"brokerName":"b3","brokerAddrs":{"1":"slave:1"}}]}',
    )
    assert route.queues == (MessageQueue("T", "b2", 0), MessageQueue("T", "b2", 1))
    assert route.writable_queues == (MessageQueue("T", "b1", 0), MessageQueue("T", "b2", 0))
    assert route.broker_addresses == {"b1": "h1:1", "b2": "h2:1"}
    info = parse_cluster_info(
        b'{"brokerAddrTable":{"b1":{"brokerName":"b1","brokerAddrs":{0:"h1:1"}}},'
        b'"clusterAddrTable":{"C":["b1"]}}'
    )
    assert info.masters == {"b1": "h1:1"} and info.clusters == {"C": ("b1",)}


@pytest.mark.parametrize("raw", [b"\xff", b"[1,2]", b'{"queueDatas":{}}', b'{"queueDatas":[{"perm":"x"}]}'])
def test_malformed_routes_raise_protocol_error(raw: bytes) -> None:
    with pytest.raises(ProtocolError, match="route of topic 'T'"):
        parse_topic_route("T", raw)
