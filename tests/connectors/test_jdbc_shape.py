"""The JDBC sink's row shaping in Arrow (no JVM): columns, keys, tombstones, record order, and the
load form each dialect is given."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from sluice.connectors.jdbc.shape import KAFKA_FIELDS, KeySpec, KeySpecError, shape, wire
from sluice.connectors.jdbc.urls import Dialect
from sluice.connectors.jdbc.writes import OP_COLUMN, POSITION_COLUMNS

VALUE = pa.struct([("id", pa.int64()), ("name", pa.string()), ("amount", pa.decimal128(12, 2))])
HEADERS = pa.map_(pa.string(), pa.string())
TEXT = pa.string()


def records(
    rows: list[tuple[str, int, Any, Any]],
    value_type: pa.DataType = VALUE,
    key_type: pa.DataType = TEXT,
) -> pa.Table:
    """(partition, offset, key, value) rows of topic ``t``, as the runtime collects a batch."""
    return pa.table(
        {
            "topic": pa.array(["t"] * len(rows), pa.string()),
            "partition": pa.array([r[0] for r in rows], pa.string()),
            "offset": pa.array([r[1] for r in rows], pa.int64()),
            "key": pa.array([r[2] for r in rows], key_type),
            "value": pa.array([r[3] for r in rows], value_type),
            "headers": pa.array([[] for _ in rows], HEADERS),
            "timestamp": pa.array(
                [dt.datetime(2024, 1, 1, tzinfo=dt.UTC)] * len(rows), pa.timestamp("us", "UTC")
            ),
        }
    )


ONE = {"id": 1, "name": "a", "amount": Decimal("1.25")}
TWO = {"id": 2, "name": "b", "amount": Decimal("2.50")}


@pytest.mark.parametrize(
    ("spec", "rows", "want_columns", "want_rows", "want_pk"),
    [
        # record order (partition, offset), whatever order the batch came in; a tombstone skipped
        (
            KeySpec("record_value", ("id",), deletes=False),
            [("q:1", 0, None, TWO), ("q:0", 5, None, None), ("q:0", 3, None, ONE)],
            ["id", "name", "amount"],
            [(1, "a", Decimal("1.25"), "u"), (2, "b", Decimal("2.50"), "u")],
            ("id",),
        ),
        # delete.enabled: the tombstone stays, as a delete
        (
            KeySpec("record_value", ("id",), deletes=True),
            [("q:0", 0, None, ONE), ("q:0", 1, None, None)],
            ["id", "name", "amount"],
            [(1, "a", Decimal("1.25"), "u"), (None, None, None, "d")],
            ("id",),
        ),
        # pk.mode=kafka: the record's coordinates lead and are the key
        (
            KeySpec("kafka", (), deletes=False),
            [("q:0", 7, None, ONE)],
            [*KAFKA_FIELDS, "id", "name", "amount"],
            [("t", "q:0", 7, 1, "a", Decimal("1.25"), "u")],
            KAFKA_FIELDS,
        ),
        # pk.mode=record_key, a JSON object key: its field, typed like the value's, replaces it
        (
            KeySpec("record_key", ("id",), deletes=True),
            [("q:0", 0, '{"id": 9}', ONE), ("q:0", 1, '{"id": 1}', None)],
            ["id", "name", "amount"],
            [(9, "a", Decimal("1.25"), "u"), (1, None, None, "d")],
            ("id",),
        ),
        # a plain text key is the one key column itself
        (
            KeySpec("record_key", ("name",), deletes=False),
            [("q:0", 0, "k1", ONE)],
            ["name", "id", "amount"],
            [("k1", 1, Decimal("1.25"), "u")],
            ("name",),
        ),
    ],
)
def test_shape(
    spec: KeySpec,
    rows: list[tuple[str, int, Any, Any]],
    want_columns: list[str],
    want_rows: list[tuple[Any, ...]],
    want_pk: tuple[str, ...],
) -> None:
    shaped = shape(records(rows), spec)
    assert shaped.fields.names == want_columns
    assert shaped.pk == want_pk
    assert [f.name for f in shaped.fields if not f.nullable] == list(want_pk)
    got = shaped.rows.select([*want_columns, OP_COLUMN]).to_pylist()
    assert [tuple(r.values()) for r in got] == want_rows


def test_a_struct_key_gives_its_fields() -> None:
    key_type = pa.struct([("id", pa.int64()), ("region", pa.string())])
    table = records([("q:0", 0, {"id": 4, "region": "eu"}, ONE)], key_type=key_type)
    shaped = shape(table, KeySpec("record_key", (), deletes=False))
    assert shaped.pk == ("id", "region")
    assert shaped.rows.select(["id", "region", "name"]).to_pylist() == [
        {"id": 4, "region": "eu", "name": "a"}
    ]


def test_a_text_value_is_written_with_its_coordinates() -> None:
    table = records([("q:0", 3, "k", '{"a": 1}')], value_type=pa.string())
    shaped = shape(table, KeySpec("none", (), deletes=False))
    assert shaped.fields.names == ["topic", "partition", "offset", "key", "value", "timestamp"]
    assert shaped.rows.column("value").to_pylist() == ['{"a": 1}']
    assert shaped.rows.select(list(POSITION_COLUMNS)).to_pylist() == [
        {"__sluice_topic": "t", "__sluice_partition": "q:0", "__sluice_offset": 3}
    ]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            KeySpec("record_value", ("nope",), deletes=False),
            "pk.fields ['nope'] are not fields of the records",
        ),
        (KeySpec("record_key", (), deletes=False), "needs pk.fields naming the key column"),
    ],
)
def test_a_key_the_records_do_not_have_is_named(spec: KeySpec, message: str) -> None:
    with pytest.raises(KeySpecError, match=message.replace("[", r"\[").replace("]", r"\]")):
        shape(records([("q:0", 0, "k", ONE)]), spec)


MIXED = pa.struct(
    [
        ("ok", pa.bool_()),
        ("at", pa.timestamp("us")),
        ("raw", pa.binary()),
        ("tags", pa.list_(pa.string())),
        ("inner", pa.struct([("x", pa.decimal128(5, 1)), ("when", pa.date32())])),
    ]
)
MIXED_ROW = {
    "ok": True,
    "at": dt.datetime(2024, 2, 29, 12, 30, 1, 250000),
    "raw": b"\x00\xffA",
    "tags": ["a", "é"],
    "inner": {"x": Decimal("1.5"), "when": dt.date(2024, 1, 2)},
}


@pytest.mark.parametrize(
    ("dialect", "want"),
    [
        (
            Dialect.MYSQL,
            {
                "ok": "1",
                "at": "2024-02-29 12:30:01.250000",
                "raw": "00ff41",
                "tags": '["a","é"]',
                "inner": '{"x":1.5,"when":"2024-01-02"}',
            },
        ),
        (
            Dialect.POSTGRESQL,
            {
                "ok": True,
                "at": dt.datetime(2024, 2, 29, 12, 30, 1, 250000),
                "raw": "\\x00ff41",
                "tags": '["a","é"]',
                "inner": '{"x":1.5,"when":"2024-01-02"}',
            },
        ),
    ],
)
def test_wire_gives_each_dialect_its_load_form(dialect: Dialect, want: dict[str, Any]) -> None:
    shaped = shape(
        records([("q:0", 0, None, MIXED_ROW)], value_type=MIXED), KeySpec("none", (), deletes=False)
    )
    loaded = wire(dialect, shaped, list(want))
    assert loaded.select(list(want)).to_pylist() == [want]
    assert loaded.column_names[len(want) :] == [OP_COLUMN, *POSITION_COLUMNS]


def test_own_struct_narrows_a_merged_value_to_its_topics_fields() -> None:
    """Two topics' schemas merged into one struct for the batch: each table gets its own fields back,
    typed as its own schema says (instants too), and a null value stays null."""
    from pyspark.sql import types as T

    from sluice.connectors.spark_schema import own_struct

    merged = pa.struct([("id", pa.int64()), ("at", pa.timestamp("us", "UTC")), ("other", pa.string())])
    at = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    table = records([("q:0", 0, None, {"id": 1, "at": at, "other": "x"}), ("q:0", 1, None, None)], merged)
    own = T.StructType([T.StructField("id", T.IntegerType()), T.StructField("at", T.TimestampType())])
    narrowed = own_struct(table, "value", own.json()).column("value")
    assert narrowed.type == pa.struct([("id", pa.int32()), ("at", pa.timestamp("us", "UTC"))])
    assert narrowed.to_pylist() == [{"id": 1, "at": at}, None]


KEY_FORMS = [
    '{"id":9}',  # Spark's to_json of an integer key: the regular expression takes it
    '{"id":-12}',
    '{"id":0}',
    '{"id":007}',  # not JSON: kept whole, as the per-row parse keeps it
    '{"id": 9}',  # spaced: parsed per row
    '{"id":"9"}',
    '{"id":9.5}',
    '{"id":null}',
    '{"other":1}',
    '{"id":1,"id":2}',
    "[1]",
    "plain",
    None,
]


@pytest.mark.parametrize("fields", [("id",), ("id", "other")])
def test_a_text_key_gives_the_same_columns_by_expression_as_by_parse(
    fields: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys in every form, in one batch: the fast path for ``{"id":<integer>}`` and the JSON parse
    per row for the rest agree with parsing every row (the fast path switched off)."""
    import sluice.connectors.jdbc.shape as shape_module

    forms = [*KEY_FORMS, '{"id":3,"other":4}', '{"other":4,"id":3}']
    rows = [("q:0", i, k, {"id": i, "name": "n", "amount": Decimal("1.00")}) for i, k in enumerate(forms)]
    spec = KeySpec("record_key", fields, deletes=False)
    value_types = {"id": pa.int64(), "other": pa.string()}
    key = records(rows).column("key").combine_chunks()
    fast = shape_module._text_key_columns(key, spec, value_types)
    monkeypatch.setattr(shape_module, "_integer_fields", lambda key, names: [])
    slow = shape_module._text_key_columns(key, spec, value_types)
    assert [(n, a.to_pylist()) for n, a, _ in fast] == [(n, a.to_pylist()) for n, a, _ in slow]
    assert fast[0][1].to_pylist()[:3] == [9, -12, 0]


def test_own_schema_parts_split_a_batch_by_topic_with_its_own_fields() -> None:
    """What opensearch-sink writes per index: each topic's records narrowed to their own schema,
    in record order; a batch naming no own schema stays one part."""
    from pyspark.sql import types as T

    from sluice.connectors.converters import VALUE_SCHEMA_HEADER
    from sluice.connectors.spark_schema import own_schema_parts

    merged = pa.struct([("id", pa.int64()), ("name", pa.string()), ("sku", pa.string())])
    a = T.StructType([T.StructField("id", T.LongType()), T.StructField("name", T.StringType())]).json()
    b = T.StructType([T.StructField("id", T.LongType()), T.StructField("sku", T.StringType())]).json()
    rows = [
        ("q:0", 0, None, {"id": 1, "name": "x", "sku": None}),
        ("q:0", 1, None, {"id": 2, "name": None, "sku": "s"}),
        ("q:0", 2, None, {"id": 3, "name": "y", "sku": None}),
    ]
    table = records(rows, merged)
    assert own_schema_parts(table) == [table]
    table = table.set_column(0, "topic", pa.array(["a", "b", "a"]))
    headers = pa.array(
        [[(VALUE_SCHEMA_HEADER, a)], [(VALUE_SCHEMA_HEADER, b)], [(VALUE_SCHEMA_HEADER, a)]], HEADERS
    )
    table = table.set_column(table.schema.get_field_index("headers"), "headers", headers)
    parts = own_schema_parts(table)
    assert [p.column("value").to_pylist() for p in parts] == [
        [{"id": 1, "name": "x"}, {"id": 3, "name": "y"}],
        [{"id": 2, "sku": "s"}],
    ]
