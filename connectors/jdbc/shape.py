"""Records to table rows: which columns, which key (``pk.mode``), which rows delete (tombstones).

The batch arrives as one Arrow table (the runtime collects it in the batch's one Spark job), so the
shaping here is Arrow compute on the driver: no Spark job per table, no sort job (the rows are put
in record order with ``Table.sort_by``).

Row shape: a struct ``value`` gives one column per field. Any other value (a string, JSON text,
bytes) is written with the record's coordinates ``topic, partition, offset, key, value,
timestamp`` (``value`` as text, or as bytes when it is binary). ``pk.mode`` (Kafka Connect's JDBC sink):

* ``none``: no key; only ``insert.mode=insert``.
* ``kafka``: ``__connect_topic, __connect_partition, __connect_offset`` columns are the key.
* ``record_value``: ``pk.fields`` of the value are the key.
* ``record_key``: the record key is the key: a struct key gives its fields (``pk.fields`` or all);
  a text key gives one column named by ``pk.fields`` (typed like the value's field of that name,
  if any; taken from the key when it is a JSON object with that field, as CDC sources write it),
  or several taken from a JSON object key. Key columns replace same-named value fields.

A null value is a tombstone: with ``delete.enabled`` it deletes its key (op ``d``); without it a
struct-valued topic skips it (nothing to write), a coordinates table stores it as a null value.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sluice.connectors.jdbc.urls import Dialect
from sluice.connectors.jdbc.writes import OP_COLUMN, POSITION_COLUMNS

if TYPE_CHECKING:
    import pyarrow as pa

RECORD_FIELDS = ("topic", "partition", "offset", "key", "value", "timestamp")
KAFKA_FIELDS = ("__connect_topic", "__connect_partition", "__connect_offset")
#: Record order: the last record per key wins within a batch (connectors.jdbc.writes).
RECORD_ORDER = [("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")]


class KeySpecError(ValueError):
    """The configured key cannot be taken from the records."""


@dataclass(frozen=True)
class KeySpec:
    mode: str  # none | kafka | record_key | record_value
    fields: tuple[str, ...]
    deletes: bool


@dataclass(frozen=True)
class Shaped:
    rows: pa.Table  # typed columns, then OP_COLUMN and the position columns; in record order
    fields: pa.Schema  # the typed columns (auto.create / auto.evolve); key columns not nullable
    pk: tuple[str, ...]


Column = tuple[str, "pa.Array", "pa.DataType"]


def _text_key_columns(key: pa.Array, spec: KeySpec, value_types: dict[str, pa.DataType]) -> list[Column]:
    """Key columns from a text key: each named field of a JSON object key, or (one field) the key."""
    import pyarrow as pa  # pyarrow: config validation imports this module (the jdbc-sink class)
    import pyarrow.compute as pc

    if not spec.fields:
        raise KeySpecError("pk.mode=record_key with a text key needs pk.fields naming the key column(s)")
    simple = _integer_fields(key, spec.fields)
    # The rest, one by one: any other JSON (strings, other field orders, nesting) or plain text.
    rest = pc.invert(pc.fill_null(pc.is_valid(simple[0]), False)) if simple else None
    others = key if rest is None else key.filter(rest)
    texts = [k.decode() if isinstance(k, bytes) else k for k in others.to_pylist()]
    objects = [_json_object(t) for t in texts]
    out: list[Column] = []
    for i, n in enumerate(spec.fields):
        found = [_json_field(o, n) for o in objects]
        if len(spec.fields) == 1:  # a JSON object key that has it (a change event's key) gives it
            found = [f if f is not None else t for f, t in zip(found, texts, strict=True)]
        column = pa.array(found, pa.string())
        if simple:
            column = pc.replace_with_mask(simple[i], rest, column)
        dt = value_types.get(n, pa.string())
        out.append((n, _cast_or_null(column, dt), dt))
    return out


def _integer_fields(key: pa.Array, names: Sequence[str]) -> list[pa.Array]:
    """Per name, the digits of keys that are exactly ``{"<name>":<integer>, ...}`` in ``names``'
    order (how Spark's ``to_json`` writes a change event's integer key columns: most keys), null
    for any other key; [] when the key column is not text. Found by one regular expression over
    the column, not a JSON parse per row (0.7 s per 50,000 keys)."""
    import pyarrow as pa  # pyarrow: config validation imports this module (the jdbc-sink class)
    import pyarrow.compute as pc

    if not pa.types.is_string(key.type) and not pa.types.is_large_string(key.type):
        return []
    fields = ",".join(f'"{re.escape(n)}":(?P<f{i}>-?(?:0|[1-9][0-9]*))' for i, n in enumerate(names))
    found = pc.extract_regex(key, f"^\\{{{fields}\\}}$")
    return [pc.struct_field(found, [i]) for i in range(len(names))]


def _json_object(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:  # numbers kept as their text, as Spark's get_json_object gives them
        parsed = json.loads(text, parse_float=str, parse_int=str)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _json_field(obj: dict[str, Any] | None, name: str) -> str | None:
    if obj is None or obj.get(name) is None:
        return None
    v = obj[name]
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict | list):
        return json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    return str(v)


def _cast_or_null(texts: pa.Array, dt: pa.DataType) -> pa.Array:
    """``texts`` cast to ``dt``; a text that does not convert becomes null (Spark's cast)."""
    import pyarrow as pa  # pyarrow: config validation imports this module (the jdbc-sink class)
    import pyarrow.compute as pc

    if texts.type == dt:
        return texts
    try:
        return pc.cast(texts, dt)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.array([_cast_one(t, dt) for t in texts], dt)


def _cast_one(text: pa.Scalar, dt: pa.DataType) -> Any:
    import pyarrow as pa  # pyarrow: config validation imports this module (the jdbc-sink class)
    import pyarrow.compute as pc

    try:
        return pc.cast(text, dt).as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def shape(records: pa.Table, spec: KeySpec) -> Shaped:
    """The rows ``records`` become, before the dialect's load form (``wire``)."""
    import pyarrow as pa  # pyarrow: config validation imports this module (the jdbc-sink class)
    import pyarrow.compute as pc

    records = records.sort_by(RECORD_ORDER)
    value_type = records.schema.field("value").type
    struct_value = pa.types.is_struct(value_type)
    if not spec.deletes and struct_value:
        records = records.filter(pc.is_valid(records.column("value")))
    tombstone = pc.is_null(records.column("value").combine_chunks())
    if struct_value:
        value = records.column("value").combine_chunks()
        cols: list[Column] = [
            (f.name, child, f.type) for f, child in zip(value_type, value.flatten(), strict=True)
        ]
    else:  # binary values (value.converter=bytes) stay bytes: a BYTEA/BLOB column, byte for byte
        cols = [(c, records.column(c).combine_chunks(), records.schema.field(c).type) for c in RECORD_FIELDS]
        if not _is_binary(value_type):
            cols = [(n, _as_text(a), pa.string()) if n == "value" else (n, a, t) for n, a, t in cols]
    types = {n: t for n, _, t in cols}
    pk: tuple[str, ...] = ()
    if spec.mode == "kafka":
        kafka = [
            (KAFKA_FIELDS[0], records.column("topic").combine_chunks(), pa.string()),
            (KAFKA_FIELDS[1], records.column("partition").combine_chunks(), pa.string()),
            (KAFKA_FIELDS[2], records.column("offset").combine_chunks(), pa.int64()),
        ]
        cols, pk = [(n, pc.cast(a, t), t) for n, a, t in kafka] + cols, KAFKA_FIELDS
    elif spec.mode == "record_value":
        missing = [k for k in spec.fields if k not in types]
        if missing:
            raise KeySpecError(f"pk.fields {missing} are not fields of the records {list(types)}")
        pk = spec.fields
    elif spec.mode == "record_key":
        keys = _key_columns(records.column("key").combine_chunks(), spec, types)
        names = {n for n, _, _ in keys}
        cols = keys + [c for c in cols if c[0] not in names]
        pk = tuple(n for n, _, _ in keys)
    op = pc.if_else(tombstone, "d", "u") if spec.deletes else pa.repeat("u", records.num_rows)
    rows = pa.Table.from_arrays(
        [a for _, a, _ in cols]
        + [pc.cast(op, pa.string()), *(records.column(c) for c in ("topic", "partition", "offset"))],
        names=[n for n, _, _ in cols] + [OP_COLUMN, *POSITION_COLUMNS],
    )
    fields = pa.schema([pa.field(n, t, nullable=n not in pk) for n, _, t in cols])
    return Shaped(rows, fields, pk)


def _key_columns(key: pa.Array, spec: KeySpec, value_types: dict[str, pa.DataType]) -> list[Column]:
    import pyarrow as pa  # pyarrow: config validation imports this module (the jdbc-sink class)

    if pa.types.is_struct(key.type):
        by_name = {f.name: (child, f.type) for f, child in zip(key.type, key.flatten(), strict=True)}
        names = list(spec.fields) or list(by_name)
        missing = [n for n in names if n not in by_name]
        if missing:
            raise KeySpecError(f"pk.fields {missing} are not fields of the record key {list(by_name)}")
        return [(n, *by_name[n]) for n in names]
    return _text_key_columns(key, spec, value_types)


def _is_binary(t: pa.DataType) -> bool:
    import pyarrow as pa  # pyarrow: config validation imports this module (the jdbc-sink class)

    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t))


def _is_nested(t: pa.DataType) -> bool:
    import pyarrow as pa  # pyarrow: config validation imports this module (the jdbc-sink class)

    return bool(
        pa.types.is_struct(t) or pa.types.is_map(t) or pa.types.is_list(t) or pa.types.is_large_list(t)
    )


def _as_text(values: pa.Array) -> pa.Array:
    import pyarrow as pa  # pyarrow: config validation imports this module (the jdbc-sink class)
    import pyarrow.compute as pc

    return json_text(values) if _is_nested(values.type) else pc.cast(values, pa.string())


def json_text(values: pa.Array) -> pa.Array:
    """Nested values as compact JSON text (what a ``jsonb``/``JSON`` column takes): decimals as JSON
    numbers, binary as base64, instants as ISO-8601, non-finite floats as strings."""
    import pyarrow as pa  # pyarrow: config validation imports this module (the jdbc-sink class)

    t = values.type
    return pa.array([None if v is None else _json(v, t) for v in values.to_pylist()], pa.string())


def _json(v: Any, t: pa.DataType) -> str:
    import pyarrow as pa  # pyarrow: config validation imports this module (the jdbc-sink class)

    if v is None:
        return "null"
    if pa.types.is_struct(t):
        inner = (f"{json.dumps(f.name, ensure_ascii=False)}:{_json(v.get(f.name), f.type)}" for f in t)
        return "{" + ",".join(inner) + "}"
    if pa.types.is_map(t):
        pairs = (f"{json.dumps(str(k), ensure_ascii=False)}:{_json(x, t.item_type)}" for k, x in v)
        return "{" + ",".join(pairs) + "}"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return "[" + ",".join(_json(x, t.value_type) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if pa.types.is_decimal(t) or isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return json.dumps(v) if math.isfinite(v) else json.dumps(str(v))
    if isinstance(v, bytes):
        return json.dumps(base64.b64encode(v).decode())
    if hasattr(v, "isoformat"):
        return json.dumps(v.isoformat())
    return json.dumps(str(v), ensure_ascii=False)


def wire(dialect: Dialect, shaped: Shaped, columns: Sequence[str]) -> pa.Table:
    """The rows in the load form of ``dialect``: text COPY (PostgreSQL) or LOAD DATA (MariaDB)
    can carry. PostgreSQL: nested values as JSON, binary as ``\\x<hex>``, the rest as Arrow's CSV
    writer writes it. MariaDB: everything as text — timestamps as UTC ``yyyy-MM-dd
    HH:mm:ss.ffffff``, booleans as 1/0, binary as hex (UNHEX-ed by the merge)."""
    import pyarrow as pa  # pyarrow: config validation imports this module (the jdbc-sink class)
    import pyarrow.compute as pc

    out: list[pa.Array] = []
    for name in columns:
        values = shaped.rows.column(name).combine_chunks()
        t = values.type
        if _is_nested(t):
            values = json_text(values)
        elif _is_binary(t):
            prefix = "\\x" if dialect is Dialect.POSTGRESQL else ""
            hexed = [None if b is None else prefix + b.hex() for b in values.to_pylist()]
            values = pa.array(hexed, pa.string())
        elif dialect is Dialect.POSTGRESQL:
            pass
        elif pa.types.is_boolean(t):
            values = pc.cast(pc.cast(values, pa.int8()), pa.string())
        elif pa.types.is_timestamp(t):
            values = pc.strftime(values, "%Y-%m-%d %H:%M:%S")  # microseconds follow the seconds
        else:
            values = pc.cast(values, pa.string())
        out.append(values)
    extra = [OP_COLUMN, *POSITION_COLUMNS]
    return pa.Table.from_arrays([*out, *(shaped.rows.column(c) for c in extra)], names=[*columns, *extra])
