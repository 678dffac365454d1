"""Spark's ``to_json`` in Arrow, text for text, for what earlier releases wrote with Spark.

Two users must keep Spark's very bytes: jdbc-source's hashed offsets hash ``to_json`` of a record's
key struct (connectors.jdbc.offsets: null fields left out, ``to_json``'s default), and the file sink
writes struct, array and map values as ``to_json(value, {"ignoreNullFields": "false"})`` lines
(connectors.file.sink: null fields kept as ``null``) and other values as ``CAST(value AS STRING)``
(:func:`cast_text`). What Jackson writes: no spaces, fields in order, strings escaped as Jackson
escapes (``\\"``, ``\\\\``, ``\\b \\t \\n \\f \\r``, other control characters as ``\\u00XX``),
timestamps at millisecond precision in UTC (``2024-02-29T23:59:59.123Z``, without ``Z`` for
``TIMESTAMP_NTZ``: the workers' session zone is UTC, activities.spark), dates ``yyyy-MM-dd``,
decimals as ``BigDecimal.toString``, binary as base64, map keys as their text, and null array
elements and map values as ``null`` whatever the option. Arrow formats each column at once; Python
only what Arrow cannot (base64, floating point, strings that need escapes).

FLOAT and DOUBLE are written as Java's ``Float/Double.toString`` on JDK 19+ lays them out (the
shortest decimal that reads back, :func:`java_float_text`); the workers' JDK 17 writes a few values
differently (connectors.jdbc.offsets says which, and what that means for offsets).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors import base64_columns

#: Jackson's escapes: quote, backslash, the short forms, other control characters as \u00XX.
_ESCAPES: Final = (
    {i: f"\\u{i:04X}" for i in range(32)}
    | {ord(c): "\\" + e for c, e in zip("\b\t\n\f\r", "btnfr", strict=True)}
    | {ord('"'): '\\"', ord("\\"): "\\\\"}
)
_NEEDS_ESCAPE: Final = r'[\x00-\x1f"\\]'


def json_objects(fields: Sequence[tuple[str, pa.Array]], keep_nulls: bool = False) -> pa.Array:
    """Spark's ``to_json(struct(fields))`` per row: ``{"name":value,...}``; a null field is left
    out (``to_json``'s default) or, with ``keep_nulls`` (``ignoreNullFields=false``), ``null``."""
    if keep_nulls:
        members = [
            pc.binary_join_element_wise(_name(name), pc.fill_null(json_values(v, True), "null"), "")
            for name, v in fields
        ]
        body = pc.binary_join_element_wise(*members, ",")
    else:
        members = [
            pc.fill_null(pc.binary_join_element_wise(_name(name), json_values(v), ",", ""), "")
            for name, v in fields
        ]
        # Each member ends in its comma and no value ends in one, so trimming drops the last comma
        # only. (null_handling="skip" would join the non-null members, but pyarrow 21 then drops
        # the rows whose members are all null.)
        body = pc.utf8_rtrim(pc.binary_join_element_wise(*members, ""), characters=",")
    return pc.binary_join_element_wise("{", body, "}", "")


def json_values(values: pa.Array, keep_nulls: bool = False) -> pa.Array:
    """Each value as Jackson writes it in Spark's ``to_json`` (null stays null); ``keep_nulls``
    applies to the fields of structs at any depth."""
    kind = values.type
    if pa.types.is_struct(kind):
        fields = [(kind.field(i).name, child) for i, child in enumerate(values.flatten())]
        objects = json_objects(fields, keep_nulls) if fields else pa.array(["{}"] * len(values), pa.string())
        return pc.if_else(values.is_null(), pa.scalar(None, pa.string()), objects)
    if pa.types.is_map(kind):
        entries = values.values  # the entries of every map, as the offsets index them
        keys = _quoted(_escaped(entries.field(0).cast(pa.string())))
        items = pc.fill_null(json_values(entries.field(1), keep_nulls), "null")
        return _joined(values, pc.binary_join_element_wise(keys, items, ":"), "{", "}")
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        elements = pc.fill_null(json_values(values.values, keep_nulls), "null")
        return _joined(values, elements, "[", "]")
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind) or pa.types.is_decimal(kind):
        return values.cast(pa.string())  # BigDecimal.toString's spelling, 0E-10 included
    if pa.types.is_floating(kind):
        single = pa.types.is_float32(kind)
        return pa.array(
            [None if v is None else java_float_text(v, single) for v in values.to_pylist()], pa.string()
        )
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _quoted(_escaped(values))
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return _quoted(base64_columns.texts(values))
    if pa.types.is_date32(kind):
        return _quoted(values.cast(pa.string()))
    if pa.types.is_timestamp(kind):
        millis = pc.floor_temporal(values, unit="millisecond").cast(pa.timestamp("ms", kind.tz))
        text = millis.cast(pa.string())  # "2024-02-29 23:59:59.123", a zoned one (UTC) ending in Z
        return _quoted(pc.replace_substring(text, " ", "T", max_replacements=1))
    raise TypeError(f"no Spark JSON for {kind}")


def cast_text(values: pa.Array) -> pa.Array:
    """Spark's ``CAST(value AS STRING)`` of scalars (null stays null): decimals plainly
    (``0.0000000000``, not ``0E-10``), floating point as ``Float/Double.toString`` (``1.0E10``,
    ``NaN``), timestamps ``yyyy-MM-dd HH:mm:ss[.ffffff]`` in UTC without trailing zeros."""
    kind = values.type
    if pa.types.is_decimal(kind):
        return pa.array([None if v is None else f"{v:f}" for v in values.to_pylist()], pa.string())
    if pa.types.is_floating(kind):
        return pc.replace_substring_regex(json_values(values), '^"|"$', "")  # NaN is quoted in JSON
    if pa.types.is_timestamp(kind):
        text = pc.replace_substring_regex(
            values.cast(pa.timestamp("us", kind.tz)).cast(pa.string()), "Z$", ""
        )
        return pc.replace_substring_regex(text, r"\.0+$|(\.\d*[1-9])0+$", r"\1")  # ".120000" -> ".12"
    return values.cast(pa.string())


def _joined(lists: pa.Array, texts: pa.Array, opening: str, closing: str) -> pa.Array:
    """Each list's (or map's) element texts joined by commas between ``opening`` and ``closing``;
    a null list stays null."""
    grouped = pa.ListArray.from_arrays(
        lists.offsets, texts, mask=lists.is_null() if lists.null_count else None
    )
    return pc.binary_join_element_wise(opening, pc.binary_join(grouped, ","), closing, "")


def _name(name: str) -> str:
    return f'"{name.translate(_ESCAPES)}":'


def _escaped(values: pa.Array) -> pa.Array:
    """Jackson's string escapes; Python only when some value needs one."""
    if not pc.any(pc.match_substring_regex(values, _NEEDS_ESCAPE)).as_py():
        return values
    return pa.array([None if v is None else v.translate(_ESCAPES) for v in values.to_pylist()], pa.string())


def _quoted(text: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise('"', text, '"', "")


def java_float_text(value: float, single: bool) -> str:
    """A FLOAT (``single``) or DOUBLE as Jackson writes it: Java's ``Float/Double.toString`` layout
    of the shortest decimal that reads back as the value (JDK 19+; see the module docstring), the
    non-finite ones as strings."""
    if math.isnan(value) or math.isinf(value):
        return '"NaN"' if math.isnan(value) else ('"Infinity"' if value > 0 else '"-Infinity"')
    x = np.float32(value) if single else np.float64(value)
    if x == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign, digits, exp = _shortest(x)
    if -3 <= exp < 7:  # Java writes 10^-3 <= |x| < 10^7 plainly, the rest as d.dddEn
        whole = digits[: exp + 1].ljust(exp + 1, "0") if exp >= 0 else "0"
        fraction = digits[exp + 1 :] if exp >= 0 else "0" * (-exp - 1) + digits
        return f"{sign}{whole}.{fraction or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exp}"


def _shortest(x: np.floating) -> tuple[str, str, int]:
    """Sign, digits and exponent (``d.ddd * 10^exp``) of the shortest decimal that reads back as
    ``x``; of one digit only if no closer two-digit one does (Java's rule: ``4.9E-324``)."""
    text = np.format_float_scientific(x, unique=True, trim="-")
    mantissa, exp = text.split("e")
    if len(mantissa.lstrip("-")) == 1:
        two = np.format_float_scientific(x, precision=1, unique=False)
        if type(x)(two) == x:
            mantissa, exp = two.split("e")
    digits = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0"
    return ("-" if mantissa.startswith("-") else ""), digits, int(exp)
