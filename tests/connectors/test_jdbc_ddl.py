"""``auto.create``/``auto.evolve`` DDL from the shaped rows' Arrow types: the column types earlier
releases chose through Spark's types, per dialect (no JVM)."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from sluice.connectors.jdbc.ddl import UnsupportedTypeError, add_columns_sql, create_table_sql
from sluice.connectors.jdbc.urls import Dialect

#: Arrow type: (PostgreSQL column, MariaDB column, MariaDB key column)
COLUMNS: list[tuple[pa.DataType, str, str, str]] = [
    (pa.string(), "text", "LONGTEXT", "VARCHAR(255)"),
    (pa.large_string(), "text", "LONGTEXT", "VARCHAR(255)"),
    (pa.binary(), "bytea", "LONGBLOB", "VARBINARY(255)"),
    (pa.large_binary(), "bytea", "LONGBLOB", "VARBINARY(255)"),
    (pa.bool_(), "boolean", "BOOLEAN", "BOOLEAN"),
    (pa.int8(), "smallint", "TINYINT", "TINYINT"),
    (pa.int16(), "smallint", "SMALLINT", "SMALLINT"),
    (pa.int32(), "integer", "INT", "INT"),
    (pa.int64(), "bigint", "BIGINT", "BIGINT"),
    (pa.float32(), "real", "FLOAT", "FLOAT"),
    (pa.float64(), "double precision", "DOUBLE", "DOUBLE"),
    (pa.date32(), "date", "DATE", "DATE"),
    (pa.timestamp("us", "UTC"), "timestamptz", "DATETIME(6)", "DATETIME(6)"),
    (pa.timestamp("us"), "timestamp", "DATETIME(6)", "DATETIME(6)"),
    (pa.decimal128(38, 10), "numeric(38,10)", "DECIMAL(38,10)", "DECIMAL(38,10)"),
    (pa.list_(pa.int32()), "jsonb", "JSON", "JSON"),
    (pa.map_(pa.string(), pa.int64()), "jsonb", "JSON", "JSON"),
    (pa.struct([("a", pa.int32())]), "jsonb", "JSON", "JSON"),
]


@pytest.mark.parametrize(("kind", "pg", "my", "my_key"), COLUMNS, ids=[str(c[0]) for c in COLUMNS])
def test_column_types(kind: pa.DataType, pg: str, my: str, my_key: str) -> None:
    fields = [pa.field("c", kind), pa.field("n", pa.int32())]
    assert create_table_sql(Dialect.POSTGRESQL, "s", "t", fields, ["c"], "o") == (
        f'CREATE TABLE IF NOT EXISTS "s"."t" ("c" {pg} NOT NULL, "n" integer NULL, PRIMARY KEY ("c"))'
    )
    assert create_table_sql(Dialect.MYSQL, "", "t", fields, [], "o") == (
        f"CREATE TABLE IF NOT EXISTS `t` (`c` {my} NULL, `n` INT NULL)"
    )
    assert create_table_sql(Dialect.MYSQL, "s", "t", fields[:1], ["c"], "o") == (
        f"CREATE TABLE IF NOT EXISTS `s`.`t` (`c` {my_key} NOT NULL, PRIMARY KEY (`c`))"
    )
    assert add_columns_sql(Dialect.POSTGRESQL, "s", "t", fields[:1], "o") == [
        f'ALTER TABLE "s"."t" ADD COLUMN "c" {pg} NULL'
    ]


@pytest.mark.parametrize("kind", [pa.null(), pa.time64("us"), pa.uint64()], ids=str)
def test_a_type_without_a_column_names_the_field(kind: pa.DataType) -> None:
    message = f"o: field 'c': no postgresql column type for Arrow type {kind}"
    with pytest.raises(UnsupportedTypeError, match=f"^{re.escape(message)}$"):
        create_table_sql(Dialect.POSTGRESQL, "s", "t", [pa.field("c", kind)], [], "o")


def test_a_key_that_is_not_a_field_is_refused() -> None:
    with pytest.raises(ValueError, match=r"key fields \['k'\] are not fields of the records \['c'\]"):
        create_table_sql(Dialect.POSTGRESQL, "s", "t", [pa.field("c", pa.int32())], ["k"], "o")
