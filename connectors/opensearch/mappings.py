"""An index mapping from the records' schema (``schema.ignore=false``), as Confluent's sink makes
one from the Connect schema.

The records' value type is what the converter built from the Connect schema (or from
``value.converter.schema``), so the mapping follows the Connect types: INT8..INT64 -> byte, short,
integer, long; FLOAT32/64 -> float, double; BOOLEAN -> boolean; BYTES -> binary; Decimal -> double
(as Confluent's sink maps it); Date and Timestamp -> date; STRING -> text with a ``keyword``
sub-field (what OpenSearch's own dynamic mapping gives a string, so exact matches, sorting and
aggregations work as users expect); STRUCT -> object with properties; ARRAY -> its element's type
(OpenSearch fields are multi-valued); MAP -> object (its keys mapped dynamically).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

_TEXT = {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}


def field_mapping(kind: pa.DataType) -> dict[str, Any] | None:
    """The mapping of one field of Arrow type ``kind`` (None: left to dynamic mapping)."""
    import pyarrow as pa

    t = pa.types
    simple = [
        (t.is_int8, "byte"),
        (t.is_int16, "short"),
        (t.is_int32, "integer"),
        (t.is_int64, "long"),
        (t.is_unsigned_integer, "long"),
        (t.is_float16, "float"),
        (t.is_float32, "float"),
        (t.is_float64, "double"),
        (t.is_boolean, "boolean"),
        (t.is_decimal, "double"),
        (t.is_date, "date"),
        (t.is_timestamp, "date"),
        (t.is_binary, "binary"),
        (t.is_large_binary, "binary"),
    ]
    for check, name in simple:
        if check(kind):
            return {"type": name}
    if t.is_string(kind) or t.is_large_string(kind):
        return dict(_TEXT)
    if t.is_struct(kind):
        return {"properties": properties(kind)}
    if t.is_list(kind) or t.is_large_list(kind):
        return field_mapping(kind.value_type)
    if t.is_map(kind):
        return {"type": "object"}
    return None


def properties(struct: pa.StructType) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i in range(struct.num_fields):
        f = struct.field(i)
        mapped = field_mapping(f.type)
        if mapped is not None:
            out[f.name] = mapped
    return out


def index_mapping(value_type: pa.DataType) -> dict[str, Any] | None:
    """The ``mappings`` of a new index for records whose value is ``value_type`` (None when the
    value is no struct: nothing to map from)."""
    import pyarrow as pa

    if not pa.types.is_struct(value_type):
        return None
    return {"properties": properties(value_type)}
