"""The schemas of a batch of Connect JSON envelopes (``{"schema": ..., "payload": ...}``): found
cheaply from the bodies' prefixes, and merged into one Spark type for the batch.

Kept apart from connectors.converters, which applies them: these are pure functions of schema
texts and Spark types, tested by tables (tests/connectors/test_converter_schemas.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

SCHEMA_KEY: Final = '{"schema":'
PAYLOAD_KEY: Final = ',"payload":'


def envelope_schemas(prefixes: list[tuple[str, str]]) -> list[tuple[str, Any]] | None:
    """The schemas of envelopes laid out as Kafka's JsonConverter writes them, from each body's
    text up to its first ``,"payload":``; None when a body is laid out otherwise.

    Why this is exact: a prefix ``{"schema":`` + ``P`` where ``P`` parses as one JSON value means
    ``P`` is the whole value of the envelope's ``schema`` key (a JSON value ends where it ends,
    whatever follows), and comparing these short prefixes is far cheaper than parsing every
    message (bench/db_profile.py). A ``,"payload":`` inside the schema (a default value, a doc)
    leaves an unterminated ``P`` that does not parse, and the caller falls back to parsing.
    A ``null`` schema (a schemaless envelope) is skipped, as the JSON path query skips it.
    """
    found: list[tuple[str, Any]] = []
    for topic, prefix in prefixes:
        if not prefix.startswith(SCHEMA_KEY):
            return None
        try:
            schema = json.loads(prefix[len(SCHEMA_KEY) :])
        except ValueError:
            return None
        if schema is not None:
            found.append((topic, schema))
    return found


def widest_number(a: DataType, b: DataType) -> DataType | None:
    """A numeric type holding every value of both (tables of one batch often differ only there:
    an ``INT`` key in one, a ``BIGINT`` key in another); None when either is not a number."""
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import types as T

    integral = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    digits = {T.ByteType: 3, T.ShortType: 5, T.IntegerType: 10, T.LongType: 20}

    def as_decimal(t: DataType) -> tuple[int, int] | None:
        if isinstance(t, T.DecimalType):
            return t.precision - t.scale, t.scale
        return (digits[type(t)], 0) if isinstance(t, integral) else None

    if isinstance(a, integral) and isinstance(b, integral):
        return a if integral.index(type(a)) >= integral.index(type(b)) else b
    if isinstance(a, T.FloatType | T.DoubleType) or isinstance(b, T.FloatType | T.DoubleType):
        numeric = (*integral, T.DecimalType, T.FloatType, T.DoubleType)
        return T.DoubleType() if isinstance(a, numeric) and isinstance(b, numeric) else None
    da, db = as_decimal(a), as_decimal(b)
    if da is None or db is None:
        return None
    whole, scale = max(da[0], db[0]), max(da[1], db[1])
    return T.DecimalType(min(38, whole + scale), scale) if whole + scale <= 38 else None


def merge_schemas(by_topic: Mapping[str, list[DataType]]) -> tuple[DataType, dict[str, DataType] | None]:
    """One Spark type for a batch's envelope schemas, and each topic's own type when they differ.

    Structs merge by field name (every merged field nullable: a topic without it leaves it null;
    numbers of different widths widen, ``widest_number``); other differences are an error naming
    the topics. A topic's own type is the merge of its own schemas (a column added within the
    batch). The own types (None when every topic's equals the merged one) let a sink write each
    table only its own columns, with their own types (``VALUE_SCHEMA_HEADER``).
    """
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql.types import StructField, StructType

    def merge(types: list[tuple[str, DataType]]) -> DataType:
        if all(t == types[0][1] for _, t in types):
            return types[0][1]
        if not all(isinstance(t, StructType) for _, t in types):
            raise ValueError(
                "json converter: topics "
                + ", ".join(sorted({topic for topic, _ in types}))
                + " carry different non-struct schemas in one batch; give each its own sink connector"
            )
        merged: dict[str, StructField] = {}
        owners: dict[str, str] = {}
        for topic, struct in types:
            assert isinstance(struct, StructType)
            for f in struct.fields:
                if f.name in merged and merged[f.name].dataType != f.dataType:
                    a, b = merged[f.name].dataType, f.dataType
                    # nested structs (a change event's before/after rows) merge field by field too
                    both = isinstance(a, StructType) and isinstance(b, StructType)
                    wider = merge([(owners[f.name], a), (topic, b)]) if both else widest_number(a, b)
                    if wider is None:
                        raise ValueError(
                            f"json converter: field {f.name!r} is {merged[f.name].dataType.simpleString()} "
                            f"in topic {owners[f.name]!r} but {f.dataType.simpleString()} in topic "
                            f"{topic!r}; give those topics sink connectors of their own"
                        )
                    merged[f.name] = StructField(f.name, wider, True)
                merged.setdefault(f.name, StructField(f.name, f.dataType, True))
                owners.setdefault(f.name, topic)
        return StructType(list(merged.values()))

    own = {topic: merge([(topic, t) for t in types]) for topic, types in by_topic.items()}
    data_type = merge(list(own.items()))
    return data_type, (None if all(t == data_type for t in own.values()) else own)
