"""mysql-cdc's up-front checks (``MySqlCdcConnector.start``): the server, the tables, the signal
table and the topic names, every problem as a field error naming the connector and what to change."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.connectors.cdc import signals
from sluice.connectors.cdc import snapshot as snap
from sluice.connectors.cdc.mysql import binlog as sql
from sluice.connectors.cdc.mysql.config import select_tables, server_id, table_problems, unmatched_includes
from sluice.connectors.cdc.topics import topic_problem
from sluice.connectors.config import FieldError


def params(config: Mapping[str, Any]) -> sql.Params:
    return sql.Params(
        str(config["database.hostname"]),
        int(config.get("database.port") or 3306),
        str(config["database.user"]),
        str(config.get("database.password") or ""),
    )


def start_problems(config: Mapping[str, Any], name: str) -> list[FieldError]:
    """Binary log on in ROW format with full row images, replication privileges, a replica id that
    is not the server's, tables that exist and have primary keys, a usable signal table, topic names."""
    owner = f"connector {name!r}"
    conn = sql.connect(params(config), owner)
    try:
        errors = [
            FieldError(f, f"{owner}: {m}")
            for f, m in sql.server_problems(conn, server_id(config, name), str(config["database.user"]))
        ]
        keys = sql.list_tables(conn)
        signal = signals.signal_table(config)
        columns = sql.column_names(conn, *signal.split(".", 1)) if signal else []
    finally:
        conn.close()
    errors += signals.table_errors(
        owner,
        config,
        columns if signal in keys else None,
        keys.get(signal, ()),
        snap.snapshot_mode(config) != "initial_only",
    )
    selected = [t for t in select_tables(config, list(keys)) if t != signal]
    errors += [FieldError(e.field, f"{owner}: {e.message}") for e in unmatched_includes(config, list(keys))]
    if not selected and not errors:
        errors.append(FieldError("table.include.list", f"{owner}: no table to capture"))
    errors += table_problems(owner, selected, keys)
    for table in selected:
        problem = topic_problem(str(config["topic.prefix"]), *table.split(".", 1))
        if problem:
            errors.append(FieldError("topic.prefix", f"{owner}: {problem}"))
    return errors
