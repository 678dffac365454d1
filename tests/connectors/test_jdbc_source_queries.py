"""Table-driven tests of the JDBC source's pure parts: SQL per mode and dialect, type mapping,
topic names and config rules. No database here (tests/connectors/test_jdbc_source.py reads)."""

from __future__ import annotations

import pytest

from sluice.connectors.jdbc.config import config_problems, topic_for
from sluice.connectors.jdbc.queries import (
    Mode,
    SelectColumn,
    Source,
    latest_query,
    nth_position_query,
    range_query,
    select_list,
)
from sluice.connectors.jdbc.types import ColumnInfo, UnsupportedColumnType, map_column
from sluice.connectors.jdbc.urls import Dialect

MY, PG = Dialect.MYSQL, Dialect.POSTGRESQL
INC = Source(MY, Mode.INCREMENTING, table="shop.orders", incrementing="id")
TS = Source(PG, Mode.TIMESTAMP, table="orders", timestamps=("updated",), order_keys=("id",))
TS2 = Source(MY, Mode.TIMESTAMP, table="t", timestamps=("updated", "created"))
TSI = Source(PG, Mode.TIMESTAMP_INCREMENTING, table="t", incrementing="id", timestamps=("ts",))
Q = Source(MY, Mode.INCREMENTING, query="SELECT * FROM t WHERE s LIKE 'a%'", incrementing="id")
BULK = Source(PG, Mode.BULK, table="t", order_keys=("k1", "k2"))
COLS = [SelectColumn("id"), SelectColumn("d")]


@pytest.mark.parametrize(
    ("src", "start", "end", "sql", "params"),
    [
        (
            INC,
            (5,),
            (9,),
            "SELECT `id`, `d` FROM `shop`.`orders` WHERE `id` > %s AND `id` <= %s ORDER BY `id`",
            (5, 9),
        ),
        (
            TS,
            ("a",),
            ("b",),
            'SELECT "id", "d" FROM "orders" WHERE "updated" > %s AND "updated" <= %s '
            'ORDER BY "updated", "id"',
            ("a", "b"),
        ),
        (
            TS2,
            ("a",),
            ("b",),
            "SELECT `id`, `d` FROM `t` WHERE COALESCE(`updated`, `created`) > %s AND COALESCE(`updated`, "
            "`created`) <= %s ORDER BY COALESCE(`updated`, `created`)",
            ("a", "b"),
        ),
        (
            TSI,
            ("a", 1),
            ("b", 2),
            'SELECT "id", "d" FROM "t" WHERE ("ts" > %s OR ("ts" = %s AND "id" > %s)) AND ("ts" < %s OR '
            '("ts" = %s AND "id" <= %s)) ORDER BY "ts", "id"',
            ("a", "a", 1, "b", "b", 2),
        ),
        (
            Q,
            (0,),
            (3,),
            "SELECT sluice_q.`id`, sluice_q.`d` FROM (SELECT * FROM t WHERE s LIKE 'a%%') sluice_q "
            "WHERE `id` > %s AND `id` <= %s ORDER BY `id`",
            (0, 3),
        ),
        (BULK, None, None, 'SELECT "id", "d" FROM "t" ORDER BY "k1", "k2"', ()),
    ],
)
def test_range_query_reads_start_exclusive_end_inclusive(src, start, end, sql, params) -> None:
    got = range_query(src, COLS, start, end)
    assert (got.text, got.params) == (sql, params)


@pytest.mark.parametrize(
    ("src", "cap", "sql", "params"),
    [
        (INC, None, "SELECT MAX(`id`) FROM `shop`.`orders`", ()),
        (TS, "c", 'SELECT MAX("updated") FROM "orders" WHERE "updated" <= %s', ("c",)),
        (
            TSI,
            "c",
            'SELECT "ts", "id" FROM "t" WHERE "ts" <= %s ORDER BY "ts" DESC, "id" DESC LIMIT 1',
            ("c",),
        ),
    ],
)
def test_latest_query_caps_timestamps(src, cap, sql, params) -> None:
    got = latest_query(src, cap)
    assert (got.text, got.params) == (sql, params)


def test_bulk_has_no_latest_position() -> None:
    with pytest.raises(ValueError, match="bulk"):
        latest_query(BULK, None)


@pytest.mark.parametrize(
    ("src", "n", "tail"),
    [
        (INC, 100, "ORDER BY `id` LIMIT 1 OFFSET 99"),
        (TSI, 1, 'ORDER BY "ts", "id" LIMIT 1 OFFSET 0'),
    ],
)
def test_nth_position_is_limit_offset_over_the_key(src, n, tail) -> None:
    start, end = ((1,), (2,)) if len(src.position_exprs) == 1 else (("a", 1), ("b", 2))
    assert nth_position_query(src, start, end, n).text.endswith(tail)


def test_nth_position_needs_a_positive_n() -> None:
    with pytest.raises(ValueError):
        nth_position_query(INC, (1,), (2,), 0)


@pytest.mark.parametrize(
    ("dialect", "column", "expected"),
    [
        (MY, SelectColumn("t", as_text=True), "CAST(`t` AS CHAR) AS `t`"),
        (PG, SelectColumn("j", as_text=True), '"j"::text AS "j"'),
        (MY, SelectColumn("u", as_decimal="DECIMAL(20,0)"), "CAST(`u` AS DECIMAL(20,0)) AS `u`"),
        (MY, SelectColumn("we`ird"), "`we``ird`"),
        (PG, SelectColumn('we"ird'), '"we""ird"'),
    ],
)
def test_select_list_casts_and_quotes(dialect, column, expected) -> None:
    assert select_list(Source(dialect, Mode.BULK, table="t"), [column]) == expected


@pytest.mark.parametrize(
    ("dialect", "info", "ddl"),
    [
        (MY, ColumnInfo("c", "bigint", "bigint(20) unsigned"), "DECIMAL(20,0)"),
        (MY, ColumnInfo("c", "bigint", "bigint(20)"), "BIGINT"),
        (MY, ColumnInfo("c", "int", "int(10) unsigned"), "BIGINT"),
        (MY, ColumnInfo("c", "smallint", "smallint(5) unsigned"), "INT"),
        (MY, ColumnInfo("c", "tinyint", "tinyint(3) unsigned"), "SMALLINT"),
        (MY, ColumnInfo("c", "tinyint", "tinyint(1)"), "TINYINT"),
        (MY, ColumnInfo("c", "decimal", "decimal(30,10)", 30, 10), "DECIMAL(30,10)"),
        (MY, ColumnInfo("c", "timestamp", "timestamp(6)"), "TIMESTAMP"),
        (MY, ColumnInfo("c", "datetime", "datetime(3)"), "TIMESTAMP_NTZ"),
        (MY, ColumnInfo("c", "date", "date"), "DATE"),
        (MY, ColumnInfo("c", "time", "time"), "STRING"),
        (MY, ColumnInfo("c", "bit", "bit(1)", 1), "BOOLEAN"),
        (MY, ColumnInfo("c", "bit", "bit(8)", 8), "BINARY"),
        (MY, ColumnInfo("c", "varbinary", "varbinary(10)"), "BINARY"),
        (MY, ColumnInfo("c", "longtext", "longtext"), "STRING"),
        (MY, ColumnInfo("c", "year", "year(4)"), "SMALLINT"),
        (MY, ColumnInfo("c", "double", "double"), "DOUBLE"),
        (PG, ColumnInfo("c", "numeric", "numeric", 12, 3), "DECIMAL(12,3)"),
        (PG, ColumnInfo("c", "numeric", "numeric"), "STRING"),
        (PG, ColumnInfo("c", "timestamp with time zone", "timestamptz"), "TIMESTAMP"),
        (PG, ColumnInfo("c", "timestamp without time zone", "timestamp"), "TIMESTAMP_NTZ"),
        (PG, ColumnInfo("c", "jsonb", "jsonb"), "STRING"),
        (PG, ColumnInfo("c", "bytea", "bytea"), "BINARY"),
        (PG, ColumnInfo("c", "uuid", "uuid"), "STRING"),
        (PG, ColumnInfo("c", "USER-DEFINED", "mood"), "STRING"),
    ],
)
def test_column_types_map_faithfully(dialect, info, ddl) -> None:
    assert map_column(dialect, info, "connector 'c' table 't'").spark_ddl == ddl


@pytest.mark.parametrize(
    ("dialect", "info", "match"),
    [
        (MY, ColumnInfo("g", "geometry", "geometry"), "connector 'c' table 't' column 'g'.*geometry"),
        (MY, ColumnInfo("d", "decimal", "decimal(65,0)", 65, 0), "column 'd'.*precision 65"),
        (PG, ColumnInfo("a", "ARRAY", ""), "column 'a'.*unsupported column type"),
        (PG, ColumnInfo("p", "point", "point"), "column 'p'.*point"),
    ],
)
def test_unsupported_types_name_connector_table_and_column(dialect, info, match) -> None:
    with pytest.raises(UnsupportedColumnType, match=match):
        map_column(dialect, info, "connector 'c' table 't'")


@pytest.mark.parametrize(
    ("table", "prefix", "topic", "expected"),
    [
        ("orders", "mysql-", "", "mysql-orders"),
        ("shop.orders", "mysql-", "", "mysql-shop_orders"),
        ("query", "q-rows", "", "q-rows"),
        ("orders", "x-", "fixed", "fixed"),
    ],
)
def test_topic_names_have_no_dots(table, prefix, topic, expected) -> None:
    assert topic_for(table, prefix, topic) == expected


@pytest.mark.parametrize(
    ("raw", "fields"),
    [
        (
            {"mode": "incrementing", "table.whitelist": "t", "topic.prefix": "p-"},
            ["incrementing.column.name"],
        ),
        (
            {"mode": "timestamp+incrementing", "table.whitelist": "t", "topic.prefix": "p-"},
            ["incrementing.column.name", "timestamp.column.name"],
        ),
        ({"mode": "bulk", "query": "SELECT 1", "table.whitelist": "t", "topic.prefix": "p"}, ["query"]),
        ({"mode": "bulk", "query": "SELECT 1"}, ["topic.prefix"]),
        ({"mode": "bulk", "table.whitelist": "x" * 130, "topic.prefix": "p-"}, ["topic.prefix"]),
        ({"mode": "bulk", "table.whitelist": "shop.orders", "topic.prefix": "p-"}, []),
    ],
)
def test_config_rules(raw, fields) -> None:
    assert [e.field for e in config_problems(raw, "connector 'c'")] == fields


@pytest.mark.parametrize(
    ("value", "scale", "hex_bytes"),
    [  # java.math.BigInteger.toByteArray() of the unscaled value
        ("0", 0, "00"),
        ("-1", 0, "ff"),
        ("127", 0, "7f"),
        ("128", 0, "0080"),
        ("-128", 0, "80"),
        ("-129", 0, "ff7f"),
        ("-0.01", 2, "ff"),
        ("12345678.91", 2, "499602d3"),
        ("99999999999999999999999999999999999999", 0, "4b3b4ca85a86c47a098a223fffffffff"),
    ],
)
def test_connect_decimal_bytes_are_kafkas(value: str, scale: int, hex_bytes: str) -> None:
    import base64
    import json
    from decimal import Decimal

    import pyarrow as pa

    from sluice.connectors.arrow_messages import connect_payloads

    payload = connect_payloads(pa.array([Decimal(value)], pa.decimal128(38, scale))).to_pylist()[0]
    assert base64.b64decode(json.loads(payload)).hex() == hex_bytes


def test_connect_decimal_schema_both_ways() -> None:
    from pyspark.sql.types import DecimalType

    from sluice.connectors.connect_json import connect_schema, spark_type

    schema = connect_schema(DecimalType(20, 0), optional=False)
    assert schema == {
        "type": "bytes",
        "optional": False,
        "name": "org.apache.kafka.connect.data.Decimal",
        "version": 1,
        "parameters": {"scale": "0", "connect.decimal.precision": "20"},
    }
    assert spark_type(schema) == DecimalType(20, 0)
    kafka = {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "3"}}
    assert spark_type(kafka) == DecimalType(38, 3)  # Kafka often omits the precision
    with pytest.raises(ValueError, match="does not fit"):
        spark_type({**kafka, "parameters": {"scale": "2", "connect.decimal.precision": "65"}})
