"""Error tolerance: with ``errors.tolerance=all`` bad records go to a dead-letter topic, not the sink.

Kafka Connect's shape: the failed record's original bytes (for a sink, the message body as it was
in the topic; for a source, the bytes it could not decode, else the value as text or the encoded
body) plus properties saying which connector failed it, where it came from and why. A body longer
than ``MAX_DEAD_LETTER_BODY`` (a record over the broker's size limit) is truncated to it, with
its original size in ``sluice.original.size`` and ``sluice.truncated=true``. Both sides' stages
make their dead letters in Arrow (connectors.dead_letter_messages), sent from here
(``send_dead_letters``). Without a
dead-letter topic the records are logged (count and first positions) and skipped. Delivery to the
dead-letter topic is at least once: a re-run of the same plan can send the same dead letters
again (they carry their origin, so they can be deduplicated).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from sluice.activities.spark_binding import spark_schema
from sluice.connectors.api import RejectedRecordsError
from sluice.connectors.dead_letter_messages import (
    DEAD_LETTER_SCHEMA,
    ERROR_PROPERTY,
    ORIGIN_OFFSET_PROPERTY,
    ORIGIN_PARTITION_PROPERTY,
    ORIGIN_TOPIC_PROPERTY,
    position_keys,
)
from sluice.connectors.records import ERROR_COLUMN, RecordError, position
from sluice.connectors.rocketmq.spark_writer import RocketMQWriter

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa

    from sluice.activities.runner import TaskSetup
    from sluice.connectors.api import SinkTask
    from sluice.connectors.model import BatchPlan

log = logging.getLogger(__name__)


def send_dead_letters(letters: pa.Table, setup: TaskSetup) -> None:
    """Send dead letters made in Arrow (connectors.dead_letter_messages) from this
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
