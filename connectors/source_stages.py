"""The source side's record stages over one share of a batch, written once: transforms → converter →
size check → shard → order. The send that follows is the runner's (activities.source_runner).

A share is what one place reads of a batch: in the worker's process, the whole read of a batch
under the worker's local bound; in a Spark task, one split of a table read by primary key, or the
whole read where its order must be kept. The same ``SourceStages.run`` makes its messages wherever
it runs. Nothing in here imports PySpark.

Every decision is a typed outcome (connectors.stage_outcomes):

- ``Made``: the share's messages to send (``SHARDED_SCHEMA``, in send order, without those an
  earlier attempt of the plan already sent), and under ``errors.tolerance=all`` the records a
  stage flagged (a source could not decode them, a transform or the converter refused them, or
  their message is over the broker's limits) as dead letters;
- ``Bad``: without tolerance, the first of them, named with its position and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors.api import SendOrder
from sluice.connectors.arrow_messages import MESSAGE_SCHEMA, sharded
from sluice.connectors.barriers import BARRIER_HEADER
from sluice.connectors.dead_letter_messages import record_dead_letters
from sluice.connectors.record_tables import column, split_flagged
from sluice.connectors.records import ERROR_COLUMN, RecordError, good_arrow_records
from sluice.connectors.rocketmq.limits import unsendable
from sluice.connectors.stage_outcomes import Bad, Made
from sluice.connectors.transforms import apply_chain

if TYPE_CHECKING:
    from sluice.connectors.arrow_messages import MessageEncoder
    from sluice.connectors.converters import Converter
    from sluice.connectors.transforms import Transform

#: Messages with the queue each goes to (arrow_messages.sharded): what a share's send takes.
SHARDED_SCHEMA: Final = MESSAGE_SCHEMA.append(pa.field("queue", pa.int32()))

#: The record columns a converter's encoder depends on: the key's and the value's fields.
Shape = tuple[pa.Field, pa.Field]


@dataclass(frozen=True)
class SourceStages:
    """A source's stages for one topic: see the module docstring."""

    #: the chain's transforms, every one an Arrow stage; empty when a Spark SQL transform ran the
    #: chain before (activities.spark_binding.chain_frame)
    chain: tuple[Transform, ...]
    converter: Converter
    #: the topic's queues in the writer's order: message i goes to ``queues[queue]``
    queues: tuple[str, ...]
    order: SendOrder
    #: the connector: bad records' errors and dead letters name it
    connector: str
    #: the most bytes the properties the writer stamps add to a message (the size check)
    stamped_bytes: int
    #: ``errors.tolerance=all``: bad records become dead letters instead of failing the batch
    tolerates: bool = False
    #: a re-run plan's messages an earlier attempt sent (``sent_key``): not sent again
    already_sent: frozenset[str] = frozenset()
    #: partitions whose messages all go to one queue, by index into ``queues`` (api.PinsQueues)
    pinned: dict[str, int] = field(default_factory=dict)
    #: each record shape's encoder, planned on the driver (``planned``) so tasks only encode
    encoders: dict[Shape, MessageEncoder] = field(default_factory=dict, compare=False)

    def planned(self, schemas: Sequence[pa.Schema]) -> SourceStages:
        """These stages with the encoders of records read as ``schemas`` planned: a type the
        converter does not write raises ValueError here, on the driver, naming it."""
        for schema in schemas:
            self._encoder(apply_chain(self.chain, schema.empty_table()).schema)
        return self

    def run(self, pieces: Sequence[pa.Table]) -> Made | Bad:
        """The messages of a share's records, read as ``pieces`` in order."""
        made, dead = [], []
        for records in pieces:
            records = apply_chain(self.chain, records)
            messages = self._encoder(records.schema).encode(records)
            problems = unsendable(messages, self.stamped_bytes)
            if problems is not None:
                errors = column(messages, ERROR_COLUMN) if ERROR_COLUMN in messages.column_names else None
                merged = problems if errors is None else pc.coalesce(errors, problems)
                messages = _with_errors(messages, merged)
            if ERROR_COLUMN not in messages.column_names:
                made.append(messages)
                continue
            if not self.tolerates:
                try:
                    good_arrow_records(messages, f"connector {self.connector}")
                except RecordError as exc:
                    return Bad(str(exc))
            good, _ = split_flagged(messages)
            made.append(good)
            failed = pc.is_valid(column(messages, ERROR_COLUMN))
            bad = _with_errors(records.filter(failed), column(messages, ERROR_COLUMN).filter(failed))
            if bad.num_rows:
                dead.append(record_dead_letters(bad, self.connector))
        messages = sharded(_concat(made), self.queues, self.pinned)
        if self.already_sent:
            keys = sent_keys(messages)
            messages = messages.filter(
                pc.invert(pc.is_in(keys, value_set=pa.array(sorted(self.already_sent))))
            )
        if self.order is SendOrder.SORTED:
            messages = messages.sort_by([("partition", "ascending"), ("offset", "ascending")])
        return Made(messages, pa.concat_tables(dead) if dead else None)

    def _encoder(self, records: pa.Schema) -> MessageEncoder:
        shape = (records.field("key"), records.field("value"))
        if shape not in self.encoders:
            self.encoders[shape] = self.converter.arrow_encoder(records)
        return self.encoders[shape]


def sent_key(partition: str, offset: int | str, barrier: str | None) -> str:
    """What identifies a message a source sent: its record's position, and for a barrier's copy
    (one per queue: connectors.barriers) its label."""
    return f"{partition}@{offset}#{barrier or ''}"


def sent_keys(messages: pa.Table) -> pa.Array:
    """``sent_key`` of each message of ``SHARDED_SCHEMA``."""
    properties = messages.column("properties").combine_chunks()
    barrier = pc.map_lookup(properties, pa.scalar(BARRIER_HEADER), "first") if len(properties) else None
    label = pc.fill_null(barrier, "") if barrier is not None else pa.array([], pa.string())
    parts = [messages.column("partition"), "@", messages.column("offset").cast(pa.string()), "#", label]
    return pc.binary_join_element_wise(*parts, "").combine_chunks() if len(properties) else label


def _with_errors(table: pa.Table, errors: pa.Array | pa.ChunkedArray) -> pa.Table:
    if ERROR_COLUMN in table.column_names:
        return table.set_column(table.schema.get_field_index(ERROR_COLUMN), ERROR_COLUMN, errors)
    return table.append_column(ERROR_COLUMN, errors)


def _concat(tables: list[pa.Table]) -> pa.Table:
    if not tables:
        return MESSAGE_SCHEMA.empty_table()
    return pa.concat_tables([t.select(MESSAGE_SCHEMA.names).cast(MESSAGE_SCHEMA) for t in tables])
