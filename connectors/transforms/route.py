"""Topic routing: Kafka's RegexRouter and a plain rename map.

Routers rewrite the record's ``topic`` column; the RocketMQ writer sends each record to its topic.
Kafka's RegexRouter replaces only when the regex matches the *whole* topic, with ``$1`` group refs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors.config import ConfigDef, ConfigField
from sluice.connectors.transforms.base import ArrowTransform, RecordShape, register


def _renamed_topics(records: pa.Table, rename: Callable[[str], str]) -> pa.Table:
    """``records`` with each distinct topic renamed once (a batch holds a few topics)."""
    topics = records.column("topic")
    distinct = pc.unique(topics)
    renamed = pa.array([rename(t) for t in distinct.to_pylist()], pa.string())
    column = records.schema.get_field_index("topic")
    return records.set_column(column, "topic", renamed.take(pc.index_in(topics, value_set=distinct)))


def java_replacement(replacement: str, groups: int) -> str | None:
    """A Java regex replacement (``$1``, ``${name}``, ``\\$``) as Python's ``Match.expand`` takes it,
    with Java's reading of ``$12`` (group 12 only when the pattern has that many); None where Java
    would refuse it (a ``$`` that names no group)."""
    out, i = [], 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1].replace("\\", "\\\\"))
            i += 2
        elif c == "$":
            named = re.match(r"\{([A-Za-z][A-Za-z0-9]*)\}", replacement[i + 1 :])
            if named:
                out.append(f"\\g<{named.group(1)}>")
                i += 1 + named.end()
                continue
            digits = re.match(r"[0-9]+", replacement[i + 1 :])
            if not digits:
                return None
            number, used = int(digits.group()[0]), 1
            for d in digits.group()[1:]:
                if number * 10 + int(d) > groups:
                    break
                number, used = number * 10 + int(d), used + 1
            if number > groups:
                return None
            out.append(f"\\g<{number}>")
            i += 1 + used
        else:
            out.append(c.replace("\\", "\\\\"))
            i += 1
    return "".join(out)


@register("RegexRouter", "regex-router", keyed=False)
class RegexRouter(ArrowTransform):
    """``topic`` -> ``replacement`` when ``regex`` matches the whole topic name; otherwise unchanged."""

    options_def = ConfigDef((ConfigField("regex", str), ConfigField("replacement", str)))

    def check(self) -> list[str]:
        try:
            pattern = re.compile(self.options["regex"])
        except re.error as exc:
            return [f"option 'regex': not a valid regular expression ({exc})"]
        if java_replacement(self.options["replacement"], pattern.groups) is None:
            return ["option 'replacement': names a group the regex does not have"]
        return []

    def apply(self, records: pa.Table) -> pa.Table:
        """The rename with Python's regex (``check`` compiled it), the replacement read as Java
        reads it."""
        pattern = re.compile(self.options["regex"])
        template = java_replacement(self.options["replacement"], pattern.groups) or ""

        def rename(topic: str) -> str:
            match = pattern.fullmatch(topic)
            return topic if match is None else match.expand(template)

        return _renamed_topics(records, rename)

    def reshape(self, shape: RecordShape) -> RecordShape:
        pattern = re.compile(self.options["regex"])
        match = pattern.fullmatch(shape.topic)
        if match is None:
            return shape
        return replace(
            shape, topic=match.expand(java_replacement(self.options["replacement"], pattern.groups) or "")
        )


@register("TopicRename", "topic-rename", keyed=False)
class TopicRename(ArrowTransform):
    """Rename topics by an ``old:new`` map; other topics are unchanged."""

    options_def = ConfigDef((ConfigField("renames", list[str], doc="old:new pairs"),))

    def check(self) -> list[str]:
        bad = [pair for pair in self.options["renames"] if pair.count(":") != 1 or "" in pair.split(":")]
        return [f"option 'renames': expected old:new pairs, got {bad}"] if bad else []

    def apply(self, records: pa.Table) -> pa.Table:
        """The first matching pair renames."""
        renames = self._renames()
        return _renamed_topics(records, lambda topic: renames.get(topic, topic))

    def _renames(self) -> dict[str, str]:
        renames: dict[str, str] = {}
        for pair in self.options["renames"]:
            old, new = pair.split(":")
            renames.setdefault(old, new)
        return renames

    def reshape(self, shape: RecordShape) -> RecordShape:
        return replace(shape, topic=self._renames().get(shape.topic, shape.topic))
