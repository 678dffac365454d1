"""Base64 text columns decoded and encoded a whole column at a time, for Connect JSON.

Kafka's JSON converter writes ``bytes`` and ``Decimal`` values as base64 text (a decimal: its
unscaled value's big-endian two's complement). Decoding them one value at a time in Python was a
fifth of a JDBC sink batch's samples on the side-by-side job (py-spy, #18): ``b64decode``, an
``int``, a ``Decimal`` per value. Here numpy decodes the column's text buffer in one pass: the
values of an Arrow string array lie back to back, and each is a whole number of four-character
groups, so the buffer is a run of groups that decode independently.

Only canonical text is taken (the alphabet, a length that is a multiple of four, ``=`` only as
the last one or two characters); for anything else these return None and the caller decodes
value by value, which names what it cannot take. Pure numpy and pyarrow.

The source's side (``texts``, ``decimal_bytes``) is the same idea backwards: each value's bytes
zero-padded to a whole number of three-byte groups, the whole buffer encoded by one
``base64.b64encode`` call, and the characters the padding stands for set to ``=``. A value at a
time, a decimal column's base64 was two fifths of a CDC snapshot batch's encode (cProfile).
"""

from __future__ import annotations

import base64
from typing import Final

import numpy as np
import pyarrow as pa

_ALPHABET: Final = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_PAD: Final = ord("=")
#: Each byte's six bits, or -1 for a byte outside the alphabet (``=`` too: checked on its own).
_SEXTETS: Final = np.full(256, -1, np.int16)
_SEXTETS[np.frombuffer(_ALPHABET, np.uint8)] = np.arange(64, dtype=np.int16)
#: The most text bytes one string array holds (int32 offsets).
_MAX_TEXT_BYTES: Final = np.iinfo(np.int32).max
#: The widest unscaled value decoded: a decimal256's (a decimal128 target checks its precision).
_DECIMAL_BYTES: Final = 32


def _values(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A string or binary array's values back to back, and where each starts (and the last ends),
    from 0: an array may be a slice of larger buffers."""
    offsets = np.frombuffer(array.buffers()[1], np.int32, len(array) + 1, array.offset * 4).astype(np.int64)
    data = array.buffers()[2]
    values = (
        np.frombuffer(data, np.uint8)[offsets[0] : offsets[-1]] if data is not None else np.zeros(0, np.uint8)
    )
    return values, offsets - offsets[0]


def decoded_bytes(texts: pa.StringArray) -> tuple[np.ndarray, np.ndarray] | None:
    """The decoded bytes of every value back to back, and where each value's start (and the last
    one's end); None unless every non-null value is canonical base64 (null values decode empty)."""
    n = len(texts)
    chars, offsets = _values(texts)
    lengths = np.diff(offsets)
    if np.any(lengths % 4):
        return None
    sextets = _SEXTETS[chars]
    pad = chars == _PAD
    # '=' only as the last character, or the last two, of a value
    ends = offsets[1:][lengths > 0]
    allowed = np.zeros(len(chars), bool)
    allowed[ends - 1] = True
    last_two = ends - 2
    allowed[last_two[pad[ends - 1]]] = True
    if np.any(pad & ~allowed) or np.any((sextets < 0) & ~pad):
        return None
    groups = np.where(pad, 0, sextets).astype(np.uint32).reshape(-1, 4)
    word = (groups[:, 0] << 18) | (groups[:, 1] << 12) | (groups[:, 2] << 6) | groups[:, 3]
    stream = np.empty((len(word), 3), np.uint8)
    stream[:, 0], stream[:, 1], stream[:, 2] = word >> 16, (word >> 8) & 0xFF, word & 0xFF
    pads = np.zeros(n, np.int64)
    has = lengths > 0
    pads[has] = pad[offsets[1:][has] - 1].astype(np.int64) + pad[np.maximum(offsets[1:][has] - 2, 0)]
    sizes = lengths // 4 * 3 - pads
    # every decoded byte is kept but the one or two a value's padding stands for
    ends3 = offsets[1:] // 4 * 3
    keep = np.ones(len(word) * 3, bool)
    keep[ends3[pads >= 1] - 1] = False
    keep[ends3[pads == 2] - 2] = False
    decoded = stream.reshape(-1)[keep]
    return decoded, np.concatenate(([0], np.cumsum(sizes)))


def binaries(texts: pa.StringArray) -> pa.Array | None:
    """``texts`` decoded as a binary array (nulls kept); None as ``decoded_bytes``."""
    found = decoded_bytes(texts)
    if found is None:
        return None
    data, offsets = found
    if offsets[-1] > np.iinfo(np.int32).max:
        return None
    validity = texts.buffers()[0] if texts.null_count else None
    if validity is not None and texts.offset:
        validity = pa.array(texts.is_valid()).buffers()[1]  # re-based to offset 0
    return pa.Array.from_buffers(
        pa.binary(), len(texts), [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)],
        null_count=texts.null_count,
    )  # fmt: skip


def decimals(texts: pa.StringArray, target: pa.Decimal128Type | pa.Decimal256Type) -> pa.Array | None:
    """Kafka Decimal payloads as ``target``: each value's bytes, sign-extended, are the decimal's
    unscaled value (a decimal256 keeps it as 32 little-endian bytes; the cast to ``target`` checks
    its precision). None as ``decoded_bytes``, or when a value is empty, wider than 32 bytes or
    over ``target``'s precision (the value-by-value path says which)."""
    found = decoded_bytes(texts)
    if found is None:
        return None
    data, offsets = found
    sizes = np.diff(offsets)
    valid = texts.is_valid().to_numpy(zero_copy_only=False)
    if np.any(valid & (sizes == 0)) or np.any(sizes > _DECIMAL_BYTES):
        return None
    n = len(texts)
    negative = np.zeros(n, bool)
    nonempty = sizes > 0
    negative[nonempty] = data[offsets[:-1][nonempty]] >= 0x80
    big_endian = np.where(negative[:, None], np.uint8(0xFF), np.uint8(0)).repeat(_DECIMAL_BYTES, 1)
    for j in range(int(sizes.max(initial=0))):
        rows = np.nonzero(j < sizes)[0]
        big_endian[rows, _DECIMAL_BYTES - sizes[rows] + j] = data[offsets[rows] + j]
    little_endian = np.ascontiguousarray(big_endian[:, ::-1])
    wide = pa.Array.from_buffers(pa.decimal256(76, target.scale), n, [None, pa.py_buffer(little_endian)])
    try:
        fitted = wide.cast(target)  # checks each value against the target's precision
    except pa.ArrowInvalid:
        return None
    return pa.Array.from_buffers(target, n, [pa.array(valid).buffers()[1], fitted.buffers()[1]])


def texts(values: pa.Array) -> pa.StringArray:
    """Each binary value as base64 text (null stays null), as ``base64.b64encode`` spells it."""
    values = values.cast(pa.binary())
    n = len(values)
    raw, offsets = _values(values)
    sizes = np.diff(offsets)
    padded_sizes = -(-sizes // 3) * 3
    padded_offsets = np.concatenate(([0], np.cumsum(padded_sizes)))
    if padded_offsets[-1] // 3 * 4 > _MAX_TEXT_BYTES:  # a string array's offsets are int32
        raise ValueError(
            f"base64 of {n:,} binary values takes {padded_offsets[-1] // 3 * 4:,} bytes, over a string "
            f"column's {_MAX_TEXT_BYTES:,}: make the batch smaller (batch.max.records)"
        )
    padded = np.zeros(int(padded_offsets[-1]), np.uint8)
    padded[np.arange(len(raw)) + np.repeat(padded_offsets[:-1] - offsets[:-1], sizes)] = raw
    chars = np.frombuffer(bytearray(base64.b64encode(padded.tobytes())), np.uint8)
    ends = padded_offsets[1:] // 3 * 4
    short = padded_sizes - sizes  # 1 or 2 bytes of padding: as many trailing '='
    chars[ends[short >= 1] - 1] = _PAD
    chars[ends[short == 2] - 2] = _PAD
    validity = pa.array(values.is_valid()).buffers()[1] if values.null_count else None
    text_offsets = pa.py_buffer(np.concatenate(([0], ends)).astype(np.int32))
    return pa.Array.from_buffers(
        pa.string(), n, [validity, text_offsets, pa.py_buffer(chars)], null_count=values.null_count
    )


def decimal_bytes(values: pa.Array) -> pa.Array:
    """Each decimal's unscaled value as its minimal big-endian two's complement bytes, as Kafka's
    Decimal logical type writes it (null stays null)."""
    width = values.type.byte_width
    n = len(values)
    data = values.buffers()[1]
    little = (
        np.frombuffer(data, np.uint8, n * width, values.offset * width).reshape(n, width)
        if data is not None and n
        else np.zeros((n, width), np.uint8)
    )
    big = little[:, ::-1]
    negative = big[:, 0] >= 0x80
    fill = np.where(negative, np.uint8(0xFF), np.uint8(0))
    # a leading byte is redundant when it only extends the sign of the byte after it
    redundant = (big[:, :-1] == fill[:, None]) & ((big[:, 1:] >= 0x80) == negative[:, None])
    stripped = np.cumprod(redundant, axis=1).sum(axis=1)
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    sizes = np.where(valid, width - stripped, 0)
    kept = np.arange(width)[None, :] >= (width - sizes)[:, None]
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int32)
    validity = pa.array(valid).buffers()[1] if values.null_count else None
    return pa.Array.from_buffers(
        pa.binary(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(big[kept]))],
        null_count=values.null_count,
    )  # fmt: skip
