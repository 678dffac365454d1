"""Error tolerance: with ``errors.tolerance=all`` bad records go to a dead-letter topic, not the sink.

Kafka Connect's shape: the failed record's original bytes (for a sink, the message body as it was
in the topic; for a source, the bytes it could not decode, else the value as text or the encoded
body) plus properties saying which connector failed it, where it came from and why. A body longer
than ``MAX_DEAD_LETTER_BODY`` (a record over the broker's size limit) is truncated to it, with
its original size in ``sluice.original.size`` and ``sluice.truncated=true``. A sink's dead letters
are made in Arrow by its stages (connectors.dead_letter_messages) and sent from here
(``send_dead_letters``); a source's are made in its Spark job (``route_bad_records``). Without a
dead-letter topic the records are logged (count and first positions) and skipped. Delivery to the
dead-letter topic is at least once: a re-run of the same plan can send the same dead letters
again (they carry their origin, so they can be deduplicated).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructType

from sluice.activities.spark_binding import spark_schema
from sluice.connectors.api import RejectedRecordsError
from sluice.connectors.dead_letter_messages import (
    CONNECTOR_PROPERTY,
    DEAD_LETTER_SCHEMA,
    ERROR_PROPERTY,
    MAX_DEAD_LETTER_BODY,
    ORIGIN_OFFSET_PROPERTY,
    ORIGIN_PARTITION_PROPERTY,
    ORIGIN_TOPIC_PROPERTY,
    ORIGINAL_SIZE_PROPERTY,
    TRUNCATED_PROPERTY,
    position_keys,
)
from sluice.connectors.records import ERROR_COLUMN, RAW_COLUMN, RecordError, bad_records, position
from sluice.connectors.rocketmq.spark_writer import RocketMQWriter, send_frame

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa
    from pyspark.sql import DataFrame

    from sluice.activities.runner import TaskSetup
    from sluice.connectors.api import SinkTask
    from sluice.connectors.model import BatchPlan

log = logging.getLogger(__name__)


def dead_letters(bad: DataFrame, connector: str) -> DataFrame:
    """Message rows (body, keys, properties) for a source's flagged records, in source order."""
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
    if RAW_COLUMN in bad.columns:  # bytes a source could not decode: exactly what it held
        fallback = F.coalesce(F.col(RAW_COLUMN), fallback)
    rows = bad.withColumn("_fallback", fallback)
    keys = F.col("keys") if "key" not in bad.columns else F.col("key").cast("string")
    if "key" in bad.columns and isinstance(bad.schema["key"].dataType, StructType | ArrayType | MapType):
        keys = F.to_json(F.col("key"))
    body = F.col("_fallback")
    rows = rows.withColumn("_body", F.coalesce(body, F.lit(b"").cast("binary")))
    size = F.octet_length(F.col("_body"))
    properties = F.create_map(
        F.lit(ERROR_PROPERTY), F.col(ERROR_COLUMN),
        F.lit(CONNECTOR_PROPERTY), F.lit(connector),
        F.lit(ORIGIN_PARTITION_PROPERTY), F.col("partition"),
        F.lit(ORIGIN_OFFSET_PROPERTY), F.col("offset").cast("string"),
        F.lit(ORIGINAL_SIZE_PROPERTY), size.cast("string"),
        F.lit(TRUNCATED_PROPERTY), F.when(size > MAX_DEAD_LETTER_BODY, "true").otherwise("false"),
    )  # fmt: skip
    # RocketMQ stores no empty property values
    properties = F.map_filter(properties, lambda _, v: v.isNotNull() & (v != ""))
    return (
        rows.coalesce(1)
        .sortWithinPartitions("partition", "offset")
        .select(
            F.substring(F.col("_body"), 1, MAX_DEAD_LETTER_BODY).alias("body"),
            keys.alias("keys"),
            properties.alias("properties"),
        )
    )


def route_bad_records(records: DataFrame, setup: TaskSetup) -> DataFrame:
    """Send a source's flagged records to the dead-letter topic (if one is set) and return the
    good ones. A source record's topic is where it was going: no origin topic is said."""
    bad = records.where(F.col(ERROR_COLUMN).isNotNull())
    count = bad.count()
    if count:
        first = "; ".join(f"{position(t, p, o)}: {e}" for t, p, o, e in bad_records(records, 3))
        topic = _dead_letter_topic(setup)
        if topic:
            sent_to = {"namesrv": setup.ctx.settings.namesrv, "topic": topic}
            send_frame(dead_letters(bad, setup.connector), sent_to)
        _tolerated(setup, count, topic, first)
    return records.where(F.col(ERROR_COLUMN).isNull()).drop(ERROR_COLUMN, RAW_COLUMN)


def send_dead_letters(letters: pa.Table, setup: TaskSetup) -> None:
    """Send a sink's dead letters made in Arrow (connectors.dead_letter_messages) from this
    process to the dead-letter topic, if one is set, in their order; log and count them."""
    properties = [dict(p) for p in letters.column("properties").slice(0, 3).to_pylist()]
    at = [
        position(p.get(ORIGIN_TOPIC_PROPERTY), p[ORIGIN_PARTITION_PROPERTY], int(p[ORIGIN_OFFSET_PROPERTY]))
        for p in properties
    ]
    first = "; ".join(f"{where}: {p[ERROR_PROPERTY]}" for where, p in zip(at, properties, strict=True))
    topic = _dead_letter_topic(setup)
    if topic:
        options = {"namesrv": setup.ctx.settings.namesrv, "topic": topic}
        RocketMQWriter(options, spark_schema(DEAD_LETTER_SCHEMA)).write(iter(letters.to_batches()))
    _tolerated(setup, letters.num_rows, topic, first)


def _dead_letter_topic(setup: TaskSetup) -> str:
    """``errors.deadletterqueue.topic.name``, created with one queue when missing; "" for none."""
    topic = str(setup.config.get("errors.deadletterqueue.topic.name") or "")
    client = setup.ctx.rocketmq
    if topic and not client.topic_exists(topic):
        client.create_topic(topic, queue_count=1)
    return topic


def _tolerated(setup: TaskSetup, count: int, topic: str, first: str) -> None:
    setup.meters.record_errors(count)
    if topic:
        setup.meters.dead_letters(count)
    log.warning(
        "connector %s: %d bad record(s) tolerated%s (errors.tolerance=all): %s",
        setup.connector, count, f", sent to dead-letter topic {topic}" if topic else ", skipped", first,
    )  # fmt: skip


#: Rounds of "write, dead-letter what the target refused, write the rest" before giving up.
MAX_REJECTION_ROUNDS: Final = 3


def write_rounds(
    task: SinkTask,
    records: pa.Table,
    plan: BatchPlan,
    setup: TaskSetup,
    letters: Callable[[pa.Table], pa.Table],
) -> None:
    """Write a batch's checked records. Records the target refuses (``RejectedRecordsError``) fail
    the batch naming them, or under ``errors.tolerance=all`` go to the dead-letter topic as
    ``letters`` makes them of the refused ``partition``, ``offset`` and error, and the rest is
    written again, for at most ``MAX_REJECTION_ROUNDS`` rounds."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for _ in range(MAX_REJECTION_ROUNDS):
        try:
            task.write(records, plan)
            return
        except RejectedRecordsError as exc:
            if setup.config.get("errors.tolerance") != "all":
                raise RecordError(str(exc)) from None
            refused = pa.table(
                {
                    "partition": pa.array([r.partition for r in exc.rejected], pa.string()),
                    "offset": pa.array([r.offset for r in exc.rejected], pa.int64()),
                    ERROR_COLUMN: pa.array([r.reason for r in exc.rejected], pa.string()),
                }
            )
            send_dead_letters(letters(refused), setup)
            gone = position_keys(refused, "offset")
            records = records.filter(pc.invert(pc.is_in(position_keys(records, "offset"), value_set=gone)))
    raise RecordError(
        f"connector {setup.connector}: batch {plan.batch_id} still refused after "
        f"{MAX_REJECTION_ROUNDS} rounds of dead-lettering"
    )
