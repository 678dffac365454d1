"""jdbc-source's hashed record offsets, bit for bit as the Spark expression of earlier releases.

Before sources spoke Arrow (#18) a record's offset in the hashed modes (timestamp,
timestamp+incrementing, incrementing on a ``DECIMAL(20,0)`` id, bulk) was the Spark expression
``xxhash64(parts) & (2^63 - 1)``, parts being the coalesced timestamp columns, the incrementing
column, and ``to_json`` of the key struct (of every column when the table has no key). Offsets
identify records in a topic: the runtime's re-run de-duplication (activities.source_runner) matches
the records of a re-run to the messages an earlier attempt sent by partition and offset, so this
module must give the very numbers Spark gave, or a batch interrupted across the upgrade is sent
twice. It reproduces:

- Spark's ``xxhash64``: XXH64 seeded 42, each non-null part hashed with the previous hash as the
  seed (a null is skipped); integers of up to 32 bits as a 4-byte int, ``BIGINT`` and timestamps
  (microseconds) as an 8-byte long (both in numpy, a column at a time), decimals of more than 18
  digits as ``BigInteger.toByteArray`` of the unscaled value and strings as their UTF-8 bytes (the
  ``xxhash`` package, a call per row);
- Spark's ``to_json`` of the key struct (Jackson; null fields left out), with
  ``connectors.spark_json.json_objects``.

Known difference, FLOAT and DOUBLE: Jackson writes them with Java's ``Float/Double.toString``,
which up to JDK 18 (the workers run JDK 17) is not always the shortest decimal that reads back:
``2e23`` is ``1.9999999999999998E23``, ``2^-44`` is ``5.6843418860808015E-14``. Its choice could
only be reproduced by porting the JDK's own algorithm; ``spark_json.java_float_text`` writes the shortest
decimal in Java's layout, which is what JDK 19+ prints (checked against Spark on JDK 25: no
difference in 200,000 random doubles and floats). On JDK 17 (measured with Spark 4.3): most
doubles from 1e16 to 1e19 differ, elsewhere they are rare (none in a sweep of 200,000 doubles of
15 digits over every exponent; 2e23 and 2^-44 are such rare ones); most floats from 1e7 up
differ, and the smallest subnormals. A record
whose key holds such a value (or, in a keyless table or query, whose row does) gets a new offset
across the upgrade, so a batch interrupted by the upgrade sends it twice
(tests/connectors/test_jdbc_source_offsets.py pins this down). Dates and timestamps are those of
years 1-9999, all the drivers read.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Final

import numpy as np
import pyarrow as pa
import xxhash

SEED: Final = 42
MASK: Final = (1 << 63) - 1
#: XXH64's primes.
_P1: Final = np.uint64(0x9E3779B185EBCA87)
_P2: Final = np.uint64(0xC2B2AE3D27D4EB4F)
_P3: Final = np.uint64(0x165667B19E3779F9)
_P4: Final = np.uint64(0x85EBCA77C2B2AE63)
_P5: Final = np.uint64(0x27D4EB2F165667C5)
_MAX_LONG_DIGITS: Final = 18  # Spark hashes a decimal of at most 18 digits as its unscaled long


# ---- xxhash64 ------------------------------------------------------------------------------------
def hashed_offsets(parts: Sequence[pa.Array]) -> pa.Array:
    """``xxhash64(*parts) & (2^63 - 1)`` per row, as Spark computes it (see the module docstring)."""
    hashes = np.full(len(parts[0]), SEED, np.uint64)
    for part in parts:
        hashes = _hash_part(part, hashes)
    return pa.array((hashes & np.uint64(MASK)).astype(np.int64), pa.int64())


def _hash_part(part: pa.Array, seeds: np.ndarray) -> np.ndarray:
    """Every row's hash of ``part`` seeded with its previous hash; a null keeps the seed."""
    kind = part.type
    if pa.types.is_string(kind):
        return _hash_bytes(part.cast(pa.binary()).to_pylist(), seeds)
    if pa.types.is_decimal(kind) and kind.precision > _MAX_LONG_DIGITS:
        values = [None if d is None else _java_bytes(_unscaled(d, kind.scale)) for d in part.to_pylist()]
        return _hash_bytes(values, seeds)
    valid = part.is_valid().to_numpy(zero_copy_only=False)
    if pa.types.is_int8(kind) or pa.types.is_int16(kind) or pa.types.is_int32(kind):
        ints = part.cast(pa.int32()).fill_null(0).to_numpy().view(np.uint32).astype(np.uint64)
        return np.where(valid, _hash_int(ints, seeds), seeds)
    if pa.types.is_int64(kind) or pa.types.is_timestamp(kind):
        longs = part.cast(pa.int64()).fill_null(0).to_numpy().view(np.uint64)
        return np.where(valid, _hash_long(longs, seeds), seeds)
    raise TypeError(f"no Spark hash for {kind}")


def _hash_bytes(values: Sequence[bytes | None], seeds: np.ndarray) -> np.ndarray:
    hashes = [
        seed if v is None else xxhash.xxh64_intdigest(v, seed)
        for v, seed in zip(values, seeds.tolist(), strict=True)
    ]
    return np.array(hashes, np.uint64)


def _unscaled(value: Decimal, scale: int) -> int:
    """The decimal's unscaled integer at the column's scale (exact: no context rounding)."""
    sign, digits, exponent = value.as_tuple()
    n = int("".join(map(str, digits)) or "0") * 10 ** (int(exponent) + scale)
    return -n if sign else n


def _java_bytes(n: int) -> bytes:
    """``BigInteger.toByteArray``: the shortest big-endian two's complement, sign bit included."""
    bits = n.bit_length() if n >= 0 else (~n).bit_length()
    return n.to_bytes(bits // 8 + 1, "big", signed=True)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _hash_int(values: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """XXH64 of a 4-byte little-endian input (Spark's ``XXH64.hashInt``), per row."""
    h = seeds + _P5 + np.uint64(4)
    h ^= values * _P1
    return _avalanche(_rotl(h, 23) * _P2 + _P3)


def _hash_long(values: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """XXH64 of an 8-byte little-endian input (Spark's ``XXH64.hashLong``), per row."""
    h = seeds + _P5 + np.uint64(8)
    h ^= _rotl(values * _P2, 31) * _P1
    return _avalanche(_rotl(h, 27) * _P1 + _P4)


def _avalanche(h: np.ndarray) -> np.ndarray:
    h ^= h >> np.uint64(33)
    h *= _P2
    h ^= h >> np.uint64(29)
    h *= _P3
    return h ^ (h >> np.uint64(32))
