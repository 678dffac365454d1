"""The lake sinks' keys: Sluice's own (Confluent JDBC sink spellings where one fits), and the
aliases users' files carry — Apache Iceberg's Kafka Connect sink (``iceberg.*``) and RocketMQ
Connect's Delta Lake sink (``tablePath``). docs/lake.md has the mapping.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from sluice.connectors.config import ConfigDef, ConfigField, FieldError, split_list, valid_regex

APPEND: Final = "append"
UPSERT: Final = "upsert"
#: Confluent's JDBC sink says ``insert`` for what a lake calls append.
_MODE_SPELLINGS: Final = {"insert": APPEND, "append": APPEND, "upsert": UPSERT}
TOPIC_PLACEHOLDER: Final = "${topic}"


def _mode(value: Any) -> Any:
    return _MODE_SPELLINGS.get(value.strip().lower(), value) if isinstance(value, str) else value


def _implied_mode(raw: Mapping[str, Any]) -> str:
    """Iceberg's Kafka Connect sink turns upserts on with ``iceberg.tables.upsert-mode-enabled``."""
    flag = str(raw.get("iceberg.tables.upsert-mode-enabled") or "").strip().lower()
    return UPSERT if flag == "true" else APPEND


def _format_problem(value: Any) -> str | None:
    text = str(value)
    if not text.strip():
        return "is empty"
    rest = text.replace(TOPIC_PLACEHOLDER, "")
    if "${" in rest:
        return f"only {TOPIC_PLACEHOLDER} may be substituted"
    return None


COMMON: Final = (
    ConfigField(
        "insert.mode",
        str,
        APPEND,
        doc="append: a row per record (events); upsert: MERGE on the key, deletes by tombstone or __op=d",
        choices=(APPEND, UPSERT),
        normalize=_mode,
        implied=_implied_mode,
    ),
    ConfigField(
        "pk.fields",
        list[str],
        [],
        doc="upsert key columns; empty: the fields of the record key (a struct)",
        aliases=("iceberg.tables.default-id-columns",),
    ),
    ConfigField(
        "delete.enabled",
        bool,
        True,
        doc="upsert mode: a tombstone, __op=d or __deleted=true deletes its key's row",
    ),
    ConfigField(
        "table.name.format",
        str,
        TOPIC_PLACEHOLDER,
        doc="table name; ${topic} is the record's topic (after transforms such as RegexRouter)",
        validator=_format_problem,
        aliases=("delta.lake.table.format",),
    ),
    ConfigField(
        "auto.create",
        bool,
        True,
        doc="create a missing table from the records' schema",
        aliases=("iceberg.tables.auto-create-enabled", "delta.lake.table.auto.create"),
    ),
    ConfigField(
        "auto.evolve",
        bool,
        True,
        doc="add the records' new fields to the table as columns",
        aliases=("iceberg.tables.evolve-schema-enabled",),
    ),
    ConfigField(
        "partition.fields",
        list[str],
        [],
        doc="columns a created table is partitioned by",
        aliases=("iceberg.tables.default-partition-by",),
    ),
)

DELTA_FIELDS: Final = ConfigDef(
    (
        *COMMON,
        ConfigField(
            "delta.lake.tables.location",
            str,
            "",
            doc="folder (any Hadoop path: file:, s3a:, hdfs:, abfss:) holding one Delta table per name",
        ),
        ConfigField(
            "tablePath",
            str,
            "",
            doc="RocketMQ Connect: the one table's path, for every topic (wins over the location)",
        ),
    )
)

ICEBERG_FIELDS: Final = ConfigDef(
    (
        *COMMON,
        ConfigField("iceberg.catalog", str, "iceberg", doc="the catalog's name, as messages show it"),
        ConfigField(
            "iceberg.catalog.type",
            str,
            "hadoop",
            doc="hadoop (a warehouse folder), hive, rest, jdbc, … (Iceberg's catalog types); "
            "other iceberg.catalog.* keys are the catalog's properties",
        ),
        ConfigField("iceberg.catalog.warehouse", str, "", doc="the warehouse path (any Hadoop path)"),
        ConfigField("iceberg.namespace", str, "default", doc="namespace of table.name.format's tables"),
        ConfigField(
            "iceberg.tables",
            list[str],
            [],
            doc="one table (namespace.name) for every topic, or several chosen by "
            "iceberg.tables.route-field; empty: table.name.format in iceberg.namespace",
        ),
        ConfigField(
            "iceberg.tables.route-field",
            str,
            "",
            doc="a field of the record value (a.b for a nested one) choosing the table: with several "
            "iceberg.tables, the tables whose iceberg.table.<table>.route-regex matches all of its "
            "value; with iceberg.tables.dynamic-enabled, the table its value names",
        ),
        ConfigField(
            "iceberg.tables.dynamic-enabled",
            bool,
            False,
            doc="each record goes to the table named by its iceberg.tables.route-field (lower-cased)",
        ),
    )
)

#: ``iceberg.table.<table>.route-regex``: which route values a table of several takes.
ROUTE_REGEX: Final = "iceberg.table.{}.route-regex"


def delta_errors(config: Mapping[str, Any], owner: str) -> list[FieldError]:
    if not str(config.get("delta.lake.tables.location") or config.get("tablePath") or "").strip():
        return [FieldError("delta.lake.tables.location", f"{owner}: field 'delta.lake.tables.location' "
                           "is required (or RocketMQ Connect's tablePath)")]  # fmt: skip
    return []


def iceberg_errors(config: Mapping[str, Any], owner: str) -> list[FieldError]:
    errors = _route_errors(config, owner)
    catalog_type = str(config.get("iceberg.catalog.type") or "hadoop")
    if catalog_type == "hadoop" and not str(config.get("iceberg.catalog.warehouse") or "").strip():
        errors.append(FieldError("iceberg.catalog.warehouse", f"{owner}: field 'iceberg.catalog.warehouse' "
                                 "is required for iceberg.catalog.type=hadoop"))  # fmt: skip
    return errors


def _route_errors(config: Mapping[str, Any], owner: str) -> list[FieldError]:
    """What Iceberg's Kafka Connect sink asks of its routing keys, said before any batch runs."""
    tables = list_of(config.get("iceberg.tables"))
    field = str(config.get("iceberg.tables.route-field") or "").strip()
    if config.get("iceberg.tables.dynamic-enabled"):
        if not field:
            return [FieldError("iceberg.tables.route-field", f"{owner}: field 'iceberg.tables.route-field' "
                               "is required with iceberg.tables.dynamic-enabled=true")]  # fmt: skip
        if tables:
            return [FieldError("iceberg.tables", f"{owner}: field 'iceberg.tables' names tables, but "
                               "iceberg.tables.dynamic-enabled=true takes each record's table from "
                               f"its field {field!r}; give one or the other")]  # fmt: skip
        return []
    if len(tables) > 1 and not field:
        message = (f"{owner}: field 'iceberg.tables' names {len(tables)} tables; give one (every topic "
                   "goes there), or iceberg.tables.route-field with each table's "
                   f"{ROUTE_REGEX.format('<table>')}, or none and use table.name.format")  # fmt: skip
        return [FieldError("iceberg.tables", message)]
    errors = []
    for table in tables if field else ():
        key = ROUTE_REGEX.format(table)
        pattern = str(config.get(key) or "")
        problem = valid_regex(pattern) if pattern else "required with iceberg.tables.route-field"
        if problem:
            errors.append(FieldError(key, f"{owner}: field {key!r} is {problem}"))
    return errors


def route_field(config: Mapping[str, Any]) -> str:
    """The record value's field that routes records to tables ('' when nothing is routed by field)."""
    tables = list_of(config.get("iceberg.tables"))
    if config.get("iceberg.tables.dynamic-enabled") or len(tables) > 1:
        return str(config.get("iceberg.tables.route-field") or "").strip()
    return ""


def routed_tables(
    config: Mapping[str, Any], values: Iterable[str | None]
) -> tuple[dict[str, list[str]], list[str | None]]:
    """Where records go by their route field's value: the route values each table takes, and the
    values no table takes. Dynamic: the value, lower-cased, names the table (as Iceberg's sink
    names it); otherwise every one of ``iceberg.tables`` whose route regex matches the whole value
    takes it (a value may go to several tables)."""
    tables: dict[str, list[str]] = {}
    unrouted: list[str | None] = []
    dynamic = bool(config.get("iceberg.tables.dynamic-enabled"))
    for value in sorted(set(values), key=lambda v: (v is None, v or "")):
        if value is None or (dynamic and not value.strip()):
            unrouted.append(value)
            continue
        if dynamic:
            targets = [value.strip().lower()]
        else:
            targets = [t for t in list_of(config.get("iceberg.tables"))
                       if re.fullmatch(str(config.get(ROUTE_REGEX.format(t)) or ""), value)]  # fmt: skip
        if not targets:
            unrouted.append(value)
        for table in targets:
            tables.setdefault(table, []).append(value)
    return tables, unrouted


def table_name(config: Mapping[str, Any], topic: str) -> str:
    """The table a topic's records go to, by ``table.name.format``."""
    return str(config.get("table.name.format") or TOPIC_PLACEHOLDER).replace(TOPIC_PLACEHOLDER, topic)


def names_one_table(config: Mapping[str, Any]) -> bool:
    """Whether every record goes to one table whatever its topic."""
    return TOPIC_PLACEHOLDER not in str(config.get("table.name.format") or TOPIC_PLACEHOLDER)


def catalog_properties(config: Mapping[str, Any]) -> dict[str, str]:
    """The Iceberg catalog's properties: every ``iceberg.catalog.<key>`` (Spark's catalog settings
    under ``spark.sql.catalog.<name>.<key>``)."""
    prefix = "iceberg.catalog."
    return {k[len(prefix):]: str(v) for k, v in sorted(config.items())
            if k.startswith(prefix) and v not in (None, "")}  # fmt: skip


def spark_catalog_name(config: Mapping[str, Any]) -> str:
    """The name the catalog is registered under in the worker's SparkSession: derived from its
    properties, so two connectors naming different warehouses ``iceberg`` never share one."""
    digest = hashlib.sha1(repr(catalog_properties(config)).encode()).hexdigest()[:12]
    return f"sluice_iceberg_{digest}"


def list_of(value: Any) -> list[str]:
    return list(value) if isinstance(value, list) else split_list(str(value or ""))
