"""postgres-cdc's up-front checks (``PostgresCdcConnector.start``): the server, the tables, the
signal table and the topic names, every problem as a field error naming the connector and what to
change."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.connectors.cdc import signals
from sluice.connectors.cdc import snapshot as snap
from sluice.connectors.cdc.postgres import slot as sql
from sluice.connectors.cdc.postgres import snapshot as pgsnap
from sluice.connectors.cdc.postgres.config import select_tables, table_problems, unmatched_includes
from sluice.connectors.cdc.topics import topic_problem
from sluice.connectors.config import FieldError


def params(config: Mapping[str, Any]) -> sql.Params:
    return sql.Params(
        str(config["database.hostname"]),
        int(config.get("database.port") or 5432),
        str(config["database.user"]),
        str(config.get("database.password") or ""),
        str(config["database.dbname"]),
    )


def start_problems(config: Mapping[str, Any], name: str) -> list[FieldError]:
    """wal_level, REPLICATION privilege, tables that exist and have primary keys, a usable signal
    table, topic names."""
    owner = f"connector {name!r}"
    signal = signals.signal_table(config)
    conn = sql.connect(params(config), owner)
    try:
        errors = [FieldError(f, f"{owner}: {m}") for f, m in sql.server_problems(conn)]
        facts = {t.name: t for t in sql.list_tables(conn)}
        columns = [c[0] for c in pgsnap.columns(conn, signal)] if signal in facts else None
    finally:
        conn.close()
    errors += signals.table_errors(
        owner,
        config,
        columns,
        facts[signal].primary_key if signal in facts else (),
        snap.snapshot_mode(config) != "initial_only",
    )
    selected = [t for t in select_tables(config, list(facts)) if t != signal]
    for pattern in unmatched_includes(config, list(facts)):
        errors.append(
            FieldError(
                "table.include.list",
                f"{owner}: table.include.list entry {pattern!r} matches no table of database "
                f"{config['database.dbname']!r} (tables: {', '.join(facts) or 'none'})",
            )
        )
    if not selected and not errors:
        errors.append(FieldError("table.include.list", f"{owner}: no table to capture"))
    errors += table_problems(
        owner,
        selected,
        {t: facts[t].primary_key for t in selected},
        {t: facts[t].replica_identity for t in selected},
    )
    for table in selected:
        problem = topic_problem(str(config["topic.prefix"]), *table.split(".", 1))
        if problem:
            errors.append(FieldError("topic.prefix", f"{owner}: {problem}"))
    return errors
