"""RocketMQ remoting-protocol frames: the command value, its wire encoding, and ACL signing.

Written from the protocol's public definition (Apache RocketMQ's RemotingCommand and
RocketMQSerializable). A frame on the wire is::

    int32 length            bytes that follow (4 + header + body)
    int32 type_and_hlen     serialize type in the high byte (0 JSON, 1 ROCKETMQ), header length in the low 3
    header                  JSON object, or the compact binary ROCKETMQ layout
    body                    opaque bytes (messages, JSON documents)

Sluice sends JSON headers (every broker accepts them) and decodes both header types, because a
server answers in its own configured serialization. Every field of a request header travels as a
string in ``extFields``. Responses are matched to requests by ``opaque``.

Decoding never trusts a length: any inconsistency raises ProtocolError, so garbage from the network
cannot make the client hang, over-allocate or fail with an unrelated exception.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import struct
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from sluice.connectors.rocketmq.errors import ProtocolError

SERIALIZE_JSON = 0
SERIALIZE_ROCKETMQ = 1

FLAG_RESPONSE = 0x1
FLAG_ONEWAY = 0x2

# The version this client announces: MQVersion.Version.V5_0_0's ordinal. Brokers use the request
# version only to enable features for newer clients; 5.0.0 semantics are what Sluice relies on.
CLIENT_VERSION = 413
LANGUAGE = "PYTHON"

# Largest frame the client accepts from a server. Brokers cap frames at 16 MiB by default
# (com.rocketmq.remoting.frameMaxLength); a bigger announced length is garbage, not data.
MAX_FRAME_BYTES = 64 * 1024 * 1024

_LANGUAGES = (
    "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS",
    "RUST", "NODE_JS",
)  # fmt: skip
_LANGUAGE_CODES = {name: code for code, name in enumerate(_LANGUAGES)}

_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_BIN_FIXED = struct.Struct(">hbhiii")  # code, language, version, opaque, flag, remark length


class RequestCode:
    """Request codes used by Sluice (org.apache.rocketmq.remoting.protocol.RequestCode)."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    SEND_MESSAGE_V2 = 310
    SEND_BATCH_MESSAGE = 320


class ResponseCode:
    """Response codes Sluice distinguishes (RemotingSysResponseCode + ResponseCode)."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_NOT_EXIST = 24
    FLOW_CONTROL = 215
    GO_AWAY = 1500


_opaque_counter = itertools.count(1)
_opaque_lock = threading.Lock()


def next_opaque() -> int:
    """A process-wide request id, positive and within int32 (it travels as a Java int)."""
    with _opaque_lock:
        return next(_opaque_counter) % 0x7FFFFFFF or 1


@dataclass(frozen=True)
class RemotingCommand:
    """One request or response of the remoting protocol."""

    code: int
    opaque: int = 0
    flag: int = 0
    ext_fields: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    remark: str | None = None
    language: str = LANGUAGE
    version: int = CLIENT_VERSION
    serialize_type: int = SERIALIZE_JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)


def request(code: int, fields: Mapping[str, object] | None = None, body: bytes = b"") -> RemotingCommand:
    """A request with a fresh opaque; header field values are sent as strings, None ones omitted."""
    ext = {k: _field_str(v) for k, v in (fields or {}).items() if v is not None}
    return RemotingCommand(code=code, opaque=next_opaque(), ext_fields=ext, body=body)


def _field_str(value: object) -> str:
    if isinstance(value, bool):  # Java's Boolean.parseBoolean wants lower case
        return "true" if value else "false"
    return str(value)


def sign(cmd: RemotingCommand, access_key: str, secret_key: str) -> RemotingCommand:
    """Add ACL credentials as AclClientRPCHook does.

    Signature = base64(HmacSHA1(secret, values of all ext fields sorted by name, concatenated, then
    the body)). The AccessKey is itself one of the signed fields.
    """
    fields = {k: v for k, v in cmd.ext_fields.items() if k != "Signature"}
    fields["AccessKey"] = access_key
    content = "".join(fields[k] for k in sorted(fields)).encode("utf-8") + cmd.body
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    fields["Signature"] = base64.b64encode(digest).decode("ascii")
    return replace(cmd, ext_fields=fields)


# ---------------------------------------------------------------------------------------------------
# Encoding


def encode_frame(cmd: RemotingCommand) -> bytes:
    """The complete frame, length prefix included."""
    if cmd.serialize_type == SERIALIZE_ROCKETMQ:
        header = _encode_binary_header(cmd)
    else:
        doc: dict[str, object] = {
            "code": cmd.code,
            "language": cmd.language,
            "version": cmd.version,
            "opaque": cmd.opaque,
            "flag": cmd.flag,
            "serializeTypeCurrentRPC": "JSON",
        }
        if cmd.remark is not None:
            doc["remark"] = cmd.remark
        if cmd.ext_fields:
            doc["extFields"] = dict(cmd.ext_fields)
        header = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if len(header) > 0xFFFFFF:
        raise ProtocolError(f"rocketmq: request code {cmd.code} header of {len(header)} bytes exceeds 16 MiB")
    length = 4 + len(header) + len(cmd.body)
    return b"".join(
        (_I32.pack(length), _U32.pack((cmd.serialize_type << 24) | len(header)), header, cmd.body)
    )


def _encode_binary_header(cmd: RemotingCommand) -> bytes:
    remark = (cmd.remark or "").encode("utf-8")
    parts = [
        _BIN_FIXED.pack(
            cmd.code, _LANGUAGE_CODES.get(cmd.language, 7), cmd.version, cmd.opaque, cmd.flag, len(remark)
        ),
        remark,
    ]
    ext = []
    for k, v in cmd.ext_fields.items():
        kb, vb = k.encode("utf-8"), v.encode("utf-8")
        ext += [_U16.pack(len(kb)), kb, _I32.pack(len(vb)), vb]
    ext_bytes = b"".join(ext)
    parts += [_I32.pack(len(ext_bytes)), ext_bytes]
    return b"".join(parts)


# ---------------------------------------------------------------------------------------------------
# Decoding


def frame_length(prefix: bytes | memoryview) -> int:
    """Validate a frame's 4-byte length prefix and return how many bytes follow it."""
    if len(prefix) != 4:
        raise ProtocolError(f"rocketmq: frame length prefix has {len(prefix)} bytes, expected 4")
    (length,) = _I32.unpack(prefix)
    if length < 4 or length > MAX_FRAME_BYTES:
        raise ProtocolError(f"rocketmq: frame length {length} outside [4, {MAX_FRAME_BYTES}]")
    return length


def decode_frame(frame: bytes | memoryview) -> RemotingCommand:
    """Decode one complete frame (length prefix included); extra or missing bytes are an error."""
    view = memoryview(frame)
    length = frame_length(view[:4]) if len(view) >= 4 else frame_length(view)
    if len(view) - 4 != length:
        raise ProtocolError(f"rocketmq: frame announces {length} bytes but {len(view) - 4} follow")
    return decode_payload(view[4:])


def decode_payload(payload: bytes | memoryview) -> RemotingCommand:
    """Decode the bytes that follow a frame's length prefix."""
    view = memoryview(payload)
    if len(view) < 4:
        raise ProtocolError(f"rocketmq: frame of {len(view)} bytes has no header length")
    (type_and_len,) = _U32.unpack_from(view, 0)
    stype, hlen = type_and_len >> 24, type_and_len & 0xFFFFFF
    if hlen > len(view) - 4:
        raise ProtocolError(f"rocketmq: header length {hlen} exceeds frame of {len(view)} bytes")
    header = view[4 : 4 + hlen]
    body = bytes(view[4 + hlen :])
    if stype == SERIALIZE_JSON:
        return _decode_json_header(header, body)
    if stype == SERIALIZE_ROCKETMQ:
        return _decode_binary_header(header, body)
    raise ProtocolError(f"rocketmq: unknown header serialize type {stype}")


def _int(doc: dict[str, object], name: str, default: int | None = None) -> int:
    value = doc.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError(f"rocketmq: header field {name!r} is {value!r}, expected an integer")
    return value


def _decode_json_header(header: memoryview, body: bytes) -> RemotingCommand:
    try:
        doc = json.loads(header.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"rocketmq: JSON header is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ProtocolError(f"rocketmq: JSON header is a {type(doc).__name__}, expected an object")
    ext_raw = doc.get("extFields") or {}
    if not isinstance(ext_raw, dict):
        raise ProtocolError("rocketmq: JSON header field 'extFields' is not an object")
    ext: dict[str, str] = {}
    for k, v in ext_raw.items():
        if v is None:
            continue
        if isinstance(v, (dict, list)):
            raise ProtocolError(f"rocketmq: ext field {k!r} is not a scalar")
        ext[k] = _field_str(v)
    remark = doc.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise ProtocolError("rocketmq: JSON header field 'remark' is not a string")
    language = doc.get("language", "JAVA")
    return RemotingCommand(
        code=_int(doc, "code"),
        opaque=_int(doc, "opaque", 0),
        flag=_int(doc, "flag", 0),
        ext_fields=ext,
        body=body,
        remark=remark,
        language=language if isinstance(language, str) else "OTHER",
        version=_int(doc, "version", 0),
        serialize_type=SERIALIZE_JSON,
    )


def _decode_binary_header(header: memoryview, body: bytes) -> RemotingCommand:
    n = len(header)
    try:
        code, lang, version, opaque, flag, rlen = _BIN_FIXED.unpack_from(header, 0)
        pos = _BIN_FIXED.size
        if rlen < 0 or pos + rlen > n:
            raise ProtocolError(f"rocketmq: binary header remark length {rlen} exceeds header of {n} bytes")
        remark = header[pos : pos + rlen].tobytes().decode("utf-8") if rlen else None
        pos += rlen
        (elen,) = _I32.unpack_from(header, pos)
        pos += 4
        if elen < 0 or pos + elen != n:
            raise ProtocolError(
                f"rocketmq: binary header ext fields length {elen} does not fill header of {n}"
            )
        ext: dict[str, str] = {}
        while pos < n:
            (klen,) = _U16.unpack_from(header, pos)
            pos += 2
            if pos + klen > n:
                raise ProtocolError("rocketmq: binary header ext field name overruns the header")
            key = header[pos : pos + klen].tobytes().decode("utf-8")
            pos += klen
            (vlen,) = _I32.unpack_from(header, pos)
            pos += 4
            if vlen < 0 or pos + vlen > n:
                raise ProtocolError("rocketmq: binary header ext field value overruns the header")
            ext[key] = header[pos : pos + vlen].tobytes().decode("utf-8")
            pos += vlen
    except struct.error:
        raise ProtocolError(f"rocketmq: binary header of {n} bytes is truncated") from None
    except UnicodeDecodeError:
        raise ProtocolError("rocketmq: binary header holds invalid UTF-8") from None
    language = _LANGUAGES[lang] if 0 <= lang < len(_LANGUAGES) else "OTHER"
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        ext_fields=ext,
        body=body,
        remark=remark,
        language=language,
        version=version,
        serialize_type=SERIALIZE_ROCKETMQ,
    )
