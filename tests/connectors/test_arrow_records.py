"""A sink batch's records made in Arrow (connectors.arrow_records, then the chain's Arrow stages)
equal the records the sink's Spark job collects for the same messages, schema and values, and a
record the Arrow path cannot read is flagged as Spark's flags it.

Each case encodes records with the json converter (schemas on, as a source sends them), lets a
converter meet their schemas in a searched batch, then makes the same messages' records both ways:
Spark's ``to_records`` through ``chain_frame`` and ``batch_table``, as ``SinkRunner._write_strict``
collects them, and ``arrow_records`` over the reader's Arrow batches through ``apply_chain``, as
the sink's stages make them (connectors.sink_stages).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from sluice.activities.spark_binding import batch_table, chain_frame
from sluice.connectors.barriers import BARRIER_HEADER
from sluice.connectors.config import ConfigError
from sluice.connectors.converters import JsonConverter
from sluice.connectors.records import ERROR_COLUMN, Record, good_arrow_records, make_records
from sluice.connectors.transforms import apply_chain, build_chain, runs_in_arrow, value_read
from sluice.connectors.transforms.route import java_replacement
from tests.connectors.test_arrow_envelopes import VALUE_DDL, _value
from tests.connectors.test_converters import as_messages
from tests.connectors.test_extract_new_record_state import _records as change_events

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

UNWRAP = "io.debezium.transforms.ExtractNewRecordState"


def _converter(key_envelopes: bool) -> JsonConverter:
    converter = JsonConverter(schemas_enable=True)
    converter.key_envelopes = key_envelopes
    return converter


def _messages(spark: SparkSession, records: DataFrame, key_envelopes: bool) -> DataFrame:
    return as_messages(spark, _converter(key_envelopes).to_messages(records))


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


def _met(messages: DataFrame, chain: list[Any], key_envelopes: bool) -> JsonConverter:
    converter = _converter(key_envelopes)
    converter.to_records(messages, value_read(chain)).collect()  # a searched batch: the schemas are met
    return converter


def _by_arrow(
    converter: JsonConverter, messages: DataFrame, chain: list[Any], barriers_once: bool
) -> pa.Table:
    """As the sink's stages make them (connectors.sink_stages)."""
    plan = converter.arrow_records(value_read(chain))
    assert plan is not None
    records = plan.records(messages.toArrow().to_batches(max_chunksize=3), barriers_once=barriers_once)
    assert records is not None
    return good_arrow_records(apply_chain(chain, records), "test").sort_by("offset")


def _both_ways(
    messages: DataFrame, chain: list[Any], key_envelopes: bool, *, barriers_once: bool = True
) -> tuple[pa.Table, pa.Table]:
    """The records of ``messages`` through ``chain``, by Spark and in Arrow, in offset order."""
    converter = _met(messages, chain, key_envelopes)
    read = messages
    if barriers_once:  # as SinkRunner._barriers_once reads them
        label = messages["properties"][BARRIER_HEADER]
        read = messages.where(label.isNull() | label.startswith("0/"))
    decoded = converter.to_records(read, value_read(chain))
    collected = batch_table(chain_frame(chain, decoded))
    by_spark = good_arrow_records(collected, "test")  # as the runner checks both before writing
    return by_spark.sort_by("offset"), _by_arrow(converter, messages, chain, barriers_once)


def _assert_equal(by_spark: pa.Table, by_arrow: pa.Table) -> None:
    differ = [(a, b) for a, b in zip(by_arrow.schema, by_spark.schema, strict=True) if not a.equals(b)]
    assert not differ
    assert by_arrow.to_pylist() == by_spark.to_pylist()


def test_records_of_every_type_with_keys_tags_and_headers_equal_sparks(spark: SparkSession) -> None:
    by_spark, by_arrow = _both_ways(_messages(spark, _typed_records(spark, 7), False), [], False)
    _assert_equal(by_spark, by_arrow)
    rows = by_arrow.to_pylist()
    assert rows[3]["value"] is None and rows[1]["key"] is None and rows[2]["key"] == '{"id":2}'
    headers = {"h": "v5", "sluice.partition": "p", "sluice.offset": "5", "rocketmq.tags": "tag-a"}
    assert dict(rows[5]["headers"]) == headers and rows[5]["headers"][-1] == ("rocketmq.tags", "tag-a")


def test_keys_in_envelopes_of_a_scalar_type_equal_sparks(spark: SparkSession) -> None:
    """Arrow's JSON reader reads objects only: a text key's payload is read as the one field of an
    object wrapped around it (a struct key's, in the change events below, as it is)."""
    by_spark, by_arrow = _both_ways(_messages(spark, _typed_records(spark, 5), True), [], True)
    _assert_equal(by_spark, by_arrow)
    assert by_arrow.column("key").to_pylist()[2] == '{"id":2}'


@pytest.mark.parametrize(
    "options",
    [
        {},  # Debezium's defaults: deletes and tombstones dropped
        {"delete.handling.mode": "none"},  # the CDC replica: deletes become tombstones
        {"delete.handling.mode": "none", "drop.tombstones": "false"},
        {"delete.tombstone.handling.mode": "tombstone"},
        {"delete.handling.mode": "rewrite", "add.fields": "op,source.table", "drop.tombstones": "false"},
        {"delete.tombstone.handling.mode": "rewrite-with-tombstone", "add.fields.prefix": "cdc_"},
    ],
)
def test_change_events_unwrapped_and_routed_equal_sparks(
    spark: SparkSession, options: dict[str, str]
) -> None:
    config = {
        "transforms": "u,r", "transforms.u.type": UNWRAP,
        **{f"transforms.u.{k}": v for k, v in options.items()},
        "transforms.r.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.r.regex": "p_(public)_(.*)", "transforms.r.replacement": "$2_of_$1",
    }  # fmt: skip
    chain = build_chain(config)
    by_spark, by_arrow = _both_ways(_messages(spark, change_events(spark), True), chain, True)
    _assert_equal(by_spark, by_arrow)
    assert set(by_arrow.column("topic").to_pylist()) == {"t_of_public"}


def test_tables_of_different_types_in_one_batch_carry_their_own_row_types_as_sparks_do(
    spark: SparkSession,
) -> None:
    """A CDC replica's sink over two tables' topics: merged value type, each record's own type in
    its header, rewritten by the unwrap to its own row type (the header jdbc-sink writes by)."""
    from pyspark.sql import functions as F

    from sluice.connectors.converters import VALUE_SCHEMA_HEADER

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
    messages = as_messages(spark, converter.to_messages(events).unionByName(converter.to_messages(other)))
    chain = build_chain({"transforms": "u", "transforms.u.type": UNWRAP})
    by_spark, by_arrow = _both_ways(messages, chain, True)
    _assert_equal(by_spark, by_arrow)
    own = {r["topic"]: dict(r["headers"]).get(VALUE_SCHEMA_HEADER) for r in by_arrow.to_pylist()}
    assert (
        own["p_public_u"] is not None and '"extra"' in own["p_public_u"] and '"op"' not in own["p_public_u"]
    )


def test_barrier_copies_after_the_first_are_dropped_as_spark_drops_them(spark: SparkSession) -> None:
    from pyspark.sql.types import StructType

    labels = ["0/2 b1", "1/2 b1", None, "0/2 b2"]
    records = [
        Record("p", i, {"id": i}, topic="t", headers={} if label is None else {BARRIER_HEADER: label})
        for i, label in enumerate(labels)
    ]
    messages = _messages(spark, make_records(spark, records, StructType.fromDDL("id bigint")), False)
    for once in (True, False):
        by_spark, by_arrow = _both_ways(messages, [], False, barriers_once=once)
        _assert_equal(by_spark, by_arrow)
        assert by_arrow.column("offset").to_pylist() == ([100, 102, 103] if once else [100, 101, 102, 103])


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
def test_text_and_byte_bodies_make_the_records_spark_makes(spark: SparkSession, name: str) -> None:
    """The string and bytes converters' records (connectors.arrow_bodies): tombstones null, an
    empty body an empty value, keys, tags and headers as Spark makes them; read in slices."""
    from sluice.connectors.converters import TOMBSTONE_PROPERTY, converter_for
    from sluice.connectors.rocketmq.spark_reader import READ_SCHEMA
    from tests.connectors.test_converters import BORN

    bodies = [b"plain", "Grüße 東京 ✓".encode(), b"", None, b"last"]
    rows = [
        ("t", "broker-a:0", 0, 100 + i, f"k{i}" if i % 2 else "", "tag" if i == 1 else "",
         {"h": str(i), **({TOMBSTONE_PROPERTY: "true"} if body is None else {})}, BORN, BORN, body or b"")
        for i, body in enumerate(bodies)
    ]  # fmt: skip
    messages = spark.createDataFrame(rows, READ_SCHEMA)
    converter = converter_for({"value.converter": name})
    by_spark = good_arrow_records(batch_table(converter.to_records(messages)), "test").sort_by("offset")
    plan = converter.arrow_records()
    assert plan is not None
    made = plan.records(messages.toArrow().to_batches(max_chunksize=2), barriers_once=False)
    assert made is not None
    by_arrow = good_arrow_records(made, "test")
    _assert_equal(by_spark, by_arrow)
    values = by_arrow.column("value").to_pylist()
    assert values[3] is None and values[2] in ("", b"") and values[1] in (bodies[1], bodies[1].decode())


def test_a_body_the_string_converter_cannot_read_is_flagged_as_sparks_decode_flags_it(
    spark: SparkSession,
) -> None:
    from sluice.connectors.converters import StringConverter
    from tests.connectors.test_converters import raw_messages

    messages = raw_messages(spark, [b"fine", b"\xff\xfe"])
    plan = StringConverter().arrow_records()
    assert plan is not None
    by_arrow = plan.records(messages.toArrow().to_batches(), barriers_once=False)
    assert by_arrow is not None
    by_spark = batch_table(StringConverter().to_records(messages)).sort_by("offset")
    assert by_arrow.column(ERROR_COLUMN).to_pylist() == by_spark.column(ERROR_COLUMN).to_pylist()
    assert by_arrow.column(ERROR_COLUMN).to_pylist() == [None, "string converter: body is not UTF-8"]
    assert by_arrow.column("value").to_pylist() == ["fine", None] == by_spark.column("value").to_pylist()
