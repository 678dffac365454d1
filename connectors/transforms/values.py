"""Value conversions the field transforms share, in Arrow: casts that yield null where a value does
not convert (the transform flags it), Connect's primitive types, and Java datetime patterns.

Kafka's transforms are configured with Java's names and patterns (``Cast`` to ``int32``,
``TimestampConverter`` with ``yyyy-MM-dd HH:mm:ss``); users keep those configs, so they are read
here as Kafka reads them and mapped to what pyarrow's kernels take.
"""

from __future__ import annotations

import re
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

# Connect schema types -> Arrow types (Cast's spec).
CONNECT_TYPES: Final = {
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "boolean": pa.bool_(),
    "string": pa.string(),
    "bytes": pa.binary(),
}

#: The timestamp type records carry: an instant, in UTC (what Spark's TIMESTAMP maps to).
INSTANT: Final = pa.timestamp("us", tz="UTC")

#: Java SimpleDateFormat / DateTimeFormatter letters -> strftime/strptime directives, longest first.
_JAVA_LETTERS: Final = (
    ("yyyy", "%Y"), ("uuuu", "%Y"), ("yy", "%y"), ("MMMM", "%B"), ("MMM", "%b"), ("MM", "%m"),
    ("dd", "%d"), ("HH", "%H"), ("hh", "%I"), ("mm", "%M"), ("ss", "%S"), ("EEEE", "%A"),
    ("EEE", "%a"), ("a", "%p"), ("XXX", "%z"), ("Z", "%z"), ("D", "%j"),
)  # fmt: skip
_JAVA_TOKEN: Final = re.compile(r"'([^']*)'|([A-Za-z])\2*|(.)", re.DOTALL)


def strftime_pattern(java: str) -> str:
    """A Java datetime pattern as strftime/strptime directives; ValueError naming a letter that has
    none (fractions of a second, week-based years: Arrow's kernels have no directive for them)."""
    out = []
    for match in _JAVA_TOKEN.finditer(java):
        quoted, letter, other = match.group(1), match.group(2), match.group(3)
        if quoted is not None:
            out.append(quoted.replace("%", "%%") if quoted else "'")
        elif letter is not None:
            run = match.group(0)
            directive = dict(_JAVA_LETTERS).get(run)
            if directive is None:
                raise ValueError(f"pattern letters {run!r} are not supported (supported: "
                                 f"{', '.join(k for k, _ in _JAVA_LETTERS)})")  # fmt: skip
            out.append(directive)
        else:
            out.append(other.replace("%", "%%"))
    return "".join(out)


def try_cast(values: pa.Array, target: pa.DataType) -> pa.Array:
    """``values`` cast to ``target``, null where one does not convert (Spark's ``try_cast``): text is
    trimmed first, fractions are truncated toward an integer, and an overflow does not convert.
    The whole array is cast at once; only an array holding a value that fails is cast value by
    value, to find which."""
    if pa.types.is_string(values.type) and not pa.types.is_string(target):
        values = pc.utf8_trim_whitespace(values)
    if pa.types.is_floating(values.type) and pa.types.is_string(target):
        return float_text(values)
    options = pc.CastOptions(target_type=target, allow_float_truncate=True)
    try:
        return pc.cast(values, options=options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        one_by_one = []
        for value in values:
            try:
                one_by_one.append(pc.cast(pa.array([value.as_py()], values.type), options=options)[0].as_py())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                one_by_one.append(None)
        return pa.array(one_by_one, target)


def float_text(values: pa.Array) -> pa.Array:
    """Floats as Java's ``Double.toString`` writes the common ones (``1.0``, ``NaN``, ``Infinity``),
    where Arrow writes ``1``, ``nan`` and ``inf``."""
    text = pc.cast(values, pa.string())
    whole = pc.match_substring_regex(text, r"^-?[0-9]+$")
    text = pc.if_else(whole, pc.binary_join_element_wise(text, ".0", ""), text)
    text = pc.replace_substring(text, "nan", "NaN")
    return pc.replace_substring(text, "inf", "Infinity")


def parse_instants(values: pa.Array, java_pattern: str) -> pa.Array:
    """Text as UTC instants (null where it does not parse): by the Java pattern, or as ISO 8601
    (``2024-05-01 10:00:00``, ``2024-05-01T10:00:00.5``, ``2024-05-01``) when there is none."""
    if java_pattern:
        parsed = pc.strptime(values, format=strftime_pattern(java_pattern), unit="us", error_is_null=True)
        return parsed.cast(INSTANT)
    try:
        return pc.cast(values, pa.timestamp("us")).cast(INSTANT)
    except pa.ArrowInvalid:  # a value with a zone offset, or one that is no timestamp: value by value
        return pa.array([_instant(v) for v in values.to_pylist()], INSTANT)


def _instant(text: str | None) -> object:
    for kind in (pa.timestamp("us"), INSTANT):
        try:
            return pa.array([text], pa.string()).cast(kind).cast(INSTANT)[0].as_py()
        except pa.ArrowInvalid:
            continue
    return None


def instant_text(instants: pa.Array, java_pattern: str) -> pa.Array:
    """UTC instants as text, by the Java pattern or as Spark writes a timestamp
    (``2024-05-01 10:00:00``), to the second."""
    seconds = pc.cast(instants, pa.timestamp("s", tz="UTC"), safe=False)
    fmt = strftime_pattern(java_pattern) if java_pattern else "%Y-%m-%d %H:%M:%S"
    return pc.strftime(seconds, format=fmt)
