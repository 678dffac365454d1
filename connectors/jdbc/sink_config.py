"""The JDBC sink's configuration: Kafka Connect JDBC sink keys, and the checks between them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.connectors.config import ConfigDef, ConfigField, FieldError, at_least, non_empty
from sluice.connectors.jdbc.connection_config import connection_fields, url_problem


def fields(
    *, pk_mode_default: str = "none", schema_default: str = "", url_check: Any = url_problem
) -> ConfigDef:
    """The sink's fields; ``postgres-sink`` (the alias) keeps its old defaults through the arguments."""
    return ConfigDef(
        (
            *connection_fields(url_check),
            ConfigField(
                "insert.mode",
                str,
                "insert",
                doc="insert appends; upsert inserts or updates by key; update updates existing keys only",
                choices=("insert", "upsert", "update"),
            ),
            ConfigField(
                "pk.mode",
                str,
                pk_mode_default,
                doc="where the key comes from: none, kafka (topic/partition/offset), record_key, "
                "record_value",
                choices=("none", "kafka", "record_key", "record_value"),
            ),
            ConfigField("pk.fields", list[str], [], doc="key column names (see pk.mode)"),
            ConfigField(
                "delete.enabled",
                bool,
                False,
                doc="a null value (tombstone) deletes its key; needs record_key",
            ),
            ConfigField(
                "truncate.enabled",
                bool,
                False,
                doc="a truncate event (ExtractNewRecordState drop.truncates=false) empties its table, "
                "in order with the batch's rows; false: ignored (Debezium JDBC sink's key)",
            ),
            ConfigField("auto.create", bool, False, doc="create a missing table from the records' fields"),
            ConfigField("auto.evolve", bool, False, doc="add a nullable column for a new field"),
            ConfigField(
                "table.name.format",
                str,
                "${topic}",
                doc="target table; ${topic} is replaced by the record's topic",
                validator=non_empty,
                aliases=("table",),
            ),
            ConfigField(
                "schema", str, schema_default, doc="target schema (PostgreSQL) or database (MariaDB)"
            ),
            ConfigField(
                "fields.whitelist",
                list[str],
                [],
                doc="value fields to write (all when empty); key fields are always written",
                aliases=("fields.include.list",),
            ),
            ConfigField(
                "batch.size",
                int,
                50_000,
                doc="rows per LOAD DATA statement (MariaDB) or per CSV chunk of the COPY stream (PostgreSQL)",
                validator=at_least(1),
            ),
        )
    )


def cross_field_errors(config: Mapping[str, Any], owner: str) -> list[FieldError]:
    """Combinations Kafka Connect's JDBC sink refuses too."""
    mode = str(config.get("insert.mode") or "insert")
    pk_mode = str(config.get("pk.mode") or "none")
    pk = config.get("pk.fields") or []
    errors: list[FieldError] = []
    if mode in ("upsert", "update"):
        if pk_mode == "none":
            errors.append(
                FieldError("pk.mode", f"{owner}: field 'pk.mode' must name a key when insert.mode={mode}")
            )
        elif pk_mode == "record_value" and not pk:
            errors.append(
                FieldError("pk.fields", f"{owner}: field 'pk.fields' is required when insert.mode={mode}")
            )
    if config.get("delete.enabled") and pk_mode != "record_key":
        errors.append(
            FieldError("delete.enabled", f"{owner}: field 'delete.enabled' needs pk.mode=record_key")
        )
    return errors
