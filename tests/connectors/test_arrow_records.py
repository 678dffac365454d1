"""A sink batch's records made in Arrow (connectors.arrow_records, then the chain's Arrow stages)
are the records that were sent, schema and values, keys, tags and headers, and a record the Arrow
path cannot read is flagged.

Each case encodes records with a converter (the json converter with schemas on, as a source sends
them) and makes the messages' records as the sink's stages make them (connectors.sink_stages;
tests.connectors.decoding.records_of, the batch's schemas learnt first), over the reader's Arrow
batches in slices, through the chain's transforms (``apply_chain``).
"""

from __future__ import annotations

from datetime import UTC
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from sluice.connectors.barriers import BARRIER_HEADER
from sluice.connectors.config import ConfigError
from sluice.connectors.converters import OFFSET_PROPERTY, PARTITION_PROPERTY, TAGS_HEADER, JsonConverter
from sluice.connectors.records import (
    ERROR_COLUMN,
    VALUE_SCHEMA_HEADER,
    Record,
    good_arrow_records,
    make_records,
)
from sluice.connectors.transforms import build_chain, runs_in_arrow
from sluice.connectors.transforms.route import java_replacement
from tests.connectors.decoding import records_of
from tests.connectors.encoding import messages_of
from tests.connectors.test_arrow_envelopes import (
    VALUE_DDL,
    _value,
    arrow_type,
    decoded_rows,
    record_schema,
    sent_records,
)
from tests.connectors.test_converters import BORN, as_messages
from tests.connectors.test_extract_new_record_state import _records as change_events

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

UNWRAP = "io.debezium.transforms.ExtractNewRecordState"
#: the key of the change events (tests.connectors.test_extract_new_record_state), in envelopes
EVENT_KEY = pa.struct([("id", pa.int32())])


def _converter(key_envelopes: bool) -> JsonConverter:
    converter = JsonConverter(schemas_enable=True)
    converter.key_envelopes = key_envelopes
    return converter


def _messages(spark: SparkSession, records: DataFrame, key_envelopes: bool) -> DataFrame:
    return as_messages(spark, messages_of(_converter(key_envelopes), records))


def _typed_records(spark: SparkSession, count: int) -> DataFrame:
    from pyspark.sql.types import StructType

    values: list[Any] = [_value(i) for i in range(count)]
    values[3] = None  # a tombstone
    records = [
        Record(
            "p",
            i,
            v,
            topic="t",
            key=f'{{"id":{i}}}' if i != 1 else None,
            headers={"h": f"v{i}", "rocketmq.tags": "tag-a"} if i % 2 else {},
        )  # fmt: skip
        for i, v in enumerate(values)
    ]
    return make_records(spark, records, StructType.fromDDL(VALUE_DDL))


def _made(
    messages: DataFrame, chain: list[Any], key_envelopes: bool, *, barriers_once: bool = True
) -> pa.Table:
    """The good records of ``messages`` through ``chain`` as the sink's stages make them (from the
    reader's batches in slices of 3), in offset order; ``barriers_once`` as
    ``SinkRunner._barriers_once`` reads them."""
    batches = messages.toArrow().to_batches(max_chunksize=3)
    made = records_of(_converter(key_envelopes), batches, chain, barriers_once=barriers_once)
    return good_arrow_records(made, "test").sort_by("offset")


def test_records_of_every_type_with_keys_tags_and_headers_are_made_as_they_were_sent(
    spark: SparkSession,
) -> None:
    records = _typed_records(spark, 7)
    made = _made(_messages(spark, records, False), [], False)
    assert made.schema.equals(record_schema(arrow_type(VALUE_DDL)))
    rows = decoded_rows(made)
    assert rows == sent_records(records)
    assert rows[3]["value"] is None and rows[1]["key"] is None and rows[2]["key"] == '{"id":2}'
    headers = {"h": "v5", "sluice.partition": "p", "sluice.offset": "5", "rocketmq.tags": "tag-a"}
    assert rows[5]["headers"] == headers
    assert made.column("headers")[5].as_py()[-1] == ("rocketmq.tags", "tag-a")  # the tag appended


def test_keys_in_envelopes_of_a_scalar_type_are_made_as_they_were_sent(spark: SparkSession) -> None:
    """Arrow's JSON reader reads objects only: a text key's payload is read as the one field of an
    object wrapped around it (as a struct key's is, in the change events below)."""
    records = _typed_records(spark, 5)
    made = _made(_messages(spark, records, True), [], True)
    assert made.schema.equals(record_schema(arrow_type(VALUE_DDL)))
    assert decoded_rows(made) == sent_records(records)
    assert made.column("key").to_pylist() == ['{"id":0}', None, '{"id":2}', '{"id":3}', '{"id":4}']


ROW_A, ROW_B = {"id": 1, "name": "a"}, {"id": 1, "name": "b"}


@pytest.mark.parametrize(
    ("options", "values"),
    [
        ({}, [ROW_A, ROW_B]),  # Debezium's defaults: deletes and tombstones dropped
        # the CDC replica: deletes become tombstones
        ({"delete.handling.mode": "none"}, [ROW_A, ROW_B, None]),
        ({"delete.handling.mode": "none", "drop.tombstones": "false"}, [ROW_A, ROW_B, None, None]),
        ({"delete.tombstone.handling.mode": "tombstone"}, [ROW_A, ROW_B, None]),
        (
            {"delete.handling.mode": "rewrite", "add.fields": "op,source.table", "drop.tombstones": "false"},
            [
                {**ROW_A, "__op": "c", "__source_table": "t", "__deleted": "false"},
                {**ROW_B, "__op": "u", "__source_table": "t", "__deleted": "false"},
                {**ROW_B, "__op": "d", "__source_table": "t", "__deleted": "true"},
                None,
            ],
        ),
        (
            {"delete.tombstone.handling.mode": "rewrite-with-tombstone", "add.fields.prefix": "cdc_"},
            [
                {**ROW_A, "cdc_deleted": "false"},
                {**ROW_B, "cdc_deleted": "false"},
                {**ROW_B, "cdc_deleted": "true"},
                None,
            ],
        ),
    ],
)
def test_change_events_are_made_unwrapped_and_routed(
    spark: SparkSession, options: dict[str, str], values: list[dict[str, Any] | None]
) -> None:
    """The events sent (tests.connectors.test_extract_new_record_state: created, updated, deleted,
    the source's tombstone) as the unwrap makes them rows, each at its message's offset."""
    config = {
        "transforms": "u,r", "transforms.u.type": UNWRAP,
        **{f"transforms.u.{k}": v for k, v in options.items()},
        "transforms.r.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.r.regex": "p_(public)_(.*)", "transforms.r.replacement": "$2_of_$1",
    }  # fmt: skip
    made = _made(_messages(spark, change_events(spark), True), build_chain(config), True)
    names = next(v for v in values if v is not None)
    row_type = pa.struct([("id", pa.int32()), *((n, pa.string()) for n in list(names)[1:])])
    assert made.schema.equals(record_schema(row_type, EVENT_KEY))
    assert decoded_rows(made) == [
        {
            "topic": "t_of_public",
            "partition": "broker-a:1",
            "offset": 100 + i,
            "key": {"id": 1},
            "value": value,
            "headers": {PARTITION_PROPERTY: "public.t", OFFSET_PROPERTY: str(i)},
            "timestamp": BORN.replace(tzinfo=UTC),
        }
        for i, value in enumerate(values)
    ]


def test_tables_of_different_types_in_one_batch_carry_their_own_row_types(spark: SparkSession) -> None:
    """A CDC replica's sink over two tables' topics: merged value type, each record's own type in
    its header, rewritten by the unwrap to its own row type (the header jdbc-sink writes by)."""
    from pyspark.sql import functions as F

    events = change_events(spark)
    after = F.struct("value.after.id", F.lit("x").alias("extra"))
    other = events.withColumn("topic", F.lit("p_public_u")).withColumn("offset", F.col("offset") + 100)
    other = other.withColumn(
        "value",
        F.when(
            F.col("value").isNotNull(),
            F.struct(
                F.col("value.op").alias("op"), F.when(F.col("value.after").isNotNull(), after).alias("after")
            ),
        ),
    )
    converter = _converter(True)
    messages = as_messages(spark, messages_of(converter, events, other))
    made = _made(messages, build_chain({"transforms": "u", "transforms.u.type": UNWRAP}), True)
    merged = pa.struct([("id", pa.int32()), ("name", pa.string()), ("extra", pa.string())])
    assert made.schema.equals(record_schema(merged, EVENT_KEY))
    own = {  # each table's row type as it was sent: the events' ``after``
        topic: frame.schema["value"].dataType["after"].dataType.json()
        for topic, frame in (("p_public_t", events), ("p_public_u", other))
    }
    assert '"extra","nullable":false' in own["p_public_u"] and '"op"' not in own["p_public_u"]
    assert decoded_rows(made) == [
        {
            "topic": topic,
            "partition": "broker-a:1",
            "offset": offset,
            "key": {"id": 1},
            "value": {"id": 1, "name": name, "extra": extra},
            "headers": {
                PARTITION_PROPERTY: "public.t",
                OFFSET_PROPERTY: sent,
                VALUE_SCHEMA_HEADER: own[topic],
            },
            "timestamp": BORN.replace(tzinfo=UTC),
        }
        for topic, offset, sent, name, extra in [
            ("p_public_t", 100, "0", "a", None),
            ("p_public_t", 101, "1", "b", None),
            ("p_public_u", 104, "100", None, "x"),
            ("p_public_u", 105, "101", None, "x"),
        ]
    ]  # the deletes and tombstones dropped (the unwrap's defaults)


def test_barrier_copies_after_the_first_are_dropped(spark: SparkSession) -> None:
    from pyspark.sql.types import StructType

    labels = ["0/2 b1", "1/2 b1", None, "0/2 b2"]
    records = [
        Record("p", i, {"id": i}, topic="t", headers={} if label is None else {BARRIER_HEADER: label})
        for i, label in enumerate(labels)
    ]
    records_df = make_records(spark, records, StructType.fromDDL("id bigint"))
    messages = _messages(spark, records_df, False)
    sent = sent_records(records_df)
    assert [r["headers"].get(BARRIER_HEADER) for r in sent] == labels  # the label travels
    for once in (True, False):
        made = _made(messages, [], False, barriers_once=once)
        assert made.schema.equals(record_schema(arrow_type("id bigint")))
        assert decoded_rows(made) == [r for r in sent if not once or r["offset"] != 101]
        assert made.column("offset").to_pylist() == ([100, 102, 103] if once else [100, 101, 102, 103])


def test_a_chain_with_spark_sql_is_not_run_in_arrow() -> None:
    chain = build_chain({"transforms": "s", "transforms.s.type": "sql", "transforms.s.filter": "true"})
    assert not runs_in_arrow(chain)


def test_a_replacement_naming_a_group_the_regex_lacks_is_a_config_error() -> None:
    config = {"transforms": "r", "transforms.r.type": "RegexRouter", "transforms.r.regex": "p.*",
              "transforms.r.replacement": "$1"}  # fmt: skip
    with pytest.raises(ConfigError, match="names a group the regex does not have"):
        build_chain(config)


def test_a_value_that_is_not_a_change_event_beside_change_events_is_flagged() -> None:
    import pyarrow as pa

    (unwrap,) = build_chain({"transforms": "u", "transforms.u.type": UNWRAP})
    value = pa.array([{"op": "c", "after": {"id": 1}}, {"op": None, "after": {"id": 2}}])
    headers = pa.array([[], []], pa.map_(pa.string(), pa.string()))
    records = pa.table({"topic": ["t", "t"], "offset": [0, 1], "value": value, "headers": headers})
    out = unwrap.apply(records)
    assert out.column("value").to_pylist() == [{"id": 1}, {"id": 2}]
    assert out.column(ERROR_COLUMN).to_pylist()[0] is None
    assert "is not a change event" in out.column(ERROR_COLUMN).to_pylist()[1]


@pytest.mark.parametrize(
    ("java", "groups", "python"),
    [
        ("$1", 1, r"\g<1>"),
        ("$12", 1, r"\g<1>2"),  # Java reads $12 as group 1 then "2" when there is no group 12
        ("$12", 12, r"\g<12>"),
        ("${name}-x", 1, r"\g<name>-x"),
        (r"\$1 costs", 1, "$1 costs"),
        (r"a\\b", 0, r"a\\b"),
        ("$2", 1, None),
        ("$x", 1, None),
    ],
)
def test_java_replacements_read_as_python_expands_them(java: str, groups: int, python: str | None) -> None:
    assert java_replacement(java, groups) == python


@pytest.mark.parametrize("name", ["string", "bytes"])
def test_text_and_byte_bodies_make_their_records(spark: SparkSession, name: str) -> None:
    """The string and bytes converters' records (connectors.arrow_bodies): tombstones null, an
    empty body an empty value, an empty key or tag none, the tombstone mark dropped from the
    headers and the tag appended; read in slices."""
    from sluice.connectors.converters import TOMBSTONE_PROPERTY, converter_for
    from sluice.connectors.rocketmq.spark_reader import READ_SCHEMA

    bodies = [b"plain", "Grüße 東京 ✓".encode(), b"", None, b"last"]
    rows = [
        ("t", "broker-a:0", 0, 100 + i, f"k{i}" if i % 2 else "", "tag" if i == 1 else "",
         {"h": str(i), **({TOMBSTONE_PROPERTY: "true"} if body is None else {})}, BORN, BORN, body or b"")
        for i, body in enumerate(bodies)
    ]  # fmt: skip
    messages = spark.createDataFrame(rows, READ_SCHEMA)
    text = name == "string"
    made = good_arrow_records(
        records_of(converter_for({"value.converter": name}), messages.toArrow().to_batches(max_chunksize=2)),
        "test",
    )
    assert made.schema.equals(record_schema(pa.string() if text else pa.binary()))
    assert decoded_rows(made) == [
        {
            "topic": "t",
            "partition": "broker-a:0",
            "offset": 100 + i,
            "key": f"k{i}" if i % 2 else None,
            "value": None if body is None else body.decode() if text else body,
            "headers": {"h": str(i), **({TAGS_HEADER: "tag"} if i == 1 else {})},
            "timestamp": BORN.replace(tzinfo=UTC),
        }
        for i, body in enumerate(bodies)
    ]
    assert made.column("headers")[1].as_py() == [("h", "1"), (TAGS_HEADER, "tag")]


def test_a_body_the_string_converter_cannot_read_is_flagged(spark: SparkSession) -> None:
    from sluice.connectors.converters import StringConverter
    from tests.connectors.test_converters import raw_messages

    made = records_of(StringConverter(), raw_messages(spark, [b"fine", b"\xff\xfe"]))
    assert made.column(ERROR_COLUMN).to_pylist() == [None, "string converter: body is not UTF-8"]
    assert made.column("value").to_pylist() == ["fine", None]
