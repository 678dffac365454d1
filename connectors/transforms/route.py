"""Topic routing: Kafka's RegexRouter and a plain rename map.

Routers rewrite the record's ``topic`` column; the RocketMQ writer sends each record to its topic.
Kafka's RegexRouter replaces only when the regex matches the *whole* topic, with ``$1`` group refs.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sluice.connectors.config import ConfigDef, ConfigField
from sluice.connectors.transforms.base import Transform, register

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@register("RegexRouter", "regex-router", keyed=False)
class RegexRouter(Transform):
    """``topic`` -> ``replacement`` when ``regex`` matches the whole topic name; otherwise unchanged."""

    options_def = ConfigDef((ConfigField("regex", str), ConfigField("replacement", str)))

    def check(self) -> list[str]:
        try:
            re.compile(self.options["regex"])
        except re.error as exc:
            return [f"option 'regex': not a valid regular expression ({exc})"]
        return []

    def apply(self, df: DataFrame) -> DataFrame:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F

        anchored = f"^(?:{self.options['regex']})$"
        topic = F.col("topic")
        routed = F.when(topic.rlike(anchored), F.regexp_replace(topic, anchored, self.options["replacement"]))
        return df.withColumn("topic", routed.otherwise(topic))


@register("TopicRename", "topic-rename", keyed=False)
class TopicRename(Transform):
    """Rename topics by an ``old:new`` map; other topics are unchanged."""

    options_def = ConfigDef((ConfigField("renames", list[str], doc="old:new pairs"),))

    def check(self) -> list[str]:
        bad = [pair for pair in self.options["renames"] if pair.count(":") != 1 or "" in pair.split(":")]
        return [f"option 'renames': expected old:new pairs, got {bad}"] if bad else []

    def apply(self, df: DataFrame) -> DataFrame:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F

        topic = F.col("topic")
        routed = topic
        for pair in reversed(self.options["renames"]):
            old, new = pair.split(":")
            routed = F.when(topic == old, F.lit(new)).otherwise(routed)
        return df.withColumn("topic", routed)
