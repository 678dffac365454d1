"""``postgres-sink``: the JDBC sink's PostgreSQL dialect under its old name and defaults.

Kept so existing configs run unchanged: ``table`` (an alias of ``table.name.format``),
``schema`` (default ``public``), ``pk.fields`` without ``pk.mode`` (default ``record_value``), and
only PostgreSQL URLs. Everything else is ``sluice.connectors.jdbc.sink``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from sluice.connectors.api import SinkTask
from sluice.connectors.config import ConfigDef
from sluice.connectors.jdbc.connection_config import url_problem
from sluice.connectors.jdbc.sink import JdbcSinkConnector, JdbcSinkError, JdbcSinkTask
from sluice.connectors.jdbc.sink_config import fields
from sluice.connectors.jdbc.urls import Dialect, dialect_of

PostgresSinkError = JdbcSinkError


def _postgres_url_problem(value: Any) -> str | None:
    problem = url_problem(value)
    if problem is None and dialect_of(str(value)) is not Dialect.POSTGRESQL:
        return "not a PostgreSQL URL (postgres-sink writes PostgreSQL; use jdbc-sink for MySQL/MariaDB)"
    return problem


class PostgresSinkTask(JdbcSinkTask):
    """The JDBC sink task with postgres-sink's defaults (keys by ``pk.fields`` of the value, schema
    ``public``)."""

    defaults: ClassVar[Mapping[str, Any]] = {"pk.mode": "record_value", "schema": "public"}


class PostgresSinkConnector(JdbcSinkConnector):
    """Copies RocketMQ topics into a PostgreSQL table, exactly once (the JDBC sink's dialect)."""

    plugin_name: ClassVar[str] = "postgres-sink"
    config_def: ClassVar[ConfigDef] = fields(
        pk_mode_default="record_value", schema_default="public", url_check=_postgres_url_problem
    )
    task_class: ClassVar[type[SinkTask]] = PostgresSinkTask


__all__ = ["PostgresSinkConnector", "PostgresSinkError", "PostgresSinkTask"]
