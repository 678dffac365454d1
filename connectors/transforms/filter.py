"""Kafka's Filter with predicates (TopicNameMatches, HasHeaderKey, RecordIsTombstone, negate), plus a
SQL ``condition`` shortcut.

Filter drops the records for which its predicate holds (``negate=true``: keeps only those).
Kafka's patterns must match the whole topic name, so patterns are anchored here too.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sluice.connectors.config import ConfigDef, ConfigField
from sluice.connectors.records import keep_where
from sluice.connectors.transforms.base import Transform, register

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

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
class Filter(Transform):
    """Drop records matching the predicate (or a SQL ``condition`` that drops rows where it is true)."""

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

    def matches(self) -> Column:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F

        kind = _predicate_type(self.options["predicate.type"])
        if not kind:
            return F.expr(self.options["condition"])
        if kind == "TopicNameMatches":
            return F.coalesce(
                F.col("topic").rlike(f"^(?:{self.options['predicate.pattern']})$"), F.lit(False)
            )
        if kind == "HasHeaderKey":
            return F.coalesce(
                F.array_contains(F.map_keys("headers"), self.options["predicate.name"]), F.lit(False)
            )
        return F.col("value").isNull()

    def apply(self, df: DataFrame) -> DataFrame:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F

        hit = F.coalesce(self.matches(), F.lit(False))
        return keep_where(df, hit if self.options["negate"] else ~hit)
