"""Spark DDL (``value.converter.schema``: ``device STRING, seq BIGINT, ts TIMESTAMP``) read without a JVM.

pyspark's own ``_parse_datatype_string`` hands the text to a running SparkContext, and the record path
runs without one (a worker's first batch, a direct pipeline, a test without Spark): a declared schema
then failed with ``SESSION_OR_CONTEXT_NOT_EXISTS``. This reads the part of the grammar a record's type
is written in — the primitive types and their aliases, ``DECIMAL(p, s)``, ``VARCHAR(n)``/``CHAR(n)``,
``ARRAY<T>``, ``MAP<K, V>``, ``STRUCT<name: T, …>``, backquoted names, ``NOT NULL`` and ``COMMENT``
— into pyspark's type objects (plain Python), as Spark reads it: a list of fields is a struct.
"""

from __future__ import annotations

import re
from typing import Final

from pyspark.sql import types as T

_PRIMITIVES: Final[dict[str, T.DataType]] = {
    "string": T.StringType(),
    "boolean": T.BooleanType(),
    "tinyint": T.ByteType(),
    "byte": T.ByteType(),
    "smallint": T.ShortType(),
    "short": T.ShortType(),
    "int": T.IntegerType(),
    "integer": T.IntegerType(),
    "bigint": T.LongType(),
    "long": T.LongType(),
    "float": T.FloatType(),
    "real": T.FloatType(),
    "double": T.DoubleType(),
    "date": T.DateType(),
    "timestamp": T.TimestampType(),
    "timestamp_ltz": T.TimestampType(),
    "timestamp_ntz": T.TimestampNTZType(),
    "binary": T.BinaryType(),
    "void": T.NullType(),
}
_DECIMALS: Final = ("decimal", "dec", "numeric")
_TOKEN: Final = re.compile(r"\s*(`(?:[^`]|``)*`|'(?:[^'\\]|\\.)*'|[A-Za-z_][A-Za-z0-9_]*|\d+|[<>(),:])")


class _Reader:
    """A cursor over the DDL's tokens."""

    def __init__(self, text: str) -> None:
        self.tokens: list[str] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if m is None:
                raise ValueError(f"unexpected {text[pos:].strip()[:20]!r}")
            self.tokens.append(m.group(1))
            pos = m.end()
        self.i = 0

    def peek(self) -> str:
        return self.tokens[self.i] if self.i < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if not token or (expected is not None and token.lower() != expected):
            raise ValueError(f"expected {expected or 'more'!r}, found {token or 'the end'!r}")
        self.i += 1
        return token

    def name(self) -> str:
        token = self.take()
        if token.startswith("`"):
            return token[1:-1].replace("``", "`")
        if not re.match(r"[A-Za-z_]", token):
            raise ValueError(f"expected a field name, found {token!r}")
        return token


def _type(r: _Reader) -> T.DataType:
    word = r.take().lower()
    if word in _DECIMALS:
        if r.peek() != "(":
            return T.DecimalType(10, 0)
        r.take("(")
        precision, scale = int(r.take()), 0
        if r.peek() == ",":
            r.take(",")
            scale = int(r.take())
        r.take(")")
        return T.DecimalType(precision, scale)
    if word in ("varchar", "char"):
        r.take("(")
        length = int(r.take())
        r.take(")")
        return T.VarcharType(length) if word == "varchar" else T.CharType(length)
    if word == "array":
        r.take("<")
        element = _type(r)
        r.take(">")
        return T.ArrayType(element)
    if word == "map":
        r.take("<")
        key = _type(r)
        r.take(",")
        value = _type(r)
        r.take(">")
        return T.MapType(key, value)
    if word == "struct":
        r.take("<")
        fields = [] if r.peek() == ">" else _fields(r, colon_allowed=True)
        r.take(">")
        return T.StructType(fields)
    if word in _PRIMITIVES:
        return _PRIMITIVES[word]
    raise ValueError(f"unknown type {word!r}")


def _field(r: _Reader, colon_allowed: bool) -> T.StructField:
    name = r.name()
    if colon_allowed and r.peek() == ":":
        r.take(":")
    data_type = _type(r)
    nullable = True
    if r.peek().lower() == "not":
        r.take("not")
        r.take("null")
        nullable = False
    metadata = {}
    if r.peek().lower() == "comment":
        r.take("comment")
        comment = r.take()
        if not comment.startswith("'"):
            raise ValueError(f"expected a quoted comment, found {comment!r}")
        metadata["comment"] = comment[1:-1]
    return T.StructField(name, data_type, nullable, metadata)


def _fields(r: _Reader, colon_allowed: bool) -> list[T.StructField]:
    fields = [_field(r, colon_allowed)]
    while r.peek() == ",":
        r.take(",")
        fields.append(_field(r, colon_allowed))
    return fields


def parse_ddl(text: str) -> T.DataType:
    """The type ``text`` declares: one type (``array<int>``), or a struct of its fields
    (``a INT, b STRING`` or ``a: int, b: string``). ValueError says what it could not read."""
    r = _Reader(text)
    if not r.tokens:
        raise ValueError("empty schema")
    start = r.i
    try:
        whole = _type(r)
        if not r.peek():
            return whole
    except ValueError:
        pass
    r.i = start
    fields = _fields(r, colon_allowed=True)
    if r.peek():
        raise ValueError(f"unexpected {r.peek()!r}")
    return T.StructType(fields)
