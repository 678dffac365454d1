"""Connect JSON envelopes in Spark: keys and values written as ``{"schema": ..., "payload": ...}``
and read back into typed columns.

Kafka's and RocketMQ Connect's JsonConverter with ``schemas.enable`` write every key and value this
way, and a sink learns each topic's type from the envelopes themselves. Kept apart from
connectors.converters (which picks a converter per config and moves keys, headers and positions)
because keys and values share it: a ``key.converter`` with schemas reads keys exactly as the value
converter reads bodies. The pure parts (schemas from body prefixes, merging a batch's schemas) are
in connectors.connect_schemas.

A text that is not an envelope while the setting asks for one, or whose schema is not a Connect
schema, is a bad record flagged in ``_sluice_error`` (as Kafka's converter fails it with a
DataException), never passed on as something else.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from sluice.connectors.connect_json import connect_schema, convert_wire, json_text, spark_type, wire_type
from sluice.connectors.connect_schemas import PAYLOAD_KEY, SCHEMA_KEY, envelope_schemas, merge_schemas
from sluice.connectors.records import flag_errors

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

_PARSED: Final = "_sluice_parsed"

#: Given a value's type, the part of it that is read (connectors.transforms.base.PrunesValue).
Narrow = Callable[["DataType"], "DataType"]


def envelope_text(column: Column, data_type: DataType, nullable: bool) -> Column:
    """``column`` as the envelope Kafka's JsonConverter writes: its Connect schema (built once, on
    the driver) spliced before each value's JSON."""
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import functions as F

    return F.concat(F.lit(envelope_head(data_type, nullable)), json_text(column, data_type), F.lit("}"))


def envelope_head(data_type: DataType, nullable: bool) -> str:
    """An envelope's text up to its payload: ``{"schema":<Connect schema>,"payload":``."""
    schema_json = json.dumps(connect_schema(data_type, nullable), separators=(",", ":"))
    return f"{SCHEMA_KEY}{schema_json}{PAYLOAD_KEY}"


def parse_json(
    df: DataFrame, text: Column, data_type: DataType, *, envelope: bool, what: str, out: str = "value"
) -> DataFrame:
    """``out`` parsed from JSON ``text`` (an envelope's payload, or a bare value) as ``data_type``;
    rows that do not fit are flagged, naming ``what`` was read.

    An envelope is parsed whole, its schema too, even when the schema is known: Jackson skips it
    faster than Spark cuts it off (measured twice: 1.1-1.3 s against 1.0-1.2 s per 100,000 JDBC
    rows, and 2.05 s against 1.49 s per 50,000 Debezium change events, docs/performance.md).
    """
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    # Decimals are Kafka's base64 inside a Connect envelope, plain JSON numbers in a bare body.
    numeric = not envelope
    wire = wire_type(data_type, numeric)
    inner = StructType([StructField("payload", wire)]) if envelope else wire
    if not isinstance(inner, StructType):
        inner = StructType([StructField("payload", wire)])
        text = F.concat(F.lit('{"payload":'), text, F.lit("}"))
        envelope = True
    schema = StructType([*inner.fields, StructField("_corrupt", StringType())])
    parsed = F.from_json(text, schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt"})
    df = df.withColumn(_PARSED, parsed)
    failed = text.isNotNull() & (F.col(_PARSED).isNull() | F.col(f"{_PARSED}._corrupt").isNotNull())
    problem = F.lit(f"json converter: {what} does not parse as {data_type.simpleString()}")
    df = flag_errors(df, failed, problem)
    if envelope:
        value = F.col(f"{_PARSED}.payload")
    else:
        value = F.struct(*[F.col(f"{_PARSED}.{f.name}").alias(f.name) for f in inner.fields])
        value = F.when(F.col(_PARSED).isNull(), F.lit(None)).otherwise(value)
    return df.withColumn(out, convert_wire(value, data_type, False, numeric)).drop(_PARSED)


def is_envelope(text: Column) -> Column:
    """Whether ``text`` is one JSON object with exactly the keys ``schema`` and ``payload`` (Kafka's
    test); the layout Kafka writes is recognised from its first bytes, without parsing."""
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import functions as F

    laid_out = text.startswith(SCHEMA_KEY) & text.contains(PAYLOAD_KEY)
    keys = F.array_sort(F.json_object_keys(text))
    return F.when(laid_out, F.lit(True)).otherwise(
        F.coalesce(keys == F.array(F.lit("payload"), F.lit("schema")), F.lit(False))
    )


def utf8_text(body: Column) -> Column:
    """A binary body as text, or null when it is not UTF-8 (the converter flags those)."""
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import functions as F

    return F.try_validate_utf8(body.cast("string"))


#: Schema prefixes a task remembers per text (Kafka's JsonConverter caches schemas the same way,
#: ``schemas.cache.size``); past it the memory starts again from the current batch's.
MAX_SEEN_PREFIXES: Final = 64


class SeenPrefixes:
    """The envelope schema prefixes a sink task met in earlier batches, per named text: the next
    batch recognises them by a byte comparison (connectors.arrow_envelopes). A prefix whose schema
    is not a Connect schema is kept too, with why, so its records are flagged, not searched again."""

    def __init__(self) -> None:
        self._seen: dict[str, list[tuple[str, str]]] = {}
        self._refused: dict[str, dict[tuple[str, str], str]] = {}
        #: a batch's prefixes were remembered: the next batch may be decoded with the schemas met
        self.complete = False

    def known(self, name: str) -> list[tuple[str, str]]:
        return self._seen.get(name, [])

    def refused(self, name: str) -> list[tuple[str, str, str]]:
        """``(topic, prefix, why)`` of the prefixes met whose schema is not a Connect schema."""
        return [(topic, prefix, why) for (topic, prefix), why in sorted(self._refused.get(name, {}).items())]

    def snapshot(self) -> tuple[object, ...]:
        """Everything a decode that assumes the met schemas depends on: equal snapshots, equal
        decodes (a sink reuses the decode's plan while its snapshot holds)."""
        seen = tuple(sorted((name, tuple(pairs)) for name, pairs in self._seen.items()))
        return seen, tuple(sorted((name, tuple(self.refused(name))) for name in self._refused))

    def knows_topics(self, name: str, topics: Iterable[str]) -> bool:
        """Whether a prefix of every one of ``topics`` is remembered for ``name``."""
        met = {topic for topic, _ in self.known(name)} | {topic for topic, _, _ in self.refused(name)}
        return set(topics) <= met

    def remember(self, found: Mapping[str, Sequence[tuple[str, str]]]) -> None:
        """Keep ``found``'s schema prefixes, each a Connect schema's or refused with why."""
        self.complete = True
        for name, found_pairs in found.items():
            pairs = []
            for pair in found_pairs:
                why = _refusal(pair)
                if why is None:
                    pairs.append(pair)
                elif len(self._refused.setdefault(name, {})) < MAX_SEEN_PREFIXES:
                    self._refused[name][pair] = why
            merged = sorted({*self.known(name), *pairs})
            self._seen[name] = merged if len(merged) <= MAX_SEEN_PREFIXES else sorted(set(pairs))


def _refusal(pair: tuple[str, str]) -> str | None:
    """Why an envelope's schema prefix is not read (None when it is a Connect schema)."""
    topic = pair[0]
    schemas = envelope_schemas([pair])
    if schemas is None:  # the schema's own text holds ,"payload": (a doc, a default)
        return (
            f"json converter: topic {topic!r}: an envelope's schema holds the text "
            "',\"payload\":', which Sluice does not read"
        )
    problem = _add_types(schemas, {})
    if problem is True:
        return None
    return f"json converter: topic {topic!r}: an envelope's schema is not a Connect schema: {problem}"


def envelope_prefixes(
    df: DataFrame, texts: Mapping[str, Column], seen: SeenPrefixes | None = None
) -> dict[str, list[tuple[str, str]]]:
    """Per named text, the distinct ``(topic, schema prefix)`` pairs of its envelopes, found in one
    Spark job: a sink whose keys and values are both envelopes (Kafka's JsonConverter default for
    both) pays one pass over its batch for their schemas, not one each. Passed to
    ``decode_envelopes`` as ``prefixes``.

    With ``seen``, a text that starts with a prefix met before (and ``PAYLOAD_KEY``) is matched
    by that comparison and counted as a short token: only texts with a new schema pay the search
    for the prefix and the distinct over its ~500 bytes (measured ~1 s per 100,000 messages on one
    core, most of the job). The result is the same; ``seen`` learns this batch's prefixes.
    """
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import functions as F

    known_of = {name: seen.known(name) if seen is not None else [] for name in texts}
    columns = []
    for name, text in texts.items():
        prefix = F.when(is_envelope(text), F.substring_index(text, PAYLOAD_KEY, 1))
        known = known_of[name]
        if known:
            matches = _prefix_matches(text, known)
            token = F.when(matches[0], F.lit(f"{_SEEN_TOKEN}0"))
            for i, match in enumerate(matches[1:], start=1):
                token = token.when(match, F.lit(f"{_SEEN_TOKEN}{i}"))
            prefix = token.otherwise(prefix)
        columns.append(prefix.alias(name))
    rows = df.select(F.col("topic"), *columns).distinct().collect()
    found: dict[str, list[tuple[str, str]]] = {}
    for name in texts:
        pairs = set()
        for row in rows:
            value = row[name]
            if value is None:
                continue
            if value.startswith(_SEEN_TOKEN):
                pairs.add(known_of[name][int(value[len(_SEEN_TOKEN) :])])
            else:
                pairs.add((str(row["topic"]), str(value)))
        found[name] = sorted(pairs)
    if seen is not None:
        seen.remember(found)
    return found


def _prefix_matches(text: Column, known: Sequence[tuple[str, str]]) -> list[Column]:
    """Per known ``(topic, schema prefix)``: whether ``text`` is an envelope of it, by a byte
    comparison (a record of that topic starting with the prefix and ``PAYLOAD_KEY``)."""
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import functions as F

    return [(F.col("topic") == topic) & text.startswith(prefix + PAYLOAD_KEY) for topic, prefix in known]


#: Stands for a remembered prefix in ``envelope_prefixes``' job; a real prefix starts ``{``.
_SEEN_TOKEN: Final = "#"


def decode_envelopes(
    df: DataFrame,
    text: Column,
    *,
    what: str,
    setting: str,
    out: str,
    own_column: str,
    prefixes: Sequence[tuple[str, str]] | None = None,
    narrow: Narrow | None = None,
) -> DataFrame:
    """``out`` typed from the envelopes in ``text``; when the batch's topics carry different
    schemas, ``own_column`` holds each record's own topic type (Spark JSON; merge_schemas).

    ``what`` names the text in errors (``body``, ``key``), ``setting`` the config key that asked
    for envelopes, so a wrong setting is named where it shows. ``prefixes``: the texts' schema
    prefixes when already found (``envelope_prefixes``); otherwise a Spark job finds them.
    ``narrow``: the part of each topic's type that is read at all (a transform's ``PrunesValue``):
    the rest is skipped by the parser, never decoded nor checked.
    """
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import functions as F

    envelope = is_envelope(text)
    df = flag_errors(
        df,
        text.isNotNull() & ~envelope,
        F.lit(
            f'json converter: {what} is not a Connect JSON envelope {{"schema", "payload"}}, as '
            f"{setting}=true expects (set it to false for plain JSON)"
        ),
    )
    if prefixes is None:
        prefixes = envelope_prefixes(df, {what: text})[what]
    by_topic, refused = _schemas_by_topic(df.where(envelope), text, prefixes)
    if narrow is not None:
        by_topic = {topic: _distinct(narrow(t) for t in types) for topic, types in by_topic.items()}
    if refused:
        reasons = F.create_map(*[F.lit(part) for item in sorted(refused.items()) for part in item])
        reason = reasons[F.get_json_object(text, "$.schema")]
        df = flag_errors(df, envelope & reason.isNotNull(), reason)
    if not by_topic:  # nothing to type: every text is flagged, or null
        return df.withColumn(out, text)
    data_type, own_types = merge_schemas(by_topic)
    df = parse_json(df, text, data_type, envelope=True, what=f"{what} envelope", out=out)
    return df if own_types is None else with_own_types(df, own_types, own_column)


def with_own_types(df: DataFrame, own_types: Mapping[str, DataType], own_column: str) -> DataFrame:
    """``df`` with ``own_column``: each record's own topic type (Spark JSON)."""
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import functions as F

    own_schema = F.lit(None).cast("string")
    for topic, own in own_types.items():
        own_schema = F.when(F.col("topic") == topic, F.lit(own.json())).otherwise(own_schema)
    return df.withColumn(own_column, own_schema)


def met_value_types(
    prefixes: Sequence[tuple[str, str]], narrow: Narrow | None = None
) -> tuple[DataType, dict[str, DataType] | None] | None:
    """The value type ``decode_envelopes`` gives envelopes of these met ``prefixes`` and each
    topic's own type (None when all are that type; ``merge_schemas``), found with no Spark job;
    None when it needs one (a schema not read from its prefix) or the types do not merge."""
    schemas = envelope_schemas(list(prefixes))
    found: dict[str, list[DataType]] = {}
    if not prefixes or schemas is None or _add_types(schemas, found) is not True:
        return None
    if narrow is not None:
        found = {topic: _distinct(narrow(t) for t in types) for topic, types in found.items()}
    try:
        return merge_schemas(found)
    except ValueError:
        return None


def _distinct(types: Iterable[DataType]) -> list[DataType]:
    """``types`` without repeats, in order (Spark types are compared, not hashed)."""
    out: list[DataType] = []
    for t in types:
        if t not in out:
            out.append(t)
    return out


def _schemas_by_topic(
    df: DataFrame, text: Column, prefixes: Sequence[tuple[str, str]]
) -> tuple[dict[str, list[DataType]], dict[str, str]]:
    """Every distinct envelope schema of the batch, per topic (one sink batch may read several
    topics, one table each, and a topic's schema may change within a batch: a column added), and
    the schemas that are not Connect schemas, by their JSON text (``$.schema``), with the reason.

    Found without parsing the JSON when it can be (``envelope_schemas``); otherwise, e.g. for a
    producer that writes ``payload`` first or a schema that is refused, by a JSON path query.
    """
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import functions as F

    schemas = envelope_schemas(list(prefixes))
    found: dict[str, list[DataType]] = {}
    if schemas is not None and _add_types(schemas, found) is True:
        return found, {}
    rows = (
        df.select(F.col("topic"), F.get_json_object(text, "$.schema").alias("s"))
        .where(F.col("s").isNotNull())
        .distinct()
        .collect()
    )
    found, refused = {}, {}
    for row in rows:
        topic, raw = str(row["topic"]), str(row["s"])
        problem = _add_types([(topic, json.loads(raw))], found)
        if problem is not True:
            refused[raw] = (
                f"json converter: topic {topic!r}: an envelope's schema is not a Connect schema: {problem}"
            )
    return found, refused


def _add_types(schemas: list[tuple[str, Any]], found: dict[str, list[DataType]]) -> bool | str:
    """Add each schema's Spark type to its topic's list in ``found``, in a stable order; True, or
    the first schema's problem (the caller then finds which messages carry it)."""
    for topic, schema in sorted(schemas, key=lambda ts: (ts[0], json.dumps(ts[1], sort_keys=True))):
        try:
            data_type = spark_type(schema)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return str(exc)
        kinds = found.setdefault(topic, [])
        if data_type not in kinds:
            kinds.append(data_type)
    return True
