"""Change records in Arrow (connectors.cdc.envelope.change_table): the values, the truncate's
barrier header and the nullability of every envelope field — the JSON converter writes the Connect
schemas' ``optional`` flags from it, so the Spark type the runtime derives from the Arrow one must be
the one the envelope had when it was built in Spark (``change_record_schema.json``, recorded from
that code)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

from sluice.connectors.barriers import BARRIER_HEADER, BARRIER_MARK
from sluice.connectors.cdc.envelope import ChangeRecord, change_table, envelope, read_table
from sluice.connectors.cdc.mysql.changes import SOURCE_FIELDS
from sluice.connectors.jdbc.types import MappedColumn

COLUMNS = (
    MappedColumn("id", "bigint", "BIGINT", False),
    MappedColumn("price", "decimal(10,2)", "DECIMAL(10,2)", True),
    MappedColumn("made", "datetime", "TIMESTAMP_NTZ", True),
    MappedColumn("seen", "timestamp", "TIMESTAMP", True),
    MappedColumn("name", "text", "STRING", True),
)
SOURCE = {"version": "sluice-1", "connector": "mysql", "name": "shop", "ts_ms": 5, "db": "d", "table": "t"}
ROW = {
    "id": 1,
    "price": Decimal("1.50"),
    "made": datetime(2024, 1, 2, 3, 4, 5),
    "seen": datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
    "name": "a😀",
}
#: The record schema the Spark-built envelope had (``record_frame(...).schema.json()`` before #18).
SPARK_SCHEMA = Path(__file__).with_name("change_record_schema.json")


def _table() -> pa.Table:
    records = [
        ChangeRecord(0, {"id": 1}, envelope("c", None, ROW, SOURCE, 5), 5000),
        ChangeRecord(1, {"id": 1}, envelope("d", ROW, None, SOURCE, 6), 6000),
        ChangeRecord(2, {"id": 1}, None, 6000),  # the delete's tombstone
        ChangeRecord(3, None, envelope("t", None, None, SOURCE, 7), 7000),  # a truncate: no key
    ]
    return change_table(
        records,
        columns=COLUMNS,
        key_columns=["id"],
        source_fields=SOURCE_FIELDS,
        topic="shop_d_t",
        partition="d.t",
    )


def test_change_records_carry_the_envelope_key_and_truncate_barrier() -> None:
    rows = _table().to_pylist()
    assert [(r["topic"], r["partition"], r["offset"]) for r in rows] == [
        ("shop_d_t", "d.t", i) for i in range(4)
    ]
    assert [r["key"] for r in rows] == [{"id": 1}, {"id": 1}, {"id": 1}, None]
    create, delete, tombstone, truncate = (r["value"] for r in rows)
    assert create["after"] == ROW and create["before"] is None and create["op"] == "c"
    assert delete["before"] == ROW and delete["after"] is None and delete["ts_ms"] == 6
    assert create["source"] == {**{name: None for name, _ in SOURCE_FIELDS}, **SOURCE}
    assert tombstone is None
    assert truncate["op"] == "t" and truncate["before"] is None and truncate["after"] is None
    assert [r["headers"] for r in rows] == [[], [], [], [(BARRIER_HEADER, BARRIER_MARK)]]
    assert [r["timestamp"] for r in rows] == [
        datetime(1970, 1, 1, 0, 0, 0, us, tzinfo=UTC) for us in (5000, 6000, 6000, 7000)
    ]


def test_the_envelope_keeps_its_nullability() -> None:
    schema = _table().schema
    value = schema.field("value").type
    assert [(f.name, f.nullable) for f in value] == [
        ("before", True), ("after", True), ("source", False), ("op", False), ("ts_ms", True),
    ]  # fmt: skip
    source, after = value.field("source").type, value.field("after").type
    assert [f.name for f in source if not f.nullable] == ["connector", "name"]
    assert all(f.nullable for f in after)  # NOT NULL columns too, as the Spark-built envelope had them
    assert after.field("price").type == pa.decimal128(10, 2)
    assert after.field("made").type == pa.timestamp("us")
    assert after.field("seen").type == pa.timestamp("us", tz="UTC")
    assert schema.field("key").type == pa.struct([pa.field("id", pa.int64())])


def _expected_spark_schema() -> dict[str, Any]:
    """The recorded schema, but for ``topic`` and ``headers``: nullable now, as every source's
    record columns are (connectors.source_reads.record_arrow_schema); the Spark-built frame had them
    from literals. Nothing reads those two flags; the key's and value's are the Connect schemas'."""
    expected = json.loads(SPARK_SCHEMA.read_text())
    for field in expected["fields"]:
        if field["name"] in ("topic", "headers"):
            field["nullable"] = True
    return expected


def test_the_runtime_frame_has_the_spark_built_envelope_schema(spark: Any) -> None:
    from sluice.activities.spark_binding import spark_schema, table_frame

    table = _table()
    assert json.loads(spark_schema(table.schema).json()) == _expected_spark_schema()
    frame = table_frame(spark, table)
    assert json.loads(frame.schema.json()) == _expected_spark_schema()
    rows = frame.orderBy("offset").collect()
    assert [r["headers"] for r in rows] == [{}, {}, {}, {BARRIER_HEADER: BARRIER_MARK}]
    after = rows[0]["value"]["after"]
    assert (after["id"], after["price"], after["made"], after["name"]) == (
        1,
        ROW["price"],
        ROW["made"],
        "a😀",
    )


#: Rows of every Spark type a snapshot reads, with NULLs, edges and non-ASCII text.
READ_COLUMNS = (
    *COLUMNS,
    MappedColumn("small", "tinyint", "TINYINT", True),
    MappedColumn("ratio", "double", "DOUBLE", True),
    MappedColumn("flag", "bit(1)", "BOOLEAN", True),
    MappedColumn("day", "date", "DATE", True),
    MappedColumn("blob", "blob", "BINARY", True),
)
READ_ROWS = (
    [],
    [{**ROW, "small": -128, "ratio": -0.5, "flag": True, "day": datetime(2024, 2, 29).date(),
      "blob": b"\x00"}],
    [
        {c.name: None for c in READ_COLUMNS} | {"id": 2},
        {**ROW, "id": -(2**63), "price": Decimal("-99999999.99"), "name": "", "blob": b"", "flag": False,
         "small": 127, "ratio": 1e308, "day": datetime(1, 1, 1).date()},
        {**ROW, "id": 2**63 - 1, "name": "é\u0000\n\"'", "made": datetime(9999, 12, 31, 23, 59, 59, 999999),
         "small": 0, "ratio": float("-inf"), "flag": None, "day": None, "blob": bytes(range(256))},
    ],
)  # fmt: skip


def test_read_table_equals_the_change_table_of_read_envelopes() -> None:
    """``read_table`` builds a snapshot chunk's op ``r`` records column by column; the result must be
    the table ``change_table`` makes of one envelope per row (same values, types and nullability)."""
    source = {**SOURCE, "snapshot": "true"}
    for rows in READ_ROWS:
        offsets = [10 * i + 3 for i in range(len(rows))]
        built = read_table(
            [[r[c.name] for r in rows] for c in READ_COLUMNS],
            columns=READ_COLUMNS,
            key_columns=["id"],
            source=source,
            ts_ms=9,
            offsets=offsets,
            timestamp_us=9000,
            source_fields=SOURCE_FIELDS,
            topic="shop_d_t",
            partition="d.t",
        )
        records = [
            ChangeRecord(o, {"id": r["id"]}, envelope("r", None, r, source, 9), 9000)
            for o, r in zip(offsets, rows, strict=True)
        ]
        expected = change_table(
            records,
            columns=READ_COLUMNS,
            key_columns=["id"],
            source_fields=SOURCE_FIELDS,
            topic="shop_d_t",
            partition="d.t",
        )
        assert built.schema.equals(expected.schema), rows
        assert built.equals(expected), rows
