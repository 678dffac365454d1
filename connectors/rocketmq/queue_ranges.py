"""One queue's planned offset range pulled whole, in chunks, with the data-loss policy applied.

Shared by the ``rocketmq`` Spark data source's reader (a sink's batches) and the replicator's
reads (connectors.replicator.reads), wherever they run:

1. Ask the queue's min/max offsets and run ``check_data_loss`` on the range: a vanished queue, a
   start below the min (retention) or an end beyond the max (planned messages missing, e.g. lost by
   an async-flush broker crash) fails with DataLossError naming topic, queue and offsets, or under
   policy skip is clipped to what exists with a warning. A plan only ever covers offsets that
   existed when it was made, so a short queue is data loss, not "not yet written".
2. Pull ``[start, end)`` in chunks of ``chunk`` messages, never past ``end`` even if the queue
   holds more, yielding each chunk's columns (codec.decode_columns: no object per message).
3. If retention races the read (a pull raises OffsetOutOfRangeError), the same check decides.

No PySpark here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from sluice.connectors.model import DataLossPolicy, PartitionRange
from sluice.connectors.rocketmq.errors import OffsetOutOfRangeError
from sluice.connectors.rocketmq.offsets import check_data_loss
from sluice.connectors.rocketmq.values import MessageColumns, MessageQueue

if TYPE_CHECKING:
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient

#: Messages per chunk: bounds the memory of a large range's read.
CHUNK: Final = 8192


def queue_range_columns(
    client: SyncRocketMQClient,
    mq: MessageQueue,
    start: int,
    end: int,
    policy: DataLossPolicy,
    *,
    pull_batch: int = 512,
    concurrency: int = 4,
    chunk: int = CHUNK,
) -> Iterator[MessageColumns]:
    """The messages of ``[start, end)`` of ``mq``, a chunk at a time (module docstring)."""
    planned = PartitionRange.offsets(mq.key, start, end, mq.topic)
    if mq not in client.queues(mq.topic):  # the queue vanished (topic recreated with fewer queues)
        check_data_loss([planned], {}, policy)
        return
    lo, hi = client.min_offset(mq), client.max_offset(mq)
    (current,) = check_data_loss([planned], {mq.key: lo}, policy, max_offsets={mq.key: hi})
    offset, end = current.start.offset, current.end.offset
    while offset < end:
        chunk_end = min(offset + chunk, end)
        try:
            columns = client.pull_range_columns(
                mq, offset, chunk_end, max_per_request=pull_batch, concurrency=concurrency
            )
        except OffsetOutOfRangeError as exc:
            rest = PartitionRange.offsets(mq.key, offset, end, mq.topic)
            (rest,) = check_data_loss(
                [rest], {mq.key: exc.min_offset}, policy, max_offsets={mq.key: exc.max_offset}
            )
            if (rest.start.offset, rest.end.offset) == (offset, end):
                raise  # not data loss after all (e.g. a broker hiccup): let the caller retry
            offset, end = rest.start.offset, rest.end.offset
            continue
        if len(columns):
            yield columns
        offset = chunk_end
