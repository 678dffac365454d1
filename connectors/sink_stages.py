"""The sink side's record stages over one share of a batch, written once: decode → transforms → check.

A share is the messages the ``rocketmq`` reader pulls for some of a batch's queue ranges (Arrow
batches, rocketmq.arrow_decode.READ_COLUMNS). The same ``SinkStages.run`` makes its records
wherever the share is read: in the worker's process for a batch under the worker's local bound,
in each Spark task of a larger batch's job (activities.spark_binding.sink_job), the task then
staging or returning them. Nothing in here imports PySpark.

Every decision is a typed outcome, never an exception for the caller to read the text of:

- ``Made``: the share's good records (the error columns dropped), or None for no records, and
  under ``errors.tolerance=all`` the bad ones as dead letters (connectors.dead_letter_messages);
- ``Unmet``: a body or key carries an envelope schema not met before; ``found`` holds the share's
  schema prefixes (``envelope_prefixes_of``) for the runner to remember before running the batch
  again;
- ``Bad``: without tolerance, the first record a decoder or transform flagged, named as
  ``good_arrow_records`` names it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors.arrow_bodies import live_texts
from sluice.connectors.arrow_envelopes import UnmetSchemaError, is_laid_out, relaid
from sluice.connectors.connect_schemas import PAYLOAD_KEY
from sluice.connectors.dead_letter_messages import dead_letters
from sluice.connectors.record_tables import split_flagged
from sluice.connectors.records import RecordError, good_arrow_records
from sluice.connectors.stage_outcomes import Bad, Made
from sluice.connectors.transforms import apply_chain, arrow_head, value_read

if TYPE_CHECKING:
    from sluice.connectors.arrow_records import RecordsPlan
    from sluice.connectors.converters import Converter
    from sluice.connectors.transforms import Transform

#: Named texts' envelope prefixes: ``{"value": [(topic, prefix), …], "key": […]}``.
Prefixes = Mapping[str, Sequence[tuple[str, str]]]


@dataclass(frozen=True)
class Unmet:
    found: Prefixes


@dataclass(frozen=True)
class Staged:
    """A share's records staged where they were made (connectors.api.StagesOnExecutors): the
    stager's small result, the only thing of them that reaches the driver, and the share's
    dead letters."""

    share: object
    dead: pa.Table | None = None


Outcome = Made | Unmet | Bad


@dataclass(frozen=True)
class SinkStages:
    """A sink's stages for batches of the envelope schemas met when it was planned."""

    records: RecordsPlan
    #: the chain's transforms, every one an Arrow stage (transforms.runs_in_arrow)
    chain: tuple[Transform, ...]
    #: drop a barrier's copies after the first (a sink that does not order barriers)
    barriers_once: bool
    #: the connector: bad records' errors and dead letters name it
    connector: str
    #: keys are Connect envelopes too (their prefixes are learnt with the values')
    key_envelopes: bool
    #: ``errors.tolerance=all``: bad records become dead letters instead of failing the batch
    tolerates: bool = False

    @classmethod
    def of(
        cls, converter: Converter, chain: Sequence[Transform], connector: str, *, barriers_once: bool,
        tolerates: bool,
    ) -> SinkStages:  # fmt: skip
        """The stages of a sink's converter and chain, for the envelope schemas the converter has
        met (its Arrow head: a Spark SQL tail runs over their records); ValueError naming a type
        the converter does not read."""
        records = converter.arrow_records(value_read(chain))
        return cls(
            records, tuple(arrow_head(chain)), barriers_once, connector, converter.key_envelopes, tolerates
        )

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
        if not self.tolerates:
            try:
                return Made(good_arrow_records(table, f"connector {self.connector}"))
            except RecordError as exc:
                return Bad(str(exc))
        good, bad = split_flagged(table)
        letters = dead_letters(pa.Table.from_batches(share), bad, self.connector) if bad.num_rows else None
        return Made(good, letters)


def envelope_prefixes_of(messages: Sequence[pa.RecordBatch], *, keys: bool, tombstone: str) -> Prefixes:
    """The distinct ``(topic, schema prefix)`` pairs of the messages' value envelopes (and keys'
    with ``keys``), as Kafka's JsonConverter lays them out (``{"schema":…`` up to the first
    ``,"payload":``; connect_schemas.envelope_schemas tells why that is exact; an envelope laid
    out otherwise is read in that layout: arrow_envelopes.relaid). A text that is no envelope, or
    not UTF-8, has none (the decoder flags it), nor have tombstones and empty keys."""
    if not messages:
        return {"value": [], **({"key": []} if keys else {})}
    batch = pa.concat_batches(messages)
    values, _ = live_texts(batch, tombstone)
    live, topic = pc.is_valid(values), batch.column("topic")
    texts = {"value": values.filter(live), **({"key": batch.column("keys")} if keys else {})}
    topics = {"value": topic.filter(live), "key": topic}
    found: dict[str, list[tuple[str, str]]] = {}
    for name, text in texts.items():
        text = relaid(text, pc.is_valid(text))
        laid_out = pc.fill_null(is_laid_out(text), False)
        text, topic = text.filter(laid_out), topics[name].filter(laid_out)
        heads = pc.list_element(pc.split_pattern(text, PAYLOAD_KEY, max_splits=1), 0)
        pairs = pa.table({"topic": topic, "head": heads}).group_by(["topic", "head"]).aggregate([])
        found[name] = sorted(
            zip(pairs.column("topic").to_pylist(), pairs.column("head").to_pylist(), strict=True)
        )
    return found
