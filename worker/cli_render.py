"""How `sluice` shows things: Rich tables for people, JSON (``--output json``) for scripts.

Every view masks secrets the same way: the connector's declared secret fields (a PostgreSQL
``connection.url`` holds a password without looking like one) plus any key that looks secret.
JSON shapes are the data, not the tables: a status is ``dataclasses.asdict(ConnectorStatus)``
(the shape the CLI always printed), offsets are Kafka Connect's ``{"offsets": [...]}``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from sluice.connectors.secrets import redact
from sluice.worker.cli_common import wide_enough
from sluice.workflows.types import ConnectorStatus, TaskStatus

if TYPE_CHECKING:
    from sluice.activities.preview import SinkPreview, SourcePreview
    from sluice.connectors.backfills import Backfill
    from sluice.worker.backfills import BackfillStatus
    from sluice.worker.verify.model import VerifyReport

STATE_STYLES = {
    "RUNNING": "green",
    "PAUSED": "yellow",
    "STOPPED": "yellow",
    "UNASSIGNED": "cyan",
    "FAILED": "bold red",
    "DELETED": "dim",
}
_FIELD = re.compile(r"field '([^']+)'")


def console() -> Console:
    return Console(width=wide_enough(), highlight=False, soft_wrap=False)


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


def state_text(state: str) -> Text:
    return Text(str(state), style=STATE_STYLES.get(str(state), ""))


@functools.lru_cache(maxsize=32)
def secret_fields(connector_class: str) -> frozenset[str]:
    """The fields the connector declares secret; none if its class cannot be loaded here."""
    if not connector_class:
        return frozenset()
    try:
        # connector plugins (~40 ms): loaded by the commands that use them, not at the CLI's start
        from sluice.connectors.plugins import load_connector_class

        return load_connector_class(connector_class).full_config_def().secret_names
    except Exception:  # noqa: BLE001 - masking by key pattern still applies
        return frozenset()


def masked(config: Mapping[str, Any], connector_class: str = "") -> dict[str, Any]:
    cls = connector_class or str(config.get("connector.class", ""))
    return redact(config, secret_fields(cls))


def status_json(status: ConnectorStatus) -> dict[str, Any]:
    report = asdict(status)
    report["config"] = masked(status.config, status.connector_class)
    report["task_configs"] = [masked(c, status.connector_class) for c in status.task_configs]
    return report


# --- connector status --------------------------------------------------------------------------------


def status_view(
    status: ConnectorStatus, *, with_config: bool = True, backfills: Sequence[BackfillStatus] = ()
) -> RenderableType:
    """Header (name, class, state, error), one row per task, its newest backfills if it has any,
    then the (masked) config."""
    head = Text.assemble(
        (status.name, "bold"),
        f"  {status.kind or '?'} connector {status.connector_class or '?'}  ",
        state_text(status.state),
        f"  generation {status.generation}",
    )
    parts: list[RenderableType] = [head]
    if status.error:
        parts.append(Text(f"error: {status.error}", style="red"))
    parts.append(tasks_table(status.tasks))
    if backfills:
        parts.append(backfills_table(status.name, backfills, brief=True))
    if with_config:
        parts.append(config_table(masked(status.config, status.connector_class), title="config"))
    return Group(*parts)


def tasks_table(tasks: Sequence[TaskStatus]) -> Table:
    table = Table(
        "task", "state", "attempt", "running since", "detail / error", title="tasks", title_justify="left"
    )
    for t in tasks:
        table.add_row(str(t.task_id), state_text(t.state), _attempt(t), t.running_since or "-", _detail(t))
    if not tasks:
        table.add_row("-", "-", "-", "-", "no tasks yet")
    return table


def _attempt(t: TaskStatus) -> str:
    text = str(t.attempt or "-")
    return f"{text} (retrying)" if t.retrying else text


def _detail(t: TaskStatus) -> Text:
    if t.error:
        return Text(t.error, style="red")
    lines = [t.detail] if t.detail else []
    if t.retrying and t.next_retry_time:
        lines.append(f"next retry at {t.next_retry_time} (failing since {t.failing_since})")
    if t.last_error:
        lines.append(f"last error at {t.last_error_time}: {t.last_error}")
    return Text("\n".join(lines) or "-", style="yellow" if t.last_error else "")


def config_table(config: Mapping[str, Any], title: str = "") -> Table:
    table = Table("key", "value", title=title or None, title_justify="left")
    for key in sorted(config):
        table.add_row(key, str(config[key]))
    return table


def show_status(status: ConnectorStatus, json_out: bool, backfills: Sequence[BackfillStatus] = ()) -> None:
    """A status; with ``backfills`` (`connector status` of a connector that has some) they are
    shown too, in the JSON as ``backfills`` (the REST status body never has them)."""
    if json_out:
        extra = {"backfills": [b.to_json() for b in backfills]} if backfills else {}
        print_json({**status_json(status), **extra})
    else:
        console().print(status_view(status, backfills=backfills))


# --- list, config, tasks -------------------------------------------------------------------------------


def connectors_table(rows: Iterable[tuple[str, ConnectorStatus | None, str]]) -> Table:
    """(name, status or None, why not) per connector."""
    table = Table("name", "state", "class", "kind", "tasks")
    for name, status, why in rows:
        if status is None:
            table.add_row(name, Text(f"? ({why})", style="yellow"), "", "", "")
            continue
        states = ", ".join(f"{t.task_id}:{t.state}" for t in status.tasks) or "-"
        table.add_row(name, state_text(status.state), status.connector_class, status.kind, states)
    return table


def tasks_config_view(name: str, task_configs: Sequence[Mapping[str, str]], connector_class: str) -> Group:
    tables = [
        config_table(masked(c, connector_class), title=f"task {i} of {name}")
        for i, c in enumerate(task_configs)
    ]
    return Group(*tables) if tables else Group(Text(f"connector {name} has no task configs yet"))


# --- validate ------------------------------------------------------------------------------------------


def field_of(message: str) -> str:
    """The field a validation message is about (``... field 'topic': is required`` -> ``topic``)."""
    found = _FIELD.search(message)
    return found.group(1) if found else "-"


def validation_json(name: str, result: Any) -> dict[str, Any]:
    """Kafka's validate answer, reduced: ``error_count`` and the errors per field."""
    return {
        "name": name,
        "connector_class": result.connector_class,
        "kind": result.kind,
        "error_count": len(result.errors),
        "errors": [{"field": field_of(e), "message": e} for e in result.errors],
        "tasks": len(result.task_configs),
    }


def validation_view(name: str, result: Any) -> RenderableType:
    if not result.errors:
        return Text(
            f"connector {name}: configuration is valid ({result.kind} {result.connector_class}, "
            f"{len(result.task_configs)} task(s))",
            style="green",
        )
    table = Table(
        "field", "error", title=f"connector {name}: {len(result.errors)} error(s)", title_justify="left"
    )
    for message in result.errors:
        table.add_row(field_of(message), message)
    return table


# --- plugins and offsets ------------------------------------------------------------------------------


def plugins_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    table = Table("name", "kind", "class", "aliases")
    for row in rows:
        table.add_row(row["name"], row["kind"], row["class"], "\n".join(row["aliases"]) or "-")
    return table


def plugin_fields_table(name: str, rows: Sequence[Mapping[str, Any]]) -> Table:
    table = Table("field", "type", "default", "secret", "doc", title=f"{name} config", title_justify="left")
    for row in rows:
        default = "(required)" if row["required"] else json.dumps(row["default"], default=str)
        aliases = f" (also {', '.join(row['aliases'])})" if row["aliases"] else ""
        table.add_row(row["name"] + aliases, row["type"], default, "yes" if row["secret"] else "", row["doc"])
    return table


def offsets_table(name: str, offsets: Sequence[Mapping[str, Any]]) -> RenderableType:
    if not offsets:
        return Text(f"connector {name} has no committed offsets")
    table = Table("partition", "offset", title=f"offsets of {name}", title_justify="left")
    for entry in offsets:
        table.add_row(_compact(entry.get("partition")), _position(entry.get("offset")))
    return table


def _position(offset: Any) -> str:
    """``{"position": {"v": 1, "key": [40], "meta": {"file": "…"}}}`` as ``40 (file=…)``."""
    position = offset.get("position") if isinstance(offset, Mapping) else None
    if not isinstance(position, Mapping) or "key" not in position:
        return _compact(position if position is not None else offset)
    key = position["key"]
    text = ", ".join(str(k) for k in key) if isinstance(key, list) else str(key)
    meta = position.get("meta")
    return f"{text} ({_compact(meta)})" if isinstance(meta, Mapping) and meta else text


def _compact(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return json.dumps(value)


#: differing keys listed per table and kind in `sluice verify`'s table (all of them in its JSON)
VERIFY_SHOWN = 10


def verify_table(report: VerifyReport) -> RenderableType:
    """Each table's verdict, then the first differing keys of each kind."""
    from sluice.worker.verify.model import json_key

    table = Table("source", "target", "rows", "missing", "extra", "different", "seconds", "verdict")
    details: list[RenderableType] = [table]
    for t in report.tables:
        verdict = Text("equal", "green") if t.equal else Text("DIFFERENT", "bold red")
        table.add_row(t.source_table, t.target_table, f"{t.rows_compared:,}", str(len(t.missing)),
                      str(len(t.extra)), str(len(t.different)), f"{t.seconds:.1f}", verdict)  # fmt: skip
        for kind, keys in (("missing", t.missing), ("extra", t.extra)):
            for key in keys[:VERIFY_SHOWN]:
                details.append(Text(f"{t.source_table}: {kind} {_compact(json_key(key))}"))
        for diff in t.different[:VERIFY_SHOWN]:
            details.append(
                Text(f"{t.source_table}: different {_compact(json_key(diff.key))}: {', '.join(diff.columns)}")
            )
        hidden = sum(max(len(k) - VERIFY_SHOWN, 0) for k in (t.missing, t.extra, t.different))
        if hidden:
            details.append(Text(f"{t.source_table}: {hidden} more (--output json lists every key)", "dim"))
    return Group(*details)


def preview_json(shown: SourcePreview | SinkPreview) -> dict[str, Any]:
    from sluice.activities.preview import SourcePreview, message_rows

    schema = shown.records.schema
    out: dict[str, Any] = {
        "connector": shown.connector,
        "class": shown.connector_class,
        "schema": {f: str(schema.field(f).type) for f in ("key", "value") if f in schema.names},
    }
    if isinstance(shown, SourcePreview):
        return {**out, "topic": shown.topic, "messages": message_rows(shown.messages),
                "bad_record": shown.bad, "dead_letters": shown.dead_letters}  # fmt: skip
    return {
        **out,
        "topics": list(shown.topics),
        "records": [_record_row(r) for r in shown.records.select(["topic", "key", "value"]).to_pylist()]
        if shown.records.num_rows
        else [],
        "writes": [{"target": w.target, "ddl": list(w.ddl), "writes": w.writes} for w in shown.planned],
        "bad_record": shown.bad,
        "refused": shown.refused,
    }


def _record_row(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: json.loads(json.dumps(v, default=str)) for k, v in row.items()}


def preview_view(shown: SourcePreview | SinkPreview) -> RenderableType:
    """What the first batch would do: for a source, the record schema the converter writes, then
    each message; for a sink, its records, then the DDL and writes per target."""
    as_json = preview_json(shown)
    schema = Table("field", "type", title="record schema (after the transforms)", title_justify="left")
    for field_name, kind in as_json["schema"].items():
        schema.add_row(field_name, kind)
    if "messages" in as_json:
        head = Text(f"connector {shown.connector} ({shown.connector_class}) -> topic {as_json['topic']}: "
                    f"{len(as_json['messages'])} message(s) previewed, none sent")  # fmt: skip
        rows = Table(
            "key", "value", "properties", title="messages (after the converter)", title_justify="left"
        )
        for m in as_json["messages"]:
            rows.add_row(str(m["key"]), _cut(str(m["value"])), _compact(m["properties"]))
    else:
        head = Text(f"connector {shown.connector} ({shown.connector_class}) <- topics "
                    f"{', '.join(as_json['topics']) or '(none)'}: {len(as_json['records'])} record(s) "
                    "previewed, nothing written")  # fmt: skip
        rows = Table("topic", "key", "value", title="records (after the transforms)", title_justify="left")
        for r in as_json["records"]:
            rows.add_row(str(r["topic"]), _cut(json.dumps(r["key"])), _cut(json.dumps(r["value"])))
    parts: list[RenderableType] = [head, schema, rows]
    for w in as_json.get("writes", []):
        parts.append(Text(f"{w['target']}: {w['writes']}"))
        parts.extend(Text(f"  {sql}", "cyan") for sql in w["ddl"])
    if as_json.get("refused"):
        parts.append(Text(f"the batch would fail: {as_json['refused']}", "bold red"))
    if as_json["bad_record"]:
        parts.append(Text(f"the batch would stop at a bad record: {as_json['bad_record']}", "bold red"))
    if as_json.get("dead_letters"):
        parts.append(Text(f"{as_json['dead_letters']} record(s) would go to the dead letter queue", "yellow"))
    return Group(*parts)


def _cut(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


# --- backfills ---------------------------------------------------------------------------------------

BACKFILL_STYLES = {
    "running": "green",
    "waiting": "cyan",
    "done": "dim",
    "cancelled": "yellow",
    "superseded": "dim",
}
#: the requests `connector status` shows (the newest); `connector backfill NAME` shows them all
STATUS_BACKFILLS = 5


def backfills_created(name: str, created: Sequence[Backfill]) -> RenderableType:
    table = Table("id", "tables", "condition", title=f"backfills of {name} requested", title_justify="left")
    for r in created:
        table.add_row(str(r.id), ", ".join(r.tables), r.condition or "(every row)")
    hint = Text(f"progress: sluice connector backfill {name}; cancel: --cancel ID", style="dim")
    return Group(table, hint)


def backfills_table(name: str, statuses: Sequence[BackfillStatus], *, brief: bool = False) -> RenderableType:
    """One row per request and table: its state, rows read and last key (``brief``: the newest
    requests, without condition and key, as `connector status` shows them)."""
    if not statuses:
        return Text(f"connector {name} has no backfill requests")
    shown = statuses[-STATUS_BACKFILLS:] if brief else statuses
    columns = (
        ("id", "table", "state", "rows")
        if brief
        else ("id", "table", "condition", "state", "rows", "last key")
    )
    table = Table(*columns, title="backfills" if brief else f"backfills of {name}", title_justify="left")
    for s in shown:
        for p in s.tables:
            state = Text(p.state, style=BACKFILL_STYLES.get(p.state, ""))
            cells: list[RenderableType] = [str(s.request.id), p.table]
            if not brief:
                cells.append(_cut(s.request.condition or "(every row)", 80))
            cells += [state, f"{p.rows:,}"]
            if not brief:
                cells.append(p.last_key or "-")
            table.add_row(*cells)
    older = len(statuses) - len(shown)
    if older:
        return Group(table, Text(f"{older} older: sluice connector backfill {name}", style="dim"))
    return table
