"""delta-sink and iceberg-sink without services: their keys and aliases, the session settings their
jars bring, the batch reference, and the rows a batch becomes (Spark, no stack)."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.activities.spark import jars_conf
from sluice.connectors.api import Delivery, delivery_of
from sluice.connectors.config import ConfigError
from sluice.connectors.lake import config as cfg
from sluice.connectors.lake.rows import DELETE_COLUMN, RowRules, table_rows
from sluice.connectors.lake.sink import DeltaSinkConnector, DeltaSinkTask, IcebergSinkConnector, batch_ref
from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.plugins import builtin_name
from sluice.connectors.positions import Position

ICEBERG_KAFKA_CONNECT = {
    "connector.class": "org.apache.iceberg.connect.IcebergSinkConnector",
    "topics": "orders",
    "iceberg.tables": "shop.orders",
    "iceberg.tables.upsert-mode-enabled": "true",
    "iceberg.tables.default-id-columns": "id",
    "iceberg.tables.auto-create-enabled": "false",
    "iceberg.tables.evolve-schema-enabled": "false",
    "iceberg.tables.default-partition-by": "status",
    "iceberg.catalog.type": "hadoop",
    "iceberg.catalog.warehouse": "/lake/warehouse",
}


#: Apache Iceberg's Kafka Connect routing by a field: several tables, a regex each.
ROUTED = {
    "connector.class": "org.apache.iceberg.connect.IcebergSinkConnector",
    "topics": "t",
    "iceberg.catalog.warehouse": "/w",
    "iceberg.tables": "shop.eu,shop.us,shop.all",
    "iceberg.tables.route-field": "region",
    "iceberg.table.shop.eu.route-regex": "eu-.*",
    "iceberg.table.shop.us.route-regex": "us-.*",
    "iceberg.table.shop.all.route-regex": ".*",
}


def test_apache_icebergs_keys_are_sluices() -> None:
    assert builtin_name(ICEBERG_KAFKA_CONNECT["connector.class"]) == "iceberg-sink"
    parsed = IcebergSinkConnector().parse(ICEBERG_KAFKA_CONNECT)
    assert parsed["insert.mode"] == cfg.UPSERT
    assert parsed["pk.fields"] == ["id"]
    assert (parsed["auto.create"], parsed["auto.evolve"]) == (False, False)
    assert parsed["partition.fields"] == ["status"]
    assert cfg.catalog_properties(parsed) == {"type": "hadoop", "warehouse": "/lake/warehouse"}
    assert IcebergSinkConnector().validate(ICEBERG_KAFKA_CONNECT) == []


@pytest.mark.parametrize(
    ("connector", "config", "field", "says"),
    [
        (DeltaSinkConnector, {"topics": "t"}, "delta.lake.tables.location", "required"),
        (IcebergSinkConnector, {"topics": "t"}, "iceberg.catalog.warehouse", "required for"),
        (
            IcebergSinkConnector,
            {"topics": "t", "iceberg.catalog.warehouse": "/w", "iceberg.tables": "a.b,c.d"},
            "iceberg.tables",
            "names 2 tables",
        ),
        (
            IcebergSinkConnector,
            {**ROUTED, "iceberg.table.shop.eu.route-regex": ""},
            "iceberg.table.shop.eu.route-regex",
            "is required with iceberg.tables.route-field",
        ),
        (
            IcebergSinkConnector,
            {**ROUTED, "iceberg.table.shop.us.route-regex": "us-(east"},
            "iceberg.table.shop.us.route-regex",
            "not a regular expression",
        ),
        (
            IcebergSinkConnector,
            {"topics": "t", "iceberg.catalog.warehouse": "/w", "iceberg.tables.dynamic-enabled": "true"},
            "iceberg.tables.route-field",
            "required with iceberg.tables.dynamic-enabled",
        ),
        (
            IcebergSinkConnector,
            {**ROUTED, "iceberg.tables.dynamic-enabled": "true"},
            "iceberg.tables",
            "give one or the other",
        ),
        (
            DeltaSinkConnector,
            {"topics": "t", "tablePath": "/p", "table.name.format": "${db}"},
            "table.name.format",
            "only ${topic}",
        ),  # fmt: skip
        (
            DeltaSinkConnector,
            {"topics": "t", "tablePath": "/p", "insert.mode": "merge"},
            "insert.mode",
            "merge",
        ),
    ],
)
def test_bad_configs_name_the_field(connector: Any, config: dict[str, str], field: str, says: str) -> None:
    errors = connector().validate({"name": "lake", "connector.class": connector.plugin_name, **config})
    assert [e.field for e in errors] == [field], errors
    assert says in errors[0].message


def test_rocketmq_connects_delta_class_and_path() -> None:
    raw = {
        "connector.class": "delta-sink",
        "topics": "t",
        "tablePath": "/lake/events",
        "insert.mode": "insert",
    }
    assert (
        builtin_name("org.apache.rocketmq.connect.deltalake.connector.DeltalakeSinkConnector") == "delta-sink"
    )
    parsed = DeltaSinkConnector().parse(raw)
    assert parsed["insert.mode"] == cfg.APPEND  # Confluent's spelling of an append
    task = DeltaSinkTask(parsed, 0)
    assert delivery_of(task) is Delivery.EXACTLY_ONCE
    assert task._fixed_table() == "/lake/events"


def test_each_catalogs_session_name_follows_its_properties() -> None:
    a = {"iceberg.catalog.type": "hadoop", "iceberg.catalog.warehouse": "/a"}
    b = {"iceberg.catalog.type": "hadoop", "iceberg.catalog.warehouse": "/b"}
    assert cfg.spark_catalog_name(a) == cfg.spark_catalog_name(dict(a))
    assert cfg.spark_catalog_name(a) != cfg.spark_catalog_name(b)


def _plan(batch_id: int, end: int) -> BatchPlan:
    ranges = (PartitionRange("broker-a:0", Position((0,)), Position((end,)), "orders"),)
    return BatchPlan("lake", 1, batch_id, ranges)


def test_a_batch_reference_names_the_batch_and_its_exact_ranges() -> None:
    assert batch_ref(_plan(7, 10)) == batch_ref(_plan(7, 10))
    assert batch_ref(_plan(7, 10)).startswith("sluice:lake:1:7:")
    assert batch_ref(_plan(7, 10)) != batch_ref(_plan(7, 11))  # same id, another incarnation's range


DELTA = "/j/delta-spark_4.1_2.13-4.4.0.jar"
ICEBERG = "/j/iceberg-spark-runtime-4.1_2.13-1.12.0.jar"
OTHER = "/j/postgresql-42.7.jar"


@pytest.mark.parametrize(
    ("jars", "extensions", "delta_catalog"),
    [
        ((), None, False),
        ((OTHER,), None, False),
        ((DELTA, "/j/delta-storage-4.4.0.jar"), "io.delta.sql.DeltaSparkSessionExtension", True),
        ((ICEBERG,), "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions", False),
        (
            (OTHER, ICEBERG, DELTA),
            "io.delta.sql.DeltaSparkSessionExtension,org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
            True,
        ),
    ],
)
def test_jars_bring_their_formats_extensions(
    jars: tuple[str, ...], extensions: str | None, delta_catalog: bool
) -> None:
    conf = jars_conf(jars)
    assert conf.get("spark.jars") == (",".join(jars) or None)
    assert conf.get("spark.sql.extensions") == extensions
    assert ("spark.sql.catalog.spark_catalog" in conf) is delta_catalog
    # Delta's log replay in a shuffle's few tasks, not its default 50 (a MERGE 3x faster)
    assert conf.get("spark.databricks.delta.snapshotPartitions") == ("4" if delta_catalog else None)


# ---- rows (Spark, no stack) ------------------------------------------------------------------

SCHEMA = (
    "topic STRING, partition STRING, offset BIGINT, key STRUCT<id: BIGINT>, "
    "value STRUCT<id: BIGINT, name: STRING, __deleted: STRING>, "
    "headers MAP<STRING, STRING>, timestamp TIMESTAMP"
)


def _records(spark: Any) -> Any:
    rows = [
        ("t", "b:0", 0, {"id": 1}, {"id": 1, "name": "a", "__deleted": "false"}, {}),
        ("t", "b:0", 1, {"id": 2}, {"id": 2, "name": "b", "__deleted": "false"}, {}),
        ("t", "b:0", 2, {"id": 1}, {"id": 1, "name": "a2", "__deleted": "false"}, {}),
        ("t", "b:0", 3, {"id": 2}, None, {}),  # tombstone
        ("t", "b:0", 4, {"id": 3}, {"id": 3, "name": "c", "__deleted": "true"}, {}),  # rewritten delete
        ("t", "b:0", 5, {"id": 4}, {"id": 4, "name": "d", "__deleted": "false"}, {"__op": "d"}),
    ]
    return spark.createDataFrame([(*r, None) for r in rows], SCHEMA)


def _rules(mode: str, deletes: bool = True, pk: tuple[str, ...] = ()) -> RowRules:
    return RowRules(mode=mode, pk_fields=pk, deletes=deletes, owner="connector 'lake'")


def test_upsert_rows_keep_each_keys_last_record_and_flag_deletes(spark: Any) -> None:
    shaped = table_rows(_records(spark), _rules(cfg.UPSERT))
    assert shaped.keys == ("id",)
    got = {r["id"]: (r["name"], r[DELETE_COLUMN]) for r in shaped.rows.collect()}
    assert got == {1: ("a2", False), 2: (None, True), 3: ("c", True), 4: ("d", True)}


def test_without_deletes_a_tombstone_is_skipped_and_a_marked_row_is_a_row(spark: Any) -> None:
    shaped = table_rows(_records(spark), _rules(cfg.UPSERT, deletes=False))
    got = {r["id"]: (r["name"], r[DELETE_COLUMN]) for r in shaped.rows.collect()}
    assert got == {1: ("a2", False), 2: ("b", False), 3: ("c", False), 4: ("d", False)}


def test_append_rows_are_every_value_but_tombstones(spark: Any) -> None:
    shaped = table_rows(_records(spark), _rules(cfg.APPEND))
    assert shaped.keys == () and shaped.columns == ["id", "name", "__deleted"]
    assert sorted((r["id"], r["name"]) for r in shaped.rows.collect()) == [
        (1, "a"), (1, "a2"), (2, "b"), (3, "c"), (4, "d")
    ]  # fmt: skip


def test_text_values_are_written_with_their_coordinates(spark: Any) -> None:
    schema = (
        "topic STRING, partition STRING, offset BIGINT, key STRING, value STRING, "
        "headers MAP<STRING, STRING>, timestamp TIMESTAMP"
    )
    frame = spark.createDataFrame([("t", "b:0", 9, "k", '{"x":1}', {}, None)], schema)
    shaped = table_rows(frame, _rules(cfg.APPEND))
    assert [tuple(r) for r in shaped.rows.collect()] == [("t", "b:0", 9, "k", '{"x":1}', None)]
    with pytest.raises(ConfigError, match="insert.mode=upsert needs a key: its values are not structs"):
        table_rows(frame, _rules(cfg.UPSERT))


def test_upsert_without_a_key_names_the_setting(spark: Any) -> None:
    with pytest.raises(ConfigError, match=r"pk.fields \['sku'\] are fields of neither"):
        table_rows(_records(spark), _rules(cfg.UPSERT, pk=("sku",)))


def test_a_topics_records_keep_their_own_fields_of_a_merged_schema(spark: Any) -> None:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from sluice.connectors.lake.sink import narrowed

    merged = "topic STRING, value STRUCT<id: BIGINT, name: STRING, sku: STRING>"
    frame = spark.createDataFrame([("a", {"id": 1, "name": "x", "sku": None}), ("a", None)], merged)
    own = StructType([StructField("id", LongType()), StructField("name", StringType())]).json()
    got = narrowed(frame, "value", own)
    assert got.schema["value"].dataType.simpleString() == "struct<id:bigint,name:string>"
    assert [r["value"] for r in got.collect()] == [(1, "x"), None]


ROUTE_CASES = [
    # config, the batch's distinct route values, tables with the values they take, values unrouted
    pytest.param(
        ROUTED,
        ["eu-west", "us-east", "eu-north"],
        {
            "shop.eu": ["eu-north", "eu-west"],
            "shop.us": ["us-east"],
            "shop.all": ["eu-north", "eu-west", "us-east"],
        },
        [],
        id="every table whose regex matches takes a value",
    ),  # fmt: skip
    pytest.param(
        {**ROUTED, "iceberg.tables": "shop.eu,shop.us"},
        ["eu-west", "apac", None],
        {"shop.eu": ["eu-west"]},
        ["apac", None],
        id="a value no regex matches is unrouted, and so is a null",
    ),
    pytest.param(
        {**ROUTED, "iceberg.tables": "shop.eu,shop.us"},
        ["xeu-west"],
        {},
        ["xeu-west"],
        id="a regex matches the whole value",
    ),
    pytest.param(
        {"iceberg.tables.dynamic-enabled": True, "iceberg.tables.route-field": "db"},
        ["Shop.Orders", "shop.orders", "shop.items", "", None],
        {"shop.orders": ["Shop.Orders", "shop.orders"], "shop.items": ["shop.items"]},
        [None, ""],
        id="dynamic: the value names the table, lower-cased; none for null or blank",
    ),
]


@pytest.mark.parametrize(("config", "values", "tables", "unrouted"), ROUTE_CASES)
def test_routed_tables(
    config: dict[str, Any], values: list[str | None], tables: dict[str, list[str]], unrouted: list[str | None]
) -> None:
    got_tables, got_unrouted = cfg.routed_tables(config, values)
    assert got_tables == tables
    assert sorted(got_unrouted, key=str) == sorted(unrouted, key=str)


def test_a_routed_config_validates_and_routes_only_when_asked() -> None:
    parsed = IcebergSinkConnector().parse(ROUTED)
    assert IcebergSinkConnector().validate(ROUTED) == []
    assert cfg.route_field(parsed) == "region"
    assert cfg.route_field({**parsed, "iceberg.tables": ["shop.eu"]}) == ""  # one table takes all
    assert cfg.route_field(IcebergSinkConnector().parse(ICEBERG_KAFKA_CONNECT)) == ""
