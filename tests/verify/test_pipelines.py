"""A pipeline's tables followed from source to target (worker.verify.pipelines), table-driven."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.engine import make_url

from sluice.connectors.transforms import build_chain
from sluice.worker.verify.model import TablePair, VerifyError
from sluice.worker.verify.pipelines import PipelinePlan, PipelineSide, plan_pipeline

MARIADB = {"connection.url": "jdbc:mysql://127.0.0.1:13306/shop", "connection.user": "sluice",
           "connection.password": "pw"}  # fmt: skip
TABLES = {"orders": ["id", "item", "note"], "customers": ["id", "name"]}
COPIED = {"shop.orders": ["id", "item", "note"], "shop.customers": ["id", "name"], "other.t": ["id"]}


def side(plugin: str, name: str = "c", **config: Any) -> PipelineSide:
    config = {"name": name, **config}
    return PipelineSide(plugin, config, build_chain(config))


def sink(**config: Any) -> PipelineSide:
    return side(
        "jdbc-sink", "s", **{"connection.url": "jdbc:postgresql://127.0.0.1:15432/copy?user=u"}, **config
    )


@pytest.mark.parametrize(
    ("source", "target", "tables", "expected"),
    [
        # Confluent's JDBC source and sink: prefix + table, the topic as the table name
        (side("jdbc-source", **MARIADB, **{"table.whitelist": ["orders"], "topic.prefix": "m_"}),
         sink(topics=["m_orders"]), TABLES,
         ((TablePair("orders", "m_orders", columns={"id": "id", "item": "item", "note": "note"}),), ())),
        # every table, a router taking the prefix off, a rename and a drop on the sink, a schema
        (side("jdbc-source", **MARIADB, **{"topic.prefix": "m_"}),
         sink(**{"topics.regex": "m_.*", "schema": "copy", "transforms": "route,r",
                 "transforms.route.type": "RegexRouter", "transforms.route.regex": "m_(.*)",
                 "transforms.route.replacement": "$1", "transforms.r.type": "ReplaceField$Value",
                 "transforms.r.renames": "item:product", "transforms.r.exclude": "note"}),
         TABLES,
         ((TablePair("orders", "copy.orders", columns={"id": "id", "item": "product"}),
           TablePair("customers", "copy.customers", columns={"id": "id", "name": "name"})), ())),
        # a topic the sink does not read: named, not compared
        (side("jdbc-source", **MARIADB, **{"topic.prefix": "m_", "table.blacklist": ["customers"]}),
         sink(topics=["elsewhere"], **{"table.name.format": "t_${topic}"}), TABLES, ((), ("orders",))),
        # Debezium's MySQL source: <prefix>.<db>.<table> with '_', unwrapped with an added field
        (side("mysql-cdc", **{"database.hostname": "127.0.0.1", "database.port": 13306,
                              "database.user": "cdc", "database.password": "pw", "topic.prefix": "dbz",
                              "database.include.list": ["shop"], "table.exclude.list": ["shop.customers"]}),
         sink(**{"topics.regex": "dbz_shop_.*", "table.name.format": "public.${topic}",
                 "transforms": "unwrap", "transforms.unwrap.add.fields": "op",
                 "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState"}),
         COPIED,
         ((TablePair("shop.orders", "public.dbz_shop_orders",
                     columns={"id": "id", "item": "item", "note": "note"}),), ())),
    ],
)  # fmt: skip
def test_a_pipeline_is_followed_from_each_source_table_to_its_target(
    source: PipelineSide, target: PipelineSide, tables: dict[str, list[str]],
    expected: tuple[tuple[TablePair, ...], tuple[str, ...]],
) -> None:  # fmt: skip
    plan = plan_pipeline(source, target, tables)
    assert (plan.pairs, plan.unread) == expected


def test_urls_carry_each_sides_credentials() -> None:
    source = side("jdbc-source", **MARIADB, **{"table.whitelist": ["orders"]})
    plan = plan_pipeline(source, sink(topics=["orders"]), TABLES)
    assert plan == PipelinePlan(
        "mysql+pymysql://sluice:pw@127.0.0.1:13306/shop",
        "postgresql+psycopg://u@127.0.0.1:15432/copy",
        plan.pairs,
        topics=("orders",),
    )
    cdc = side("postgres-cdc", **{"database.hostname": "h", "database.port": 5432, "database.user": "u",
                                  "database.password": "p w@:/", "database.dbname": "shop",
                                  "topic.prefix": "pg"})  # fmt: skip
    url = make_url(plan_pipeline(cdc, sink(topics=[]), {"public.t": ["id"]}).source_url)
    assert (url.drivername, url.username, url.password, url.host, url.port, url.database) == (
        "postgresql+psycopg",
        "u",
        "p w@:/",
        "h",
        5432,
        "shop",
    )


@pytest.mark.parametrize(
    ("source", "target", "message"),
    [
        (side("jdbc-source", "q", **MARIADB, query="SELECT 1"), sink(topics=["x"]),
         "source connector 'q' reads a query, not tables"),
        (side("jdbc-source", **MARIADB, **{"table.whitelist": ["gone"]}), sink(topics=["gone"]),
         "source table 'gone' named by connector 'c' does not exist"),
        (side("jdbc-source", **MARIADB),
         sink(topics=["orders"], transforms="h",
              **{"transforms.h.type": "HoistField$Value", "transforms.h.field": "r"}),
         r"table 'orders': transform 'h' \(HoistField\$Value\): its effect on a record cannot be followed"),
        (side("file-source", "f"), sink(topics=["x"]),
         "connector 'f': sluice verify compares tables copied by jdbc-source, mysql-cdc, postgres-cdc"),
        (side("jdbc-source", **MARIADB), side("opensearch-sink", "o"),
         "connector 'o': .* not by opensearch-sink"),
    ],
)  # fmt: skip
def test_what_cannot_be_followed_is_named(source: PipelineSide, target: PipelineSide, message: str) -> None:
    with pytest.raises(VerifyError, match=message):
        plan_pipeline(source, target, TABLES)
