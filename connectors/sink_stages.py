"""The sink side's record stages over one share of a batch, written once: decode → transforms → check.

A share is the messages the ``rocketmq`` reader pulls for some of a batch's queue ranges (Arrow
batches, rocketmq.arrow_decode.READ_COLUMNS). The same ``SinkStages.run`` makes its records
wherever the share is read: in the worker's process for a batch under the worker's local bound,
in each Spark task of a larger batch's job (activities.spark_binding.sink_job), the task then
staging or returning them. Nothing in here imports PySpark.

Every decision is a typed outcome, never an exception for the caller to read the text of:

- ``Made``: the share's checked records (the error columns dropped), or None for no records;
- ``Unmet``: a body or key carries an envelope schema not met before; ``found`` holds the share's
  schema prefixes (``envelope_prefixes_of``) for the runner to remember before running the batch
  again, or None when a text is laid out otherwise (only Spark's search tells what it is);
- ``Declined``: a record the Arrow decode does not make exactly as Spark's decode would (see
  connectors.arrow_envelopes); the batch goes to the searched Spark decode, which flags or reads it;
- ``Bad``: a record flagged by a transform, named as ``good_arrow_records`` names it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors.arrow_envelopes import UnmetSchemaError
from sluice.connectors.connect_schemas import PAYLOAD_KEY, SCHEMA_KEY
from sluice.connectors.records import LeftToSpark, RecordError, good_arrow_records
from sluice.connectors.transforms import apply_chain

if TYPE_CHECKING:
    from sluice.connectors.arrow_records import RecordsPlan
    from sluice.connectors.transforms import Transform

#: Named texts' envelope prefixes: ``{"value": [(topic, prefix), …], "key": […]}``.
Prefixes = Mapping[str, Sequence[tuple[str, str]]]


@dataclass(frozen=True)
class Made:
    records: pa.Table | None


@dataclass(frozen=True)
class Unmet:
    found: Prefixes | None


@dataclass(frozen=True)
class Declined:
    reason: str


@dataclass(frozen=True)
class Bad:
    message: str


@dataclass(frozen=True)
class Staged:
    """A share's records staged where they were made (connectors.api.StagesOnExecutors): the
    stager's small result, the only thing of them that reaches the driver."""

    share: object


Outcome = Made | Unmet | Declined | Bad


@dataclass(frozen=True)
class SinkStages:
    """A sink's stages for batches of the envelope schemas met when it was planned."""

    records: RecordsPlan
    #: the chain's transforms, every one an Arrow stage (transforms.runs_in_arrow)
    chain: tuple[Transform, ...]
    #: drop a barrier's copies after the first (a sink that does not order barriers)
    barriers_once: bool
    #: how a bad record's error starts (``connector <name>``)
    where: str
    #: keys are Connect envelopes too (their prefixes are learnt with the values')
    key_envelopes: bool

    def run(self, messages: Iterable[pa.RecordBatch]) -> Outcome:
        share = list(messages)
        try:
            table = self.records.records(share, barriers_once=self.barriers_once)
            if table is None:
                return Made(None)
            table = apply_chain(self.chain, table)
        except UnmetSchemaError:
            return Unmet(
                envelope_prefixes_of(share, keys=self.key_envelopes, tombstone=self.records.tombstone)
            )
        except LeftToSpark as exc:
            return Declined(str(exc))
        try:
            return Made(good_arrow_records(table, self.where))
        except RecordError as exc:
            return Bad(str(exc))


def envelope_prefixes_of(
    messages: Sequence[pa.RecordBatch], *, keys: bool, tombstone: str
) -> Prefixes | None:
    """The distinct ``(topic, schema prefix)`` pairs of the messages' value envelopes (and keys'
    with ``keys``), as Kafka's JsonConverter lays them out (``{"schema":…`` up to the first
    ``,"payload":``; connect_schemas.envelope_schemas tells why that is exact); None when a body
    is not UTF-8 or a text is laid out otherwise (an empty body too: no envelope at all).
    Tombstones and empty keys carry none."""
    if not messages:
        return {"value": [], **({"key": []} if keys else {})}
    table = pa.Table.from_batches(messages)
    marked = pc.map_lookup(table.column("properties"), tombstone, "first")
    live = pc.and_(
        pc.is_valid(table.column("body")), pc.invert(pc.fill_null(pc.equal(marked, "true"), False))
    )
    try:
        values = table.column("body").cast(pa.string())
    except pa.ArrowInvalid:
        return None
    texts = {"value": values.filter(live), **({"key": table.column("keys")} if keys else {})}
    topics = {"value": table.column("topic").filter(live), "key": table.column("topic")}
    found: dict[str, list[tuple[str, str]]] = {}
    for name, text in texts.items():
        topic = topics[name]
        present = pc.is_valid(text) if name == "value" else pc.and_(pc.is_valid(text), pc.not_equal(text, ""))
        text, topic = text.filter(present), topic.filter(present)
        laid_out = pc.and_(
            pc.starts_with(text, SCHEMA_KEY), pc.greater_equal(pc.find_substring(text, PAYLOAD_KEY), 0)
        )
        if not pc.all(laid_out).as_py() and len(text):
            return None
        heads = pc.list_element(pc.split_pattern(text, PAYLOAD_KEY, max_splits=1), 0)
        pairs = pa.table({"topic": topic, "head": heads}).group_by(["topic", "head"]).aggregate([])
        found[name] = sorted(
            zip(pairs.column("topic").to_pylist(), pairs.column("head").to_pylist(), strict=True)
        )
    return found
