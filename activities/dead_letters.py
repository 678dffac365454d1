"""Error tolerance: with ``errors.tolerance=all`` bad records go to a dead-letter topic, not the sink.

Kafka Connect's shape: the failed record's original bytes (for a sink, the message body as it was
in the topic; for a source, the value as text) plus properties saying which connector failed it,
where it came from and why. Delivery to the dead-letter topic is at least once: a re-run of the
same plan can send the same dead letters again (they carry their origin, so they can be deduplicated).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from activities.runner import TaskSetup

log = logging.getLogger(__name__)

ERROR_PROPERTY = "sluice.error"
CONNECTOR_PROPERTY = "sluice.connector"
ORIGIN_TOPIC_PROPERTY = "sluice.origin.topic"
ORIGIN_PARTITION_PROPERTY = "sluice.origin.partition"
ORIGIN_OFFSET_PROPERTY = "sluice.origin.offset"


def dead_letters(bad: DataFrame, connector: str, originals: DataFrame | None) -> DataFrame:
    """Message rows (body, properties) for flagged records."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, StringType

    from connectors.records import ERROR_COLUMN

    value = F.col("value")
    value_type = bad.schema["value"].dataType if "value" in bad.columns else None
    if value_type is None:  # already message rows (flagged while encoding)
        fallback = F.col("body")
    elif isinstance(value_type, BinaryType):
        fallback = value
    elif isinstance(value_type, StringType):
        fallback = F.encode(value, "UTF-8")
    else:
        fallback = F.encode(F.to_json(value), "UTF-8")
    rows = bad.withColumn("_fallback", fallback)
    if originals is not None:
        original = originals.select(
            F.col("partition").alias("_p"), F.col("queue_offset").cast("long").alias("_o"), F.col("body")
        )
        rows = rows.join(
            original, (rows["partition"] == original["_p"]) & (rows["offset"] == original["_o"]), "left"
        )
        body = F.coalesce(F.col("body"), F.col("_fallback"))
    else:
        body = F.col("_fallback")
    properties = F.create_map(
        F.lit(ERROR_PROPERTY), F.col(ERROR_COLUMN),
        F.lit(CONNECTOR_PROPERTY), F.lit(connector),
        F.lit(ORIGIN_TOPIC_PROPERTY), F.coalesce(F.col("topic"), F.lit("")),
        F.lit(ORIGIN_PARTITION_PROPERTY), F.col("partition"),
        F.lit(ORIGIN_OFFSET_PROPERTY), F.col("offset").cast("string"),
    )  # fmt: skip
    return rows.select(
        F.coalesce(body, F.lit(b"").cast("binary")).alias("body"),
        F.col("key" if "key" in bad.columns else "keys").alias("keys"),
        properties.alias("properties"),
    )


def route_bad_records(records: DataFrame, setup: TaskSetup, originals: DataFrame | None) -> DataFrame:
    """Send flagged records to the dead-letter topic (if one is set) and return the good ones."""
    from pyspark.sql import functions as F

    from connectors.records import ERROR_COLUMN, bad_records, position

    bad = records.where(F.col(ERROR_COLUMN).isNotNull())
    count = bad.count()
    if count:
        first = "; ".join(f"{position(t, p, o)}: {e}" for t, p, o, e in bad_records(records, 3))
        topic = str(setup.config.get("errors.deadletterqueue.topic.name") or "")
        if topic:
            client = setup.ctx.rocketmq
            if not client.topic_exists(topic):
                client.create_topic(topic, queue_count=1)
            (
                dead_letters(bad, setup.connector, originals)
                .write.format("rocketmq")
                .option("namesrv", setup.ctx.settings.namesrv)
                .option("topic", topic)
                .mode("append")
                .save()
            )
        log.warning(
            "connector %s: %d bad record(s) tolerated%s (errors.tolerance=all): %s",
            setup.connector, count, f", sent to dead-letter topic {topic}" if topic else ", dropped", first,
        )  # fmt: skip
    return records.where(F.col(ERROR_COLUMN).isNull()).drop(ERROR_COLUMN)
