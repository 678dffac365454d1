"""One source queue range read as the records a replicator sends, where the batch runs.

``read_queue`` pulls exactly ``[start, end)`` of the queue (connectors.rocketmq.queue_ranges: a
range no longer retained is data loss, named), keeps what the filters copy
(connectors.replicator.filters) and frames each message as a record: the body as the value
(binary), the keys as the key, the user properties as headers with the tag (``rocketmq.tags``) and
the Replicator's properties added, the born time as the timestamp. The partition is the source
queue (``<topic>/<broker>:<queue>``), the offset its queue offset: what the copy carries as
``sluice.partition`` and ``sluice.offset``, so a re-run finds what it sent and a consumer group's
offsets translate (connectors.replicator.translation).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors.api import TargetCluster
from sluice.connectors.converters import OFFSET_PROPERTY, PARTITION_PROPERTY, TAGS_HEADER
from sluice.connectors.model import DataLossPolicy
from sluice.connectors.record_tables import headers_with
from sluice.connectors.replicator.filters import BORN_SOURCE_EXTENSION, PropertyFilter, copied
from sluice.connectors.rocketmq.arrow_decode import parse_properties
from sluice.connectors.rocketmq.codec import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from sluice.connectors.rocketmq.queue_ranges import queue_range_columns
from sluice.connectors.rocketmq.values import MessageColumns, MessageQueue
from sluice.connectors.source_reads import record_arrow_schema

#: RocketMQ Connect's runtime writes a record's extensions as ``connect-ext-<name>`` properties:
#: the copies carry the Replicator's properties as its copies do, so their consumers read them as
#: they did (``EXTEND_UNIQ_INFO`` is a name RocketMQ reserves: only the prefixed one can be sent).
EXTENSION: Final = "connect-ext-"
BORN_TOPIC: Final = EXTENSION + "REPLICATOR-BORN-TOPIC"
BORN_TIMESTAMP: Final = EXTENSION + "REPLICATOR-BORN-SOURCE-TIMESTAMP"
SOURCE_TOPIC: Final = EXTENSION + "REPLICATOR-source-topic"
SOURCE_MESSAGE_ID: Final = EXTENSION + "EXTEND_UNIQ_INFO"
#: What Sluice stamped on a message it sent: the copy gets its own (the batch reference too).
_SLUICE_OWN: Final = (PARTITION_PROPERTY, OFFSET_PROPERTY, "sluice.batch")
_MESSAGE_ID: Final = (
    f"(?:^|{PROPERTY_SEPARATOR})UNIQ_KEY{NAME_VALUE_SEPARATOR}(?P<id>[^{PROPERTY_SEPARATOR}]*)"
)


@dataclass(frozen=True)
class QueueRead:
    """One queue range to copy and how (pickled into the Spark task that reads it)."""

    cluster: TargetCluster
    topic: str
    broker: str
    queue: int
    start: int
    end: int
    target_topic: str
    tags: frozenset[str] | None
    properties: PropertyFilter | None
    #: the source's label, added to REPLICATOR-BORN-SOURCE; the target's, whose copies are not copied back
    born_source: str
    dest_label: str
    born_topic: str
    policy: DataLossPolicy


def replicated_schema() -> pa.Schema:
    return record_arrow_schema(pa.binary(), pa.string())


def read_queue(spec: QueueRead) -> Iterator[pa.RecordBatch]:
    """The records of ``spec``'s range (module docstring)."""
    from sluice.connectors.rocketmq.spark_options import executor_client

    client = executor_client(spec.cluster.namesrv, spec.cluster.client_options())
    mq = MessageQueue(spec.topic, spec.broker, spec.queue)
    for columns in queue_range_columns(client, mq, spec.start, spec.end, spec.policy):
        records = replicated_records(columns, mq, spec)
        if records.num_rows:
            yield records


def replicated_records(columns: MessageColumns, mq: MessageQueue, spec: QueueRead) -> pa.RecordBatch:
    """Pulled messages of one queue as the records of their copies (module docstring)."""
    n = len(columns)
    texts = pa.array(columns.properties, pa.string())
    keys, tags, properties = parse_properties(columns.properties)
    keep = copied(
        tags, properties, wanted_tags=spec.tags, wanted=spec.properties, target_label=spec.dest_label
    )
    born_ms = pa.array(columns.born_timestamp_ms, pa.int64())
    ids = pc.struct_field(pc.extract_regex(texts, _MESSAGE_ID), "id") if n else pa.array([], pa.string())
    looked = (lambda name: pc.map_lookup(properties, pa.scalar(name), "first")) if n else (
        lambda name: pa.array([], pa.string())
    )  # fmt: skip
    born = pc.binary_join_element_wise(
        pc.fill_null(looked(BORN_SOURCE_EXTENSION), ""), f"{spec.born_source},", ""
    )
    headers = headers_with(
        properties,
        dropped=_SLUICE_OWN,
        appended=[
            (TAGS_HEADER, tags),
            (BORN_SOURCE_EXTENSION, born),
            (BORN_TOPIC, pc.fill_null(looked(BORN_TOPIC), spec.born_topic)),
            (BORN_TIMESTAMP, born_ms.cast(pa.string())),
            (SOURCE_TOPIC, pa.repeat(pa.scalar(mq.topic, pa.string()), n)),
            (SOURCE_MESSAGE_ID, ids),
        ],
    )
    schema = replicated_schema()
    arrays = [
        pa.repeat(pa.scalar(spec.target_topic, pa.string()), n),
        pa.repeat(pa.scalar(f"{mq.topic}/{mq.key}", pa.string()), n),
        pa.array(columns.queue_offset, pa.int64()),
        keys,
        pa.array(columns.body, pa.binary()),
        headers,
        pc.multiply(born_ms, 1000).cast(pa.timestamp("us", tz="UTC")),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema).filter(keep)
