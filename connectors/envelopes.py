"""Connect JSON envelopes (``{"schema": ..., "payload": ...}``): the head the source side's encoder
writes before each payload (``envelope_head``, connectors.arrow_messages), and the schemas a sink
task met (``SeenPrefixes``), from which its stages' decoders are planned (connectors.arrow_envelopes).

Kafka's and RocketMQ Connect's JsonConverter with ``schemas.enable`` write every key and value this
way, and a sink learns each topic's type from the envelopes themselves. Kept apart from
connectors.converters (which picks a converter per config and moves keys, headers and positions)
because keys and values share it. The pure parts (schemas from body prefixes, merging a batch's
schemas) are in connectors.connect_schemas.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from sluice.connectors.connect_json import connect_schema, spark_type
from sluice.connectors.connect_schemas import PAYLOAD_KEY, SCHEMA_KEY, envelope_schemas, merge_schemas

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

#: Given a value's type, the part of it that is read (connectors.transforms.base.PrunesValue).
Narrow = Callable[["DataType"], "DataType"]


def envelope_head(data_type: DataType, nullable: bool) -> str:
    """An envelope's text up to its payload: ``{"schema":<Connect schema>,"payload":``."""
    schema_json = json.dumps(connect_schema(data_type, nullable), separators=(",", ":"))
    return f"{SCHEMA_KEY}{schema_json}{PAYLOAD_KEY}"


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


def met_value_types(
    prefixes: Sequence[tuple[str, str]], narrow: Narrow | None = None
) -> tuple[DataType, dict[str, DataType] | None]:
    """The value type envelopes of these met ``prefixes`` (each a Connect schema's:
    SeenPrefixes) decode as, and each topic's own type (None when all are that type;
    ``merge_schemas``). Raises ValueError naming the topics when their types do not merge."""
    schemas = envelope_schemas(list(prefixes)) or []
    found: dict[str, list[DataType]] = {}
    _add_types(schemas, found)
    if narrow is not None:
        found = {topic: _distinct(narrow(t) for t in types) for topic, types in found.items()}
    return merge_schemas(found)


def _distinct(types: Iterable[DataType]) -> list[DataType]:
    """``types`` without repeats, in order (Spark types are compared, not hashed)."""
    out: list[DataType] = []
    for t in types:
        if t not in out:
            out.append(t)
    return out


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
