"""`sluice connector preview -f CONFIG`: a new config taken through one batch, touching nothing.

The config is validated as ``create`` validates it (activities.validation: the same field errors)
and split into its tasks; its first task then runs the first batch of its first positions, at most
``records`` records, through the stages a run uses, in this process:

- a source reads it and runs the source stages (connectors.source_stages: transforms → converter
  → size check): what it would send is returned, not sent. A source whose read changes its system
  (``SourceTask.previewable`` False: a PostgreSQL replication slot, an MQTT persistent session) is
  refused, named;
- a sink pulls the messages its topics hold from their start, runs the sink stages
  (connectors.sink_stages: decode → transforms) and, where the sink tells (``DescribesWrites``: the
  JDBC sink), the DDL and writes the records would make, read from its target without changing it.

No topic is created, no position stored, no consumer group, table or row touched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa

from sluice.activities.validation import validate_config
from sluice.connectors.api import PlannedWrite

if TYPE_CHECKING:
    from sluice.connectors.api import SinkConnector, SourceConnector

#: what the previewed messages are sharded to: one queue, since the topic is not looked at
_NO_QUEUES: Final = ("(not sent)",)


class PreviewError(Exception):
    """The config cannot be previewed; ``problems`` are the messages (field errors as ``create``'s)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class SourcePreview:
    """A source config's first batch: its records after the transforms (``records``: their Arrow
    schema is what the converter writes), and the messages it would send, or the bad record that
    would stop the batch (``bad``) and those ``errors.tolerance=all`` would dead-letter."""

    connector: str
    connector_class: str
    topic: str
    records: pa.Table
    messages: pa.Table | None
    bad: str | None = None
    dead_letters: int = 0


@dataclass(frozen=True)
class SinkPreview:
    """A sink config's first batch: the records its stages make of its topics' first messages
    (after the transforms), and what it would write them as (``planned``), or the bad record that
    would stop the batch (``bad``), or why its writes cannot be made (``refused``: a config error)."""

    connector: str
    connector_class: str
    topics: tuple[str, ...]
    records: pa.Table
    planned: tuple[PlannedWrite, ...] = ()
    bad: str | None = None
    refused: str | None = None


Providers = Mapping[str, Callable[[str, str], str]]


def preview(
    name: str, config: Mapping[str, str], records: int, providers: Providers, namesrv: str
) -> SourcePreview | SinkPreview:
    """``config``'s first batch, at most ``records`` records (module docstring); PreviewError
    with create's field errors for an invalid config."""
    from sluice.connectors.api import SinkConnector
    from sluice.connectors.plugins import load_connector_class
    from sluice.connectors.secrets import resolve_secrets

    result = validate_config(name, config, providers)
    if result.errors:
        raise PreviewError(result.errors)
    cls = load_connector_class(result.connector_class)
    task_config = resolve_secrets(result.task_configs[0], providers)
    if issubclass(cls, SinkConnector):
        return _sink(name, cls, task_config, records, namesrv)
    return _source(name, cls, task_config, records)  # type: ignore[arg-type]


def _source(
    name: str, cls: type[SourceConnector], task_config: Mapping[str, Any], records: int
) -> SourcePreview:
    from sluice.connectors.api import KnowsSendOrder, RoutesTopics, SendOrder, open_source_task
    from sluice.connectors.converters import converter_for
    from sluice.connectors.planner import PlanRequest, plan_next, view_of
    from sluice.connectors.source_reads import SourceRead
    from sluice.connectors.source_stages import SourceStages
    from sluice.connectors.stage_outcomes import Bad
    from sluice.connectors.transforms import apply_chain, build_chain

    task = open_source_task(cls, task_config, 0)
    try:
        if not task.previewable:
            raise PreviewError([
                f"connector {name!r}: {cls.plugin_name} cannot be previewed: reading it changes the source "
                "system (its replication slot or session), which a preview must not"
            ])  # fmt: skip
        decision = plan_next(PlanRequest(name, 0, 0, {}, max_units=records), view_of(task))
        ranges = decision.plan.ranges if decision.plan is not None else ()
        read = task.read([r for r in ranges if not r.is_empty]) if ranges else SourceRead()
        pieces = _first([*read.tables, *(SourceRead(splits=(s,)).to_table() for s in read.splits)], records)
        topic = str(task.config.get("topic") or "")
        if isinstance(task, RoutesTopics) and ranges:
            topic = task.topic_of(ranges[0].partition)
        parsed = task.config
        chain, converter = build_chain(parsed), converter_for(parsed)
        transformed = [apply_chain(chain, p) for p in pieces]
        order = (
            task.send_order(ranges) if isinstance(task, KnowsSendOrder) and not chain else SendOrder.SORTED
        )
        stages = SourceStages((), converter, _NO_QUEUES, order, name, 0,
                              tolerates=parsed.get("errors.tolerance") == "all")  # fmt: skip
        outcome = stages.planned([p.schema for p in transformed]).run(transformed)
    finally:
        task.close()
    shown = pa.concat_tables(transformed) if transformed else pa.table({})
    if isinstance(outcome, Bad):
        return SourcePreview(name, cls.plugin_name, topic, shown, None, bad=outcome.message)
    dead = outcome.dead.num_rows if outcome.dead is not None else 0
    return SourcePreview(name, cls.plugin_name, topic, shown, outcome.records, dead_letters=dead)


def _sink(
    name: str, cls: type[SinkConnector], task_config: Mapping[str, Any], records: int, namesrv: str
) -> SinkPreview:
    from sluice.activities.sink_runner import QueueView, pulled, topics_now
    from sluice.connectors.api import DescribesWrites, open_sink_task
    from sluice.connectors.config import ConfigError
    from sluice.connectors.converters import TOMBSTONE_PROPERTY, converter_for
    from sluice.connectors.planner import PlanRequest, plan_next
    from sluice.connectors.rocketmq.spark_source import plan_to_json
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
    from sluice.connectors.sink_stages import SinkStages, Unmet, envelope_prefixes_of
    from sluice.connectors.stage_outcomes import Bad
    from sluice.connectors.transforms import build_chain

    task = open_sink_task(cls, task_config, 0)
    client = SyncRocketMQClient(namesrv)
    try:
        parsed = task.config
        topics = topics_now(client, parsed.get("topics") or [], str(parsed.get("topics.regex") or ""))
        decision = plan_next(PlanRequest(name, 0, 0, {}, max_units=records), QueueView(client, topics, 0, 1))
        ranges = decision.plan.ranges if decision.plan is not None else ()
        options = {"namesrv": namesrv, "plan": plan_to_json(ranges), "maxRecordsPerSplit": str(records)}
        messages = pulled(options) if ranges else []
        converter, chain = converter_for(parsed), build_chain(parsed)
        if converter.discovers_envelopes:  # learnt as a run learns them from a batch's messages
            found = envelope_prefixes_of(messages, keys=converter.key_envelopes, tombstone=TOMBSTONE_PROPERTY)
            converter.seen_prefixes.remember(found)
        stages = SinkStages.of(converter, chain, name, barriers_once=True,
                               tolerates=parsed.get("errors.tolerance") == "all")  # fmt: skip
        outcome = stages.run(messages)
        if isinstance(outcome, Bad | Unmet):
            bad = (
                outcome.message
                if isinstance(outcome, Bad)
                else "an envelope schema the converter could not learn"
            )
            return SinkPreview(name, cls.plugin_name, tuple(topics), pa.table({}), bad=bad)
        shown = outcome.records if outcome.records is not None else pa.table({})
        if not isinstance(task, DescribesWrites) or not shown.num_rows:
            return SinkPreview(name, cls.plugin_name, tuple(topics), shown)
        try:
            planned = tuple(task.planned_writes(shown))
        except ConfigError as exc:
            return SinkPreview(
                name, cls.plugin_name, tuple(topics), shown, refused="; ".join(e.message for e in exc.errors)
            )
        return SinkPreview(name, cls.plugin_name, tuple(topics), shown, planned)
    finally:
        client.close()
        task.close()


def _first(pieces: list[pa.Table], limit: int) -> list[pa.Table]:
    out, left = [], limit
    for piece in pieces:
        if left <= 0:
            break
        out.append(piece.slice(0, left))
        left -= min(piece.num_rows, left)
    return out


def message_rows(messages: pa.Table | None) -> list[dict[str, Any]]:
    """The previewed messages as people and scripts read them: topic-less (not sent yet), the key
    and body as text where they are UTF-8 (else hex), and the properties."""
    if messages is None:
        return []
    rows = []
    for m in messages.select(["keys", "body", "tags", "properties"]).to_pylist():
        body = m.get("body")
        rows.append({
            "key": m.get("keys"),
            "value": _text(body),
            "tags": m.get("tags"),
            "properties": dict(m.get("properties") or []),
        })  # fmt: skip
    return rows


def _text(value: Any) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return value.hex()
    return value
