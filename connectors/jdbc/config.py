"""The JDBC source's configuration: Kafka Connect JDBC source key names, validated up front.

Kept apart from the connector so the workflow side (validation, REST) imports only this and the
pure SQL planner, never a database driver. Topic names: RocketMQ allows no dots, so a table
``shop.orders`` with ``topic.prefix=mysql-`` goes to topic ``mysql-shop_orders`` (every character
RocketMQ refuses becomes ``_``; see :func:`topic_for`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sluice.connectors.config import (
    ConfigField,
    FieldError,
    at_least,
    topic_name_problem,
    valid_optional_topic,
)
from sluice.connectors.jdbc.connection_config import connection_fields
from sluice.connectors.jdbc.queries import Mode
from sluice.connectors.secrets import has_reference

_NOT_TOPIC_CHARS: Final = re.compile(r"[^%|a-zA-Z0-9_-]")
QUERY_PARTITION: Final = "query"
#: Half the default batch: a full batch (the initial load) is read by two Spark tasks at once.
DEFAULT_SPLIT_ROWS: Final = 25_000


def _zone(value: Any) -> str | None:
    try:
        ZoneInfo(str(value))
    except (ZoneInfoNotFoundError, ValueError):
        return "unknown time zone"
    return None


FIELDS: Final = (
    *connection_fields(),
    ConfigField(
        "mode",
        str,
        doc="bulk | incrementing | timestamp | timestamp+incrementing",
        choices=tuple(m.value for m in Mode),
    ),
    ConfigField("incrementing.column.name", str, "", doc="strictly increasing integer column"),
    ConfigField("timestamp.column.name", list[str], [], doc="timestamp column(s); several: COALESCE"),
    ConfigField(
        "table.whitelist",
        list[str],
        [],
        doc="tables to read (db.table or schema.table)",
        aliases=("table.include.list",),
    ),
    ConfigField(
        "table.blacklist",
        list[str],
        [],
        doc="tables not to read when no whitelist is given",
        aliases=("table.exclude.list",),
    ),
    ConfigField("query", str, "", doc="a custom SELECT read instead of tables (its rows: partition 'query')"),
    ConfigField("topic.prefix", str, "", doc="topic = prefix + table (characters RocketMQ refuses -> '_')"),
    ConfigField(
        "topic",
        str,
        "",
        doc="one topic for every table instead of topic.prefix + table",
        validator=valid_optional_topic,
        aliases=("connect.topicname",),
    ),
    ConfigField(
        "batch.max.records",
        int,
        50_000,
        doc="rows per micro-batch (shared by the task's tables); a table's first load comes in such batches",
        validator=at_least(1),
        aliases=("batch.max.rows",),
    ),
    ConfigField(
        "timestamp.delay.interval.ms",
        int,
        0,
        doc="rows newer than now - this wait for a later batch",
        validator=at_least(0),
    ),
    ConfigField("validate.non.null", bool, True, doc="refuse nullable incrementing/timestamp columns"),
    ConfigField(
        "db.timezone", str, "UTC", doc="zone of DATETIME / timestamp-without-zone columns", validator=_zone
    ),
    ConfigField(
        "read.split.rows",
        int,
        DEFAULT_SPLIT_ROWS,
        doc="rows per Spark task when a batch is read in parallel",
        validator=at_least(1),
    ),
)


def topic_for(table: str, prefix: str, topic: str = "") -> str:
    """The topic a table's records go to: ``topic`` if set, else prefix + table with every
    character RocketMQ refuses (the dot of ``db.table`` first of all) replaced by ``_``."""
    if topic:
        return topic
    return _NOT_TOPIC_CHARS.sub("_", prefix + ("" if table == QUERY_PARTITION else table))


def config_problems(raw: Mapping[str, Any], owner: str) -> list[FieldError]:
    """Cross-field rules (Kafka's): which columns each mode needs, query versus tables, topics."""
    errors: list[FieldError] = []

    def bad(field: str, message: str) -> None:
        errors.append(FieldError(field, f"{owner}: field {field!r}: {message}"))

    mode = str(raw.get("mode") or "")
    inc = str(raw.get("incrementing.column.name") or "").strip()
    ts = str(raw.get("timestamp.column.name") or "").strip()
    if mode in (Mode.INCREMENTING, Mode.TIMESTAMP_INCREMENTING) and not inc:
        bad("incrementing.column.name", f"is required in mode {mode}")
    if mode in (Mode.TIMESTAMP, Mode.TIMESTAMP_INCREMENTING) and not ts:
        bad("timestamp.column.name", f"is required in mode {mode}")
    query = str(raw.get("query") or "").strip()
    whitelist = str(raw.get("table.whitelist") or "").strip()
    if query and (whitelist or str(raw.get("table.blacklist") or "").strip()):
        bad("query", "cannot be combined with table.whitelist / table.blacklist")
    prefix, topic = str(raw.get("topic.prefix") or ""), str(raw.get("topic") or "")
    if query and not (prefix or topic):
        bad("topic.prefix", "is required with 'query' (it is the topic of the query's rows)")
    if not query and not (prefix or topic) and not whitelist:
        bad("topic.prefix", "set topic.prefix (topic = prefix + table) or topic")
    tables = [t.strip() for t in whitelist.split(",") if t.strip()] or ([QUERY_PARTITION] if query else [])
    if (prefix or topic) and not has_reference(prefix):
        for table in tables:
            name = topic_for(table, prefix, topic)
            problem = topic_name_problem(name) if name else "empty topic name"
            if problem:
                bad("topic.prefix", f"table {table!r} would go to topic {name!r}: {problem}")
    return errors
