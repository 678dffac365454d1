"""The postgres-cdc source's configuration: Debezium's PostgreSQL connector keys.

A Debezium (Kafka Connect or RocketMQ Connect) config runs unchanged where Sluice supports what it
asks: ``plugin.name`` must be ``pgoutput`` (built into PostgreSQL 10+; ``decoderbufs``/``wal2json``
are refused with a message saying so); ``snapshot.mode`` is ``initial`` (Debezium's default: the
rows already there first, connectors.cdc.snapshot), ``initial_only`` or ``never`` (Debezium 2's
``no_data``). Include/exclude lists are Debezium's
comma-separated regular expressions, matched against whole ``schema.table`` names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from sluice.connectors.cdc import LOG_IDLE_BACKOFF
from sluice.connectors.cdc.operations import skipped_field
from sluice.connectors.cdc.signals import signal_field
from sluice.connectors.cdc.snapshot import CHUNK_SIZE, mode_problem
from sluice.connectors.config import ConfigField, FieldError, at_least, non_empty

PLUGINS_REFUSED: Final = ("decoderbufs", "wal2json", "wal2json_streaming", "wal2json_rds")


def _regexes(value: Any) -> str | None:
    for item in value:
        try:
            re.compile(item)
        except re.error as exc:
            return f"{item!r} is not a regular expression: {exc}"
    return None


def _plugin(value: Any) -> str | None:
    if value == "pgoutput":
        return None
    known = " (a Debezium plugin Sluice does not decode)" if value in PLUGINS_REFUSED else ""
    return f"plugin {value!r} is not supported{known}: set plugin.name=pgoutput (built into PostgreSQL)"


FIELDS: Final = (
    ConfigField("database.hostname", str, doc="PostgreSQL host", validator=non_empty),
    ConfigField("database.port", int, 5432, doc="PostgreSQL port", validator=at_least(1)),
    ConfigField("database.user", str, doc="a user with the REPLICATION privilege", validator=non_empty),
    ConfigField("database.password", str, "", doc="its password", secret=True),
    ConfigField("database.dbname", str, doc="the database to capture", validator=non_empty),
    ConfigField(
        "topic.prefix",
        str,
        doc="topics are <topic.prefix>.<schema>.<table> with '.' (and other characters RocketMQ refuses) "
        "as '_'",
        validator=non_empty,
        aliases=("database.server.name",),
    ),
    ConfigField("topic", str, "", doc="not used: each table goes to its own topic (topic.prefix)"),
    ConfigField(
        "schema.include.list",
        list[str],
        [],
        doc="regular expressions of schemas to capture (all when empty)",
        validator=_regexes,
        aliases=("schema.whitelist",),
    ),
    ConfigField(
        "schema.exclude.list",
        list[str],
        [],
        doc="schemas not to capture",
        validator=_regexes,
        aliases=("schema.blacklist",),
    ),  # fmt: skip
    ConfigField(
        "table.include.list",
        list[str],
        [],
        doc="regular expressions of schema.table names to capture (all when empty)",
        validator=_regexes,
        aliases=("table.whitelist",),
    ),
    ConfigField(
        "table.exclude.list",
        list[str],
        [],
        doc="schema.table names not to capture",
        validator=_regexes,
        aliases=("table.blacklist",),
    ),  # fmt: skip
    ConfigField("slot.name", str, "", doc="logical replication slot (default: sluice_<connector name>)"),
    ConfigField("publication.name", str, "", doc="publication (default: the slot's name)"),
    ConfigField(
        "publication.autocreate.mode",
        str,
        "all_tables",
        doc="all_tables: CREATE PUBLICATION ... FOR ALL TABLES if missing; filtered: for the captured "
        "tables (and kept in step); disabled: it must exist",
        choices=("all_tables", "filtered", "disabled"),
    ),
    ConfigField("plugin.name", str, "pgoutput", doc="logical decoding plugin: pgoutput", validator=_plugin),
    ConfigField(
        "snapshot.mode",
        str,
        "initial",
        doc="initial: existing rows first (primary-key chunks, no locks), then changes; initial_only: "
        "existing rows only; never (no_data, schema_only): changes from the connector's start on",
        validator=mode_problem,
    ),
    ConfigField(
        "snapshot.chunk.size",
        int,
        CHUNK_SIZE,
        doc="rows per snapshot chunk (one chunk per table per batch)",
        validator=at_least(1),
        aliases=("incremental.snapshot.chunk.size",),
    ),
    ConfigField("tombstones.on.delete", bool, True, doc="a tombstone (null value) follows each delete"),
    signal_field("public.debezium_signal"),
    skipped_field(),
    LOG_IDLE_BACKOFF,
)


def _matches(patterns: Sequence[str], text: str) -> bool:
    return any(re.fullmatch(p, text) for p in patterns)


def select_tables(config: Mapping[str, Any], tables: Sequence[str]) -> list[str]:
    """The ``schema.table`` names the include/exclude lists capture, in the order given."""
    schemas_in, schemas_out = config.get("schema.include.list") or [], config.get("schema.exclude.list") or []
    tables_in, tables_out = config.get("table.include.list") or [], config.get("table.exclude.list") or []
    out = []
    for table in tables:
        schema = table.partition(".")[0]
        if schemas_in and not _matches(schemas_in, schema) or _matches(schemas_out, schema):
            continue
        if tables_in and not _matches(tables_in, table) or _matches(tables_out, table):
            continue
        out.append(table)
    return out


def unmatched_includes(config: Mapping[str, Any], tables: Sequence[str]) -> list[str]:
    """``table.include.list`` entries that name no table (a typo, a table not created yet)."""
    return [p for p in config.get("table.include.list") or [] if not any(re.fullmatch(p, t) for t in tables)]


def table_problems(
    owner: str, selected: Sequence[str], keys: Mapping[str, Sequence[str]], identity: Mapping[str, str]
) -> list[FieldError]:
    """Tables the connector cannot capture correctly, each with what to change."""
    out = []
    for table in selected:
        if not keys.get(table):
            out.append(
                FieldError(
                    "table.include.list",
                    f"{owner}: table {table!r} has no primary key: its change records would have no key, "
                    "so a sink could neither update nor delete its rows (and PostgreSQL refuses its "
                    "UPDATE/DELETE once published without a replica identity); add a primary key or "
                    "leave it out with table.exclude.list",
                )
            )
        elif identity.get(table) in ("n", "i"):
            kind = "NOTHING" if identity.get(table) == "n" else "USING INDEX"
            out.append(
                FieldError(
                    "table.include.list",
                    f"{owner}: table {table!r} has REPLICA IDENTITY {kind}: updates and deletes would not "
                    f"carry the old primary key; ALTER TABLE {table} REPLICA IDENTITY DEFAULT (or FULL)",
                )
            )
    return out
