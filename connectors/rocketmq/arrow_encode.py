"""Arrow record batches as RocketMQ batch-send entries, with the per-row work done by Arrow kernels.

Why: the Spark writer receives Arrow batches, and turning every row into Python objects first (a
dict of properties, an OutgoingMessage, then its properties text) cost ~25 us a message, which
capped a source connector near 40k messages/s. Here the checks, the properties text (``KEYS``,
``TAGS``, user properties, ``UNIQ_KEY``, ``WAIT``) and the framing are built column-wise by
pyarrow.compute and numpy, and the entries come out back to back in one buffer
(codec.EncodedBatch). No body CRC is computed: like RocketMQ's own clients
(``MessageDecoder.encodeMessage`` writes 0), an entry's bodyCRC is 0, since the broker reads past
it and stores the CRC it computes itself; a ``crc32`` per row held the interpreter ~2 µs for a
2 KB body. The checks are the codec's, reported by row: a reserved name, an empty name or value, a
separator inside a name or value, a null property value, or properties longer than a Java short.
A row that fails a check raises ConnectorDataError (a record no retry can send) naming its source
position when it has one (the converter's ``sluice.partition`` and ``sluice.offset`` properties),
else its row number in the write.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors.errors import ConnectorDataError
from sluice.connectors.rocketmq.codec import (
    BATCH_HEAD_SIZE,
    MAX_PROPERTIES_BYTES,
    NAME_VALUE_SEPARATOR,
    PROP_KEYS,
    PROP_TAGS,
    PROP_UNIQ_KEY,
    PROP_WAIT,
    PROPERTY_SEPARATOR,
    SYSTEM_PROPERTIES,
    EncodedBatch,
)
from sluice.connectors.rocketmq.errors import MessageTooLargeError

_POSITION_PROPERTIES: Final = ("sluice.partition", "sluice.offset")  # connectors.converters sets them

# codec.batch_entry's head: size, magic (0), body CRC, flag (0), body length; big-endian int32s.
_HEAD: Final = [("size", ">i4"), ("magic", ">i4"), ("crc", ">i4"), ("flag", ">i4"), ("body_len", ">i4")]

if TYPE_CHECKING:
    from collections.abc import Callable


def encode_rows(
    batch: pa.RecordBatch, ids: Sequence[str], where: str, first_row: int = 0, stamped: str = ""
) -> EncodedBatch:
    """The batch-send entries of every row of ``batch`` (columns ``body`` and optional ``keys``,
    ``tags``, ``properties``), ``ids`` being their UNIQ_KEYs; ``where`` names the writer in errors
    and ``first_row`` is the number of the batch's first row. ``stamped`` (``stamp_text``): the
    properties text every row also carries."""
    names = batch.schema.names

    def locate(row: int) -> str:
        return row_position(batch, row, first_row)

    body = batch.column(names.index("body"))
    if body.null_count:
        raise ConnectorDataError(f"{where}: {locate(_first(pc.is_null(body)))} has a null 'body'")
    body = pc.cast(body, pa.binary()) if not pa.types.is_binary(body.type) else body
    parts = []
    for name, column in ((PROP_KEYS, "keys"), (PROP_TAGS, "tags")):
        if column in names:
            values = batch.column(names.index(column))

            def label(i: int, name: str = name) -> tuple[int, str]:
                return i, name

            _check_texts(values, None, label, where, locate)
            parts.append(pc.fill_null(_entries(pa.scalar(name), values), ""))
    if "properties" in names:
        parts.append(_user_properties(batch.column(names.index("properties")), where, locate))
    parts.append(_entries(pa.scalar(PROP_UNIQ_KEY), pa.array(ids, pa.string())))
    wait = pa.scalar(f"{stamped}{PROP_WAIT}{NAME_VALUE_SEPARATOR}true{PROPERTY_SEPARATOR}")
    props = pc.binary_join_element_wise(*parts, wait, pa.scalar("")).cast(pa.binary())
    props_len = pc.binary_length(props).to_numpy()
    if len(props_len) and props_len.max() > MAX_PROPERTIES_BYTES:
        row = int(np.argmax(props_len > MAX_PROPERTIES_BYTES))
        raise MessageTooLargeError(
            f"{where}: {locate(row)} has {props_len[row]} bytes of properties (limit {MAX_PROPERTIES_BYTES})"
        )
    # The framing around body and properties (codec.batch_entry), as columns joined row by row.
    n = len(body)
    body_len = pc.binary_length(body).to_numpy()
    heads = np.zeros(n, _HEAD)  # magic, bodyCRC (module docstring) and flag stay 0
    heads["size"] = BATCH_HEAD_SIZE + body_len + 2 + props_len
    heads["body_len"] = body_len
    entries = pc.binary_join_element_wise(
        _fixed_width(heads.tobytes(), BATCH_HEAD_SIZE, n),
        body,
        _fixed_width(props_len.astype(">i2").tobytes(), 2, n),
        props,
        pa.scalar(b""),
    )
    return EncodedBatch(entries.buffers()[2].to_pybytes(), _value_offsets(entries).tolist(), list(ids))


def stamp_text(properties: Mapping[str, str], where: str) -> str:
    """The properties text of ``properties``, which every message of a write carries, after the
    checks a row's own properties get (``encode_rows``' ``stamped``)."""
    for name, value in properties.items():
        problem = ""
        if name in SYSTEM_PROPERTIES:
            problem = "is reserved by RocketMQ"
        elif not name or not value:
            problem = "has an empty name or value, which RocketMQ does not store"
        elif any(sep in text for text in (name, value) for sep in (NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR)):
            problem = f"contains a reserved separator ({NAME_VALUE_SEPARATOR!r} or {PROPERTY_SEPARATOR!r})"
        if problem:
            raise ConnectorDataError(f"{where}: stamped property {name!r} {problem}")
    return "".join(f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in properties.items())


def row_position(batch: pa.RecordBatch, row: int, first_row: int = 0) -> str:
    """How errors name a row: ``record at partition 'p' offset 7`` from the position properties the
    converter sets, or ``row 12`` (its number in the write) for rows without them."""
    names = batch.schema.names
    if "properties" in names:
        entries = batch.column(names.index("properties"))[row].as_py() or []
        props = dict(entries.items() if isinstance(entries, dict) else entries)
        partition, offset = (props.get(name) for name in _POSITION_PROPERTIES)
        if partition is not None and offset is not None:
            return f"record at partition {partition!r} offset {offset}"
    return f"row {first_row + row}"


def _value_offsets(values: pa.Array) -> np.ndarray:
    """Where each value of a binary array starts in its data buffer (and where the last ends)."""
    return np.frombuffer(values.buffers()[1], np.int32)[values.offset : values.offset + len(values) + 1]


def _fixed_width(data: bytes, width: int, count: int) -> pa.Array:
    """``count`` binary values of ``width`` bytes each, cut from ``data``."""
    offsets = pa.array(np.arange(count + 1, dtype=np.int32) * width)
    return pa.Array.from_buffers(pa.binary(), count, [None, offsets.buffers()[1], pa.py_buffer(data)])


def _entries(names: pa.Scalar | pa.Array, values: pa.Array) -> pa.Array:
    """``name\\x01value\\x02`` per element (null where the value is null)."""
    return pc.binary_join_element_wise(
        names,
        pa.scalar(NAME_VALUE_SEPARATOR),
        values,
        pa.scalar(PROPERTY_SEPARATOR),
        pa.scalar(""),
    )


def _user_properties(maps: pa.MapArray, where: str, locate: Callable[[int], str]) -> pa.Array:
    """The properties text of each row's map (empty for a null or empty map), after the checks."""
    offsets = maps.offsets.to_numpy()  # absolute into the (unsliced) children
    start, stop = int(offsets[0]), int(offsets[-1])
    keys, items = maps.keys.slice(start, stop - start), maps.items.slice(start, stop - start)
    rows = np.repeat(np.arange(len(maps)), np.diff(offsets))
    if maps.null_count:  # a null map's segment (normally empty) is not part of the message
        keep = maps.is_valid().to_numpy(zero_copy_only=False)[rows]
        keys, items, rows = keys.filter(keep), items.filter(keep), rows[keep]
    reserved = pc.is_in(keys, pa.array(sorted(SYSTEM_PROPERTIES), pa.string()))
    if pc.any(reserved).as_py():
        i = _first(reserved)
        name = keys[i].as_py()
        hint = " (use the keys/tags fields)" if name in (PROP_KEYS, PROP_TAGS) else ""
        raise ConnectorDataError(
            f"{where}: {locate(int(rows[i]))}: property {name!r} is reserved by RocketMQ{hint}"
        )

    def label(i: int) -> tuple[int, str]:
        return int(rows[i]), str(keys[i].as_py())

    _check_texts(keys, None, label, where, locate)
    _check_texts(items, "has a null value", label, where, locate)
    row_offsets = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=len(maps)))))
    per_row = pa.ListArray.from_arrays(pa.array(row_offsets, pa.int32()), _entries(keys, items))
    return pc.binary_join(per_row, pa.scalar(""))


def _check_texts(
    values: pa.Array,
    null_problem: str | None,
    label: Callable[[int], tuple[int, str]],
    where: str,
    locate: Callable[[int], str],
) -> None:
    """Fail on the first value that is empty or holds a separator (or is null, if ``null_problem``).

    ``label(i)`` gives the row and the property name of element ``i``.
    """
    bad = pc.or_kleene(
        pc.equal(pc.binary_length(values), 0),
        pc.or_kleene(
            pc.match_substring(values, NAME_VALUE_SEPARATOR),
            pc.match_substring(values, PROPERTY_SEPARATOR),
        ),
    )
    bad = pc.fill_null(bad, null_problem is not None)
    if not pc.any(bad).as_py():
        return
    i = _first(bad)
    row, name = label(i)
    value = values[i].as_py()
    if value is None:
        problem = str(null_problem)
    elif value == "":
        problem = "has an empty name or value, which RocketMQ does not store"
    else:
        problem = f"contains a reserved separator ({NAME_VALUE_SEPARATOR!r} or {PROPERTY_SEPARATOR!r})"
    raise ConnectorDataError(f"{where}: {locate(row)}: property {name!r} {problem}")


def _first(mask: pa.Array | np.ndarray) -> int:
    return int(pc.index(mask, True).as_py())


def key_slots(keys: pa.Array, queue_count: int) -> np.ndarray:
    """Each key's queue index, ``crc32(key) % queue_count`` (Spark's ``pmod(crc32(key), n)`` of
    its UTF-8), -1 for a null key. The CRC runs over slices of the array's own buffer: a Python
    string per key (the dictionary of distinct keys this took before) cost 6 times as much on a
    table's unique keys (100,000 in 0.5 s)."""
    texts = keys if pa.types.is_binary(keys.type) else keys.cast(pa.binary())
    offsets = _value_offsets(texts).tolist()
    data = memoryview(texts.buffers()[2] or b"")
    crcs = np.fromiter(
        (zlib.crc32(data[a:b]) for a, b in zip(offsets, offsets[1:], strict=False)), np.int64, len(texts)
    )
    slots = crcs % queue_count
    if texts.null_count:
        slots[~texts.is_valid().to_numpy(zero_copy_only=False)] = -1
    return slots
