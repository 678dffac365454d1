"""The mysql-cdc source's configuration: Debezium's MySQL connector keys.

A Debezium (Kafka Connect or RocketMQ Connect) MySQL config runs unchanged where Sluice supports
what it asks: ``snapshot.mode`` is ``initial`` (Debezium's default: the rows already there first,
connectors.cdc.snapshot), ``initial_only`` or ``never`` (``no_data``/``schema_only`` mean the same
here: no rows are read, changes stream from the connector's first planning). Include and
exclude lists are Debezium's comma-separated regular expressions, matched against whole database
names (``database.*``) and whole ``db.table`` names (``table.*``).

``database.server.id`` is the replica id the connector registers with when it reads the binary
log; the server drops an older connection that registers the same id, so it must be unique per
connector (and differ from the server's own ``server_id``). The default is derived from the
connector's name (a CRC-32), so two connectors of one worker differ without configuration.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from sluice.connectors.cdc import LOG_IDLE_BACKOFF
from sluice.connectors.cdc.operations import skipped_field
from sluice.connectors.cdc.signals import signal_field
from sluice.connectors.cdc.snapshot import CHUNK_SIZE, mode_problem
from sluice.connectors.config import ConfigField, FieldError, at_least, non_empty

#: The first server id the default derivation hands out (low ids are usually real servers').
SERVER_ID_BASE: Final = 100_000


def _regexes(value: Any) -> str | None:
    for item in value:
        try:
            re.compile(item)
        except re.error as exc:
            return f"{item!r} is not a regular expression: {exc}"
    return None


def _server_id(value: Any) -> str | None:
    return None if 0 <= int(value) < 2**32 else "must be between 1 and 4294967295 (0: derived from the name)"


FIELDS: Final = (
    ConfigField("database.hostname", str, doc="MySQL/MariaDB host", validator=non_empty),
    ConfigField("database.port", int, 3306, doc="MySQL/MariaDB port", validator=at_least(1)),
    ConfigField(
        "database.user", str, doc="a user with REPLICATION SLAVE and REPLICATION CLIENT", validator=non_empty
    ),
    ConfigField("database.password", str, "", doc="its password", secret=True),
    ConfigField(
        "database.server.id",
        int,
        0,
        doc="replica id for reading the binary log, unique per connector (0: derived from the name)",
        validator=_server_id,
    ),
    ConfigField(
        "topic.prefix",
        str,
        doc="topics are <topic.prefix>.<db>.<table> with '.' (and other characters RocketMQ refuses) as '_'",
        validator=non_empty,
        aliases=("database.server.name",),
    ),
    ConfigField("topic", str, "", doc="not used: each table goes to its own topic (topic.prefix)"),
    ConfigField(
        "database.include.list",
        list[str],
        [],
        doc="regular expressions of databases to capture (all but the system ones when empty)",
        validator=_regexes,
        aliases=("database.whitelist",),
    ),
    ConfigField(
        "database.exclude.list",
        list[str],
        [],
        doc="databases not to capture",
        validator=_regexes,
        aliases=("database.blacklist",),
    ),
    ConfigField(
        "table.include.list",
        list[str],
        [],
        doc="regular expressions of db.table names to capture (all when empty)",
        validator=_regexes,
        aliases=("table.whitelist",),
    ),
    ConfigField(
        "table.exclude.list",
        list[str],
        [],
        doc="db.table names not to capture",
        validator=_regexes,
        aliases=("table.blacklist",),
    ),
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
    ConfigField(
        "gtid.source.includes",
        list[str],
        [],
        doc="regular expressions of GTID sources (MySQL server UUIDs, MariaDB domain ids) whose "
        "transactions decide where reading resumes on another server (all when empty)",
        validator=_regexes,
    ),
    ConfigField(
        "gtid.source.excludes",
        list[str],
        [],
        doc="regular expressions of GTID sources left out when finding a position on another server",
        validator=_regexes,
    ),
    signal_field("shop.debezium_signal"),
    skipped_field(),
    LOG_IDLE_BACKOFF,
)

SYSTEM_DATABASES: Final = frozenset({"mysql", "information_schema", "performance_schema", "sys"})


def server_id(config: Mapping[str, Any], connector: str) -> int:
    """The configured replica id, or one derived from the connector's name (stable across restarts)."""
    configured = int(config.get("database.server.id") or 0)
    if configured:
        return configured
    return SERVER_ID_BASE + zlib.crc32(connector.encode()) % (2**31 - SERVER_ID_BASE)


def _matches(patterns: Sequence[str], text: str) -> bool:
    return any(re.fullmatch(p, text) for p in patterns)


def select_tables(config: Mapping[str, Any], tables: Sequence[str]) -> list[str]:
    """The ``db.table`` names the include/exclude lists capture, in the order given."""
    dbs_in, dbs_out = config.get("database.include.list") or [], config.get("database.exclude.list") or []
    tables_in, tables_out = config.get("table.include.list") or [], config.get("table.exclude.list") or []
    out = []
    for table in tables:
        db = table.partition(".")[0]
        if db in SYSTEM_DATABASES and not dbs_in:
            continue
        if dbs_in and not _matches(dbs_in, db) or _matches(dbs_out, db):
            continue
        if tables_in and not _matches(tables_in, table) or _matches(tables_out, table):
            continue
        out.append(table)
    return out


def unmatched_includes(config: Mapping[str, Any], tables: Sequence[str]) -> list[FieldError]:
    """Include-list entries that name no database or table (a typo, a table not created yet)."""
    dbs = sorted({t.partition(".")[0] for t in tables})
    out = []
    for pattern in config.get("database.include.list") or []:
        if not any(re.fullmatch(pattern, d) for d in dbs):
            out.append(("database.include.list", pattern, "database", dbs))
    for pattern in config.get("table.include.list") or []:
        if not any(re.fullmatch(pattern, t) for t in tables):
            out.append(("table.include.list", pattern, "table", list(tables)))
    return [
        FieldError(
            key, f"{key} entry {pattern!r} matches no {kind} (there are: {', '.join(names[:20]) or 'none'})"
        )
        for key, pattern, kind, names in out
    ]


def table_problems(
    owner: str, selected: Sequence[str], keys: Mapping[str, Sequence[str]]
) -> list[FieldError]:
    """Tables the connector cannot capture correctly, each with what to change."""
    return [
        FieldError(
            "table.include.list",
            f"{owner}: table {table!r} has no primary key: its change records would have no key, so a "
            "sink could neither update nor delete its rows; add a primary key or leave it out with "
            "table.exclude.list",
        )
        for table in selected
        if not keys.get(table)
    ]
