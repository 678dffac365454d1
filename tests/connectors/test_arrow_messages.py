"""Messages made in Arrow (connectors.arrow_messages) equal what Spark's ``to_messages`` makes of the
same records, column for column and byte for byte, or the converter declines to plan an encoder.

Each case builds a batch of records as a source does (an Arrow table of the record columns), makes
its messages both ways, the Spark way from the frame the runner would build
(``spark_binding.table_frame``), and compares every message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from sluice.activities.spark_binding import table_frame
from sluice.connectors.arrow_messages import MESSAGE_SCHEMA, connect_payloads
from sluice.connectors.barriers import BARRIER_HEADER
from sluice.connectors.converters import ERROR_COLUMN, JsonConverter, converter_for
from sluice.connectors.records import Record
from sluice.connectors.source_reads import record_table, records_table
from tests.connectors.test_arrow_envelopes import VALUE_DDL, _value

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

JSON_SCHEMAS = {"value.converter": "json", "value.converter.schemas.enable": "true"}


def _arrow_type(ddl: str) -> pa.DataType:
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import StructType

    return to_arrow_type(StructType.fromDDL(ddl), prefers_large_types=False)


def _typed_values(count: int) -> list[Any]:
    values: list[Any] = [_value(i) for i in range(count)]
    values[2] = {**{k: None for k in values[0]}, "id": 2}  # every field null but the key
    values[3] = None  # a tombstone
    return values


def _records(
    key_ddl: str | None, keys: list[Any] | None, headers: list[dict[str, str]] | None = None
) -> pa.Table:
    import pyarrow as pa

    values = _typed_values(8)
    records = [
        Record("db.t", 100 + i, v, topic="t" if i % 2 else None, key=keys[i] if keys else None,
               headers=headers[i] if headers else {})
        for i, v in enumerate(values)
    ]  # fmt: skip
    key_type = (
        pa.null() if key_ddl is None else (pa.string() if key_ddl == "string" else _arrow_type(key_ddl))
    )
    return records_table(records, _arrow_type(VALUE_DDL), key_type)


def _spark_messages(
    spark: SparkSession, converter: Any, records: pa.Table, extra: dict[str, str]
) -> pa.Table:
    messages = converter.to_messages(table_frame(spark, records), extra or None)
    table = messages.drop(ERROR_COLUMN).toArrow()
    return table.select(MESSAGE_SCHEMA.names)


STRUCT_KEYS = [{"id": i, "region": None if i % 3 else "eu"} for i in range(8)]
HEADERS = [
    {},
    {"rocketmq.tags": "orders"},
    {"sluice.value.schema": "x", "app": "a", BARRIER_HEADER: "0/1"},
    {"a": "1", "b": "2", "rocketmq.tags": "t2"},
    {},
    {"sluice.tombstone": "true"},
    {"x": "ü ✓"},
    {},
]

CASES = {
    "string keys, no headers": (JSON_SCHEMAS, "string", [f'{{"id":{i}}}' for i in range(8)], None, {}),
    "no keys, headers, tags and a batch reference": (
        JSON_SCHEMAS,
        None,
        None,
        HEADERS,
        {"sluice.batch": "c/0/7"},
    ),
    "struct keys as JSON": (
        {**JSON_SCHEMAS, "key.converter": "json", "key.converter.schemas.enable": "false"},
        "id bigint, region string",
        STRUCT_KEYS,
        HEADERS,
        {},
    ),
    "struct keys as envelopes": (
        {**JSON_SCHEMAS, "key.converter": "json", "key.converter.schemas.enable": "true"},
        "id bigint, region string",
        STRUCT_KEYS,
        None,
        {"sluice.batch": "c/0/8"},
    ),
}


@pytest.mark.parametrize("config, key_ddl, keys, headers, extra", CASES.values(), ids=list(CASES))
def test_arrow_messages_equal_sparks(
    spark: SparkSession, config: dict[str, str], key_ddl: str | None, keys: Any, headers: Any, extra: Any
) -> None:
    converter = converter_for(config)
    records = _records(key_ddl, keys, headers)
    encoder = converter.arrow_encoder(records.schema)
    assert encoder is not None
    arrow = encoder.encode(records, extra)
    expected = _spark_messages(spark, converter, records, extra)
    assert arrow.schema.names == expected.schema.names
    for name in MESSAGE_SCHEMA.names:
        assert arrow.column(name).to_pylist() == expected.column(name).to_pylist(), name


OWN_BYTES = {
    "the string converter, text lines": ({"value.converter": "string"}, "string"),
    "the string converter, binary values": ({"value.converter": "string"}, "binary"),
    "the bytes converter, text lines": ({"value.converter": "bytes"}, "string"),
    "the bytes converter, binary values": ({"value.converter": "bytes"}, "binary"),
}


@pytest.mark.parametrize("config, value_type", OWN_BYTES.values(), ids=list(OWN_BYTES))
def test_bodies_of_a_values_own_bytes_equal_sparks(
    spark: SparkSession, config: dict[str, str], value_type: str
) -> None:
    """A file source's lines: the body is the text's UTF-8 (or the binary value), a null value a
    tombstone, with string keys and headers as in the envelope cases."""
    import pyarrow as pa

    lines = ["0000000001 plain", "ü ✓ non-ASCII", "", None, "x" * 300, "tab\tand\\", "7", "last"]
    values = [None if v is None else (v.encode() if value_type == "binary" else v) for v in lines]
    records = [
        Record("/data/in.txt", 100 * i, v, key=None if i % 3 else f"k{i}", headers=HEADERS[i])
        for i, v in enumerate(values)
    ]
    table = records_table(records, pa.binary() if value_type == "binary" else pa.string(), pa.string())
    converter = converter_for(config)
    encoder = converter.arrow_encoder(table.schema)
    assert encoder is not None and encoder.value_head is None
    arrow = encoder.encode(table, {"sluice.batch": "c/0/9"})
    expected = _spark_messages(spark, converter, table, {"sluice.batch": "c/0/9"})
    for name in MESSAGE_SCHEMA.names:
        assert arrow.column(name).to_pylist() == expected.column(name).to_pylist(), name
    assert arrow.column("body").to_pylist()[:3] == [b"0000000001 plain", "ü ✓ non-ASCII".encode(), b""]


def test_payloads_of_every_type_equal_sparks_json(spark: SparkSession) -> None:
    """Each field on its own, so a difference names its type."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    from sluice.connectors.connect_json import json_text

    values = pa.array(_typed_values(8), _arrow_type(VALUE_DDL))
    frame = table_frame(spark, pa.table({"v": values}))
    for name, child in zip(frame.schema["v"].dataType.names, values.flatten(), strict=True):
        field = frame.schema["v"].dataType[name]
        expected = frame.select(json_text(F.col("v")[name], field.dataType).alias("j")).toArrow().column("j")
        arrow = connect_payloads(child)
        assert arrow.to_pylist() == expected.to_pylist(), name


DECLINES = {
    "schemas off": ({"value.converter": "json"}, "string"),
    "a declared value schema": ({**JSON_SCHEMAS, "value.converter.schema": "id bigint"}, "string"),
    "a scalar key": (JSON_SCHEMAS, "bigint"),
    "the string converter, a struct value": ({"value.converter": "string"}, "string"),
    "the bytes converter, a struct value": ({"value.converter": "bytes"}, "string"),
}


@pytest.mark.parametrize("config, key", DECLINES.values(), ids=list(DECLINES))
def test_what_arrow_does_not_encode_is_left_to_spark(config: dict[str, str], key: str) -> None:
    import pyarrow as pa

    key_type = pa.string() if key == "string" else pa.int64()
    records = record_table(
        "p", [1], [{"id": 1}], value_type=pa.struct([("id", pa.int64())]), keys=[None], key_type=key_type
    )
    assert converter_for(config).arrow_encoder(records.schema) is None


def test_records_the_source_could_not_decode_are_left_to_spark() -> None:
    import pyarrow as pa

    records = record_table("p", [1, 2], ["{}", None], errors=[None, "not UTF-8"], raw=[None, b"\xff"])
    assert JsonConverter(schemas_enable=True).arrow_encoder(records.schema) is None
    assert pa.types.is_string(records.schema.field("value").type)


def _messages_table(rows: list[dict[str, Any]]) -> pa.Table:
    import pyarrow as pa

    full = [
        {"topic": None, "body": b"{}", "keys": None, "tags": None, "partition": "db.t", "offset": i, **row}
        for i, row in enumerate(rows)
    ]
    for row in full:
        row["properties"] = list(row.get("properties", {}).items())
    return pa.Table.from_pylist(full, schema=MESSAGE_SCHEMA)


def test_sharding_in_arrow_equals_sparks(spark: SparkSession) -> None:
    """Keyed messages by the crc32 of their key, keyless ones by their partition's, and a barrier to
    every queue, each copy labelled, in the row's place."""
    from sluice.activities.source_runner import _shard_columns
    from sluice.connectors.arrow_messages import sharded

    queues = ("broker-a:0", "broker-a:1", "broker-a:2")
    messages = _messages_table(
        [
            {"keys": '{"id":1}', "properties": {"sluice.offset": "0"}},
            {"keys": "Grüße ✓", "tags": "t"},
            {"partition": "db.other", "properties": {"app": "x"}},
            {"keys": '{"id":1}', "properties": {BARRIER_HEADER: "true", "sluice.offset": "3"}},
            {"keys": '{"id":42}'},
        ]
    )
    queue, properties = _shard_columns(queues)
    frame = table_frame(spark, messages)
    expected = frame.withColumn("queue", queue).withColumn("properties", properties).toArrow()
    arrow = sharded(messages, queues)
    assert arrow.column("queue").to_pylist() == expected.column("queue").to_pylist()
    assert arrow.column("properties").to_pylist() == expected.column("properties").to_pylist()
    assert arrow.column("offset").to_pylist() == [0, 1, 2, 3, 3, 3, 4]


def test_an_empty_read_makes_no_messages_and_shards_none(spark: SparkSession) -> None:
    """A snapshot chunk or a log range can hold no rows; its job's task gets a table of no chunks."""
    import pyarrow as pa

    from sluice.connectors.arrow_messages import sharded

    records = _records("string", [f"{i}" for i in range(8)], None).slice(0, 0)
    encoder = converter_for(JSON_SCHEMAS).arrow_encoder(records.schema)
    assert encoder is not None
    assert encoder.encode(records).num_rows == 0
    no_chunks = pa.Table.from_batches([], schema=MESSAGE_SCHEMA)
    assert sharded(no_chunks, ("broker-a:0",)).column("queue").to_pylist() == []


def test_the_size_check_in_arrow_draws_the_line_where_sparks_does(spark: SparkSession) -> None:
    import pyarrow as pa
    from pyspark.sql import functions as F

    from sluice.connectors.rocketmq.limits import (
        MAX_MESSAGE_BYTES,
        properties_size,
        size_problem,
        size_problem_in_arrow,
        stored_size,
    )

    row = {"topic": "orders", "keys": "k1", "tags": "t", "properties": {"sluice.partition": "p", "a": "ü"}}
    stamped = 40

    def stored(table: pa.Table) -> int:
        frame = table_frame(spark, table)
        props = properties_size(F.col("keys"), F.col("tags"), F.col("properties"), stamped)
        return int(frame.select(stored_size(F.col("body"), props, F.col("topic"))).first()[0])

    base = stored(_messages_table([{**row, "body": b""}]))
    at_limit = _messages_table([{**row, "body": b"x" * (MAX_MESSAGE_BYTES - base)}])
    over = _messages_table([{**row, "body": b"x" * (MAX_MESSAGE_BYTES - base + 1)}])
    assert stored(at_limit) == MAX_MESSAGE_BYTES
    assert size_problem_in_arrow(at_limit, stamped) is None
    problem = (
        table_frame(spark, over)
        .select(
            size_problem(
                F.col("body"), F.col("keys"), F.col("tags"), F.col("properties"), F.col("topic"), stamped
            )
        )
        .first()[0]
    )
    assert size_problem_in_arrow(over, stamped) == (0, problem)
    assert size_problem_in_arrow(pa.concat_tables([at_limit, _messages_table([row]), over]), stamped) == (
        2,
        problem,
    )
    many_properties = _messages_table([{"properties": {f"p{i}": "v" * 100 for i in range(400)}}])
    frame_problem = (
        table_frame(spark, many_properties)
        .select(
            size_problem(F.col("body"), F.col("keys"), F.col("tags"), F.col("properties"), F.col("topic"))
        )
        .first()[0]
    )
    assert size_problem_in_arrow(many_properties) == (0, frame_problem)


def test_a_task_that_makes_an_oversized_message_fails_naming_its_record() -> None:
    """A split's task makes its messages itself (a JDBC batch): one over the broker's limit fails
    the batch as a flagged record does, with its position, before anything of the task is sent."""
    import pyarrow as pa

    from sluice.activities.source_runner import _send_in_task
    from sluice.connectors.api import SendOrder
    from sluice.connectors.records import bad_record_error

    value_type = pa.struct([("id", pa.int64()), ("text", pa.string())])
    values = [{"id": 1, "text": "small"}, {"id": 2, "text": "x" * (5 * 1024 * 1024)}]
    records = record_table(
        "db.t", [6, 7], values, value_type=value_type, keys=["1", "2"], key_type=pa.string()
    )
    encoder = converter_for(JSON_SCHEMAS).arrow_encoder(records.schema)
    assert encoder is not None
    with pytest.raises(RuntimeError) as caught:  # the writer is never reached
        list(_send_in_task(encoder, "connector c", 0, None, ("broker-a:0",), SendOrder.ANY, records))  # type: ignore[arg-type]
    error = bad_record_error(caught.value)
    assert error is not None
    assert str(error).startswith("connector c: bad record at partition 'db.t' offset 7: message of ")
    assert "over RocketMQ's maximum message size of 4194304 bytes" in str(error)
