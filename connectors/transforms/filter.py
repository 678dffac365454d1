"""Kafka's Filter with predicates (TopicNameMatches, HasHeaderKey, RecordIsTombstone, negate), plus a
SQL ``condition`` shortcut.

Filter drops the records for which its predicate holds (``negate=true``: keeps only those).
Kafka's patterns must match the whole topic name, so patterns are anchored here too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors.config import ConfigDef, ConfigField
from sluice.connectors.record_tables import column, has_header, keep
from sluice.connectors.records import keep_where
from sluice.connectors.transforms.base import ArrowTransform, SparkTransform, Transform, register

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

PREDICATES = ("TopicNameMatches", "HasHeaderKey", "RecordIsTombstone")
_KAFKA_PREFIX = "org.apache.kafka.connect.transforms.predicates."


def _predicate_type(raw: str) -> str:
    return raw.strip().removeprefix(_KAFKA_PREFIX)


def _valid_regex(pattern: str) -> str | None:
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"not a valid regular expression ({exc})"
    return None


@register("Filter", "filter", keyed=False)
class Filter(ArrowTransform):
    """Drop records matching the predicate (or a SQL ``condition`` that drops rows where it is true:
    Spark SQL, so such a Filter is a :class:`ConditionFilter`, run in the batch's Spark job)."""

    accepts_predicate = True
    options_def = ConfigDef(
        (
            ConfigField("predicate.type", str, "", doc="TopicNameMatches | HasHeaderKey | RecordIsTombstone"),
            ConfigField("predicate.pattern", str, "", doc="TopicNameMatches: regex over the whole topic"),
            ConfigField("predicate.name", str, "", doc="HasHeaderKey: header key"),
            ConfigField("negate", bool, False, doc="invert the predicate: keep only matching records"),
            ConfigField(
                "condition", str, "", doc="Spark SQL boolean expression; rows where true are dropped"
            ),
        )
    )

    def check(self) -> list[str]:
        kind = _predicate_type(self.options["predicate.type"])
        condition = self.options["condition"]
        if bool(kind) == bool(condition):
            return ["set exactly one of a predicate or option 'condition'"]
        if kind and kind not in PREDICATES:
            return [f"unknown predicate type {kind!r} (known: {', '.join(PREDICATES)})"]
        if kind == "TopicNameMatches":
            if not self.options["predicate.pattern"]:
                return ["predicate TopicNameMatches needs option 'pattern'"]
            problem = _valid_regex(self.options["predicate.pattern"])
            return [f"predicate option 'pattern': {problem}"] if problem else []
        if kind == "HasHeaderKey" and not self.options["predicate.name"]:
            return ["predicate HasHeaderKey needs option 'name'"]
        return []

    def configure(self, alias: str, options: Mapping[str, Any]) -> Transform:
        """This Filter, or a :class:`ConditionFilter` when its option ``condition`` is set."""
        super().configure(alias, options)
        if self.options["condition"]:
            return ConditionFilter(self)
        return self

    def matches(self, records: pa.Table) -> pa.Array:
        """Per record, whether the predicate holds (never null)."""
        kind = _predicate_type(self.options["predicate.type"])
        if kind == "TopicNameMatches":
            pattern = re.compile(self.options["predicate.pattern"])
            topics = column(records, "topic")
            distinct = pc.unique(topics)  # a batch holds a few topics: each is matched once
            hits = pa.array(
                [t is not None and pattern.fullmatch(t) is not None for t in distinct.to_pylist()]
            )
            return pc.fill_null(hits.take(pc.index_in(topics, value_set=distinct)), False)
        if kind == "HasHeaderKey":
            return has_header(column(records, "headers"), self.options["predicate.name"])
        return pc.is_null(column(records, "value"))

    def apply(self, records: pa.Table) -> pa.Table:
        hit = self.matches(records)
        return keep(records, hit if self.options["negate"] else pc.invert(hit))


class ConditionFilter(SparkTransform):
    """A Filter with a Spark SQL ``condition``: drops the records where it is true."""

    def __init__(self, configured: Filter) -> None:
        super().__init__(configured.target)
        self.alias, self.options = configured.alias, configured.options

    @property
    def where(self) -> str:
        return f"transform {self.alias!r} (Filter)"

    def apply_frame(self, records: DataFrame) -> DataFrame:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F

        hit = F.coalesce(F.expr(self.options["condition"]), F.lit(False))
        return keep_where(records, hit if self.options["negate"] else ~hit)
