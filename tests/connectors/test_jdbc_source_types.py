"""Every mapped type read from MariaDB and PostgreSQL and carried through the json converter with
``schemas.enable`` (Kafka Connect's envelope: Decimal as base64 unscaled bytes) comes back exactly:
decimal precision, unsigned widening, zoned timestamps, NULLs, binary, unicode beyond the BMP."""

from __future__ import annotations

import base64
import json
from datetime import UTC, date, datetime
from decimal import Context, Decimal

import pyarrow as pa
import pytest

from sluice.connectors.api import open_source_task
from sluice.connectors.converters import JsonConverter
from sluice.connectors.jdbc.records import RecordShape
from sluice.connectors.jdbc.source import JdbcSourceConnector
from sluice.connectors.model import PartitionRange
from sluice.connectors.records import ERROR_COLUMN
from tests.connectors.decoding import records_of
from tests.connectors.encoding import messages_of
from tests.connectors.jdbc_dbs import Db
from tests.connectors.test_converters import as_messages
from tests.connectors.test_jdbc_source_offsets import old_frame, spark_frame

pytestmark = pytest.mark.slow

MYSQL_TABLE = """CREATE TABLE items (
  id BIGINT UNSIGNED PRIMARY KEY, big DECIMAL(38,10), small DECIMAL(5,2), u INT UNSIGNED,
  ts TIMESTAMP(6) NULL, dt DATETIME(6), d DATE, b VARBINARY(8), s VARCHAR(20), j JSON, f DOUBLE,
  flag BIT(1), tm TIME)"""
PG_TABLE = """CREATE TABLE items (
  id BIGINT PRIMARY KEY, big NUMERIC(38,10), small NUMERIC(5,2), u BIGINT,
  ts TIMESTAMPTZ(6), dt TIMESTAMP(6), d DATE, b BYTEA, s VARCHAR(20), j JSONB, f DOUBLE PRECISION,
  flag BOOLEAN, tm TIME)"""
FULL = (
    18446744073709551615,
    Decimal("-1234567890123456789012345678.0123456789"),
    Decimal("-0.01"),
    4294967295,
    "2024-02-29 23:59:59.123456",
    "1999-12-31 12:00:00.456789",
    "2024-02-29",
    b"\x00\xff\x80",
    "😀 ü",
    '{"a": 1}',
    1.5,
    True,
    "25:00:01",
)
NULLS = (2,) + (None,) * 12


@pytest.fixture(params=["mysql", "postgresql"])
def db(request: pytest.FixtureRequest, stack_config: object) -> Db:  # stack_config: the lane
    return Db.of(request.getfixturevalue("mariadb_db" if request.param == "mysql" else "postgres_db"))


def test_types_round_trip_through_the_json_converter(spark, db: Db) -> None:
    mysql = db.dialect == "mysql"
    full = FULL if mysql else (9223372036854775807, *FULL[1:])
    if not mysql:
        full = (*full[:11], True, "01:00:01")
    db.run(MYSQL_TABLE if mysql else PG_TABLE)
    marks = ", ".join(["%s"] * 13)
    for row in (full, NULLS):
        db.run(f"INSERT INTO items VALUES ({marks})", params=row)
    cfg = {"connector.class": "jdbc-source", "name": "types", "connection.url": db.jdbc_url,
           "connection.user": db.user, "connection.password": db.password, "mode": "bulk",
           "table.whitelist": "items", "topic.prefix": "types-"}  # fmt: skip
    task = open_source_task(JdbcSourceConnector, cfg, 0)
    try:
        latest = task.latest_positions({})["items"]
        read = task.read([PartitionRange("items", task.earliest_positions()["items"], latest)])
        records = read.to_table()  # the splits read as their tasks read them
        converter = JsonConverter(schemas_enable=True)
        messages = messages_of(converter, records)
        bodies = {json.loads(b)["payload"]["s"]: json.loads(b) for b in messages.column("body").to_pylist()}
        envelope = bodies["😀 ü"]
        fields = {f["field"]: f for f in envelope["schema"]["fields"]}
        assert fields["big"]["name"] == "org.apache.kafka.connect.data.Decimal"
        assert fields["big"]["parameters"]["scale"] == "10"
        unscaled = int.from_bytes(base64.b64decode(envelope["payload"]["big"]), "big", signed=True)
        assert Decimal(unscaled).scaleb(-10, Context(prec=60)) == full[1]  # exact
        assert envelope["payload"]["small"] == "/w=="  # -1 as one byte, like BigInteger.toByteArray
        back = records_of(converter, as_messages(spark, messages))
        rows = {r["value"]["id"]: r["value"] for r in back.to_pylist()}
    finally:
        task.close()
    assert back.column(ERROR_COLUMN).to_pylist() == [None, None]
    got = rows[Decimal(full[0])] if mysql else rows[full[0]]
    assert got["big"] == full[1] and got["small"] == full[2]
    assert got["u"] == full[3]
    assert got["ts"] == datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=UTC)  # an instant
    assert got["dt"] == datetime(1999, 12, 31, 12, 0, 0, 456789)
    assert got["d"] == date(2024, 2, 29)
    assert got["b"] == b"\x00\xff\x80"
    assert got["s"] == "😀 ü"
    assert json.loads(got["j"]) == {"a": 1}
    assert got["f"] == 1.5 and got["flag"] is True
    assert got["tm"] == ("25:00:01" if mysql else "01:00:01")
    nulls = rows[Decimal(2)] if mysql else rows[2]
    assert [k for k, v in nulls.items() if v is not None] == ["id"]


@pytest.mark.parametrize("mode", ["bulk", "incrementing"])
def test_offsets_of_a_keyless_table_are_the_spark_expressions(spark, db: Db, mode: str) -> None:
    """Every mapped type as the drivers deliver it, in a table without a key: the offset hashes the
    row's JSON (and in incrementing mode on MySQL's ``BIGINT UNSIGNED``, a DECIMAL(20,0), the id
    too) exactly as the Spark expression of earlier releases (test_jdbc_source_offsets)."""
    mysql = db.dialect == "mysql"
    full = FULL if mysql else (9223372036854775807, *FULL[1:11], True, "01:00:01")
    db.run((MYSQL_TABLE if mysql else PG_TABLE).replace("PRIMARY KEY", "NOT NULL"))
    marks = ", ".join(["%s"] * 13)
    for row in (full, NULLS, (3, *full[1:])):
        db.run(f"INSERT INTO items VALUES ({marks})", params=row)
    cfg = {"connector.class": "jdbc-source", "name": "types", "connection.url": db.jdbc_url,
           "connection.user": db.user, "connection.password": db.password, "mode": mode,
           "incrementing.column.name": "id", "table.whitelist": "items"}  # fmt: skip
    task = open_source_task(JdbcSourceConnector, cfg, 0)
    try:
        latest = task.latest_positions({})["items"]
        records = task.read([PartitionRange("items", task.earliest_positions()["items"], latest)]).to_table()
        columns, _ = task.columns("items")
    finally:
        task.close()
    values = records.column("value").combine_chunks()
    rows = pa.RecordBatch.from_arrays(values.flatten(), names=[f.name for f in values.type])
    id_offset = mode == "incrementing" and not mysql  # PostgreSQL's BIGINT id is the offset itself
    shape = RecordShape("", "items", (), (), "id" if mode == "incrementing" else "", id_offset)
    frame = spark_frame(spark, rows, columns)
    offset, _, _ = old_frame(frame, shape)
    assert records.column("offset").to_pylist() == [r[0] for r in frame.select(offset).collect()]
