"""`sluice connector preview -f CONFIG`: a new source config taken through one batch, touching nothing.

The config is validated as ``create`` validates it (activities.validation: the same field errors),
split into its tasks, and the first task reads the first batch of its first positions, at most
``records`` records, through the same stages a run sends (connectors.source_stages: transforms →
converter → size check), in this process. What it would send is returned, not sent: no topic is
created, no position stored, no consumer group touched. A source whose read changes its system
(``SourceTask.previewable`` False: a PostgreSQL replication slot, an MQTT persistent session) is
refused, named.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa

from sluice.activities.validation import validate_config

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


def preview_source(
    name: str, config: Mapping[str, str], records: int, providers: Mapping[str, Callable[[str, str], str]]
) -> SourcePreview:
    """The first batch of ``config``'s first task, at most ``records`` records (module docstring)."""
    from sluice.connectors.api import KnowsSendOrder, RoutesTopics, SendOrder, SinkConnector, open_source_task
    from sluice.connectors.converters import converter_for
    from sluice.connectors.planner import PlanRequest, plan_next, view_of
    from sluice.connectors.plugins import load_connector_class
    from sluice.connectors.secrets import resolve_secrets
    from sluice.connectors.source_reads import SourceRead
    from sluice.connectors.source_stages import SourceStages
    from sluice.connectors.stage_outcomes import Bad
    from sluice.connectors.transforms import apply_chain, build_chain

    result = validate_config(name, config, providers)
    if result.errors:
        raise PreviewError(result.errors)
    cls = load_connector_class(result.connector_class)
    if issubclass(cls, SinkConnector):
        raise PreviewError(
            [f"connector {name!r}: preview takes a source config; {cls.plugin_name} is a sink"]
        )
    task = open_source_task(cls, resolve_secrets(result.task_configs[0], providers), 0)  # type: ignore[arg-type]
    try:
        if not task.previewable:
            raise PreviewError([
                f"connector {name!r}: {cls.plugin_name} cannot be previewed: reading it changes the source "
                "system (its replication slot or session), which a preview must not"
            ])  # fmt: skip
        decision = plan_next(PlanRequest(name, 0, 0, {}, max_units=records), view_of(task))
        ranges = decision.plan.ranges if decision.plan is not None else ()
        read = task.read([r for r in ranges if not r.is_empty]) if ranges else SourceRead()
        pieces = [*read.tables, *(SourceRead(splits=(s,)).to_table() for s in read.splits)]
        pieces = _first(pieces, records)
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
