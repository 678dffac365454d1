"""Kafka's and RocketMQ Connect's JsonConverter as their runtimes default them: envelopes on for keys
and values unless the config says otherwise; struct keys travel as envelopes and come back typed; a
text that is not the envelope the setting expects is a bad record naming the setting."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from sluice.connectors.config import COMMON_SINK_FIELDS, ConfigDef
from sluice.connectors.converters import KEY_SCHEMA_HEADER, VALUE_SCHEMA_HEADER, JsonConverter, converter_for
from sluice.connectors.records import ERROR_COLUMN, Record, make_records
from tests.connectors.decoding import records_of
from tests.connectors.encoding import messages_of
from tests.connectors.test_converters import BORN, READ_SCHEMA, as_messages

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

KAFKA_JSON = "org.apache.kafka.connect.json.JsonConverter"
ROCKETMQ_JSON = "org.apache.rocketmq.connect.runtime.converter.record.json.JsonConverter"
ROCKETMQ_LEGACY_JSON = "org.apache.rocketmq.connect.runtime.converter.JsonConverter"
# What Kafka's JsonConverter writes for a Debezium MySQL key struct {id: int64}.
KEY_ENVELOPE = (
    '{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"}],'
    '"optional":false},"payload":{"id":7}}'
)


@pytest.mark.parametrize(
    ("converters", "expected"),
    [
        ({"key.converter": KAFKA_JSON, "value.converter": KAFKA_JSON}, (True, True)),
        ({"key.converter": ROCKETMQ_JSON, "value.converter": ROCKETMQ_JSON}, (True, True)),
        ({"key.converter": ROCKETMQ_LEGACY_JSON, "value.converter": ROCKETMQ_LEGACY_JSON}, (False, False)),
        ({"key.converter": "json", "value.converter": "json"}, (False, False)),
        ({"value.converter": KAFKA_JSON, "value.converter.schemas.enable": "false"}, (False, False)),
        ({"key.converter": KAFKA_JSON, "key.converter.schemas.enable": "false"}, (False, False)),
        ({"value.converter": "json", "value.converter.schemas.enable": "true"}, (False, True)),
        ({}, (False, False)),
    ],
)
def test_schemas_enable_defaults_follow_the_converter_name(
    converters: dict[str, str], expected: tuple[bool, bool]
) -> None:
    parsed = ConfigDef(COMMON_SINK_FIELDS).parse(
        {"connector.class": "file-sink", "topics": "t", **converters}
    )
    got = (parsed["key.converter.schemas.enable"], parsed["value.converter.schemas.enable"])
    assert got == expected
    # The parsed config says the same again (task configs are parsed twice), and so does the raw one.
    for config in (parsed, converters):
        converter = converter_for(config)
        schemas = isinstance(converter, JsonConverter) and converter.schemas_enable
        assert (converter.key_envelopes, schemas) == expected


def test_struct_keys_travel_as_envelopes_and_come_back_typed(spark: SparkSession) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    value = StructType([StructField("id", LongType(), False), StructField("name", StringType(), True)])
    records = make_records(
        spark, [Record("p", 7, {"id": 7, "name": "ann"}, topic="a"), Record("p", 8, None, topic="a")], value
    ).withColumn("key", F.struct(F.col("offset").alias("id")))
    converter = converter_for({"key.converter": KAFKA_JSON, "value.converter": KAFKA_JSON})
    messages = messages_of(converter, records)
    assert messages.column("keys").to_pylist()[0] == KEY_ENVELOPE
    back = records_of(converter, as_messages(spark, messages))
    assert back.schema.field("key").type == pa.struct([pa.field("id", pa.int64(), True)])
    assert [(r["key"], r["value"], r[ERROR_COLUMN]) for r in back.to_pylist()] == [
        ({"id": 7}, {"id": 7, "name": "ann"}, None),
        ({"id": 8}, None, None),  # a tombstone keeps its key
    ]


def _messages(spark: SparkSession, rows: list[tuple[str, str | None, bytes | None]]) -> Any:
    return spark.createDataFrame(
        [(t, "broker-a:0", 0, i, k, None, {}, BORN, BORN, b) for i, (t, k, b) in enumerate(rows)], READ_SCHEMA
    )


def test_each_topic_keeps_its_own_key_type(spark: SparkSession) -> None:
    other = KEY_ENVELOPE.replace('"field":"id"', '"field":"code"').replace('"id":7', '"code":9')
    body = b'{"schema":{"type":"string","optional":true},"payload":"x"}'
    converter = converter_for({"key.converter": KAFKA_JSON, "value.converter": KAFKA_JSON})
    rows = records_of(
        converter, _messages(spark, [("a", KEY_ENVELOPE, body), ("b", other, body)])
    ).to_pylist()
    got = {r["topic"]: (r["key"], dict(r["headers"]).get(KEY_SCHEMA_HEADER)) for r in rows}
    assert {t: k for t, (k, _) in got.items()} == {"a": {"id": 7, "code": None}, "b": {"id": None, "code": 9}}
    assert '"id"' in str(got["a"][1]) and '"code"' not in str(got["a"][1])
    assert '"code"' in str(got["b"][1]) and '"id"' not in str(got["b"][1])
    assert all(VALUE_SCHEMA_HEADER not in dict(r["headers"]) for r in rows)


def test_a_text_that_is_not_the_expected_envelope_is_a_bad_record_naming_the_setting(
    spark: SparkSession,
) -> None:
    good = b'{"schema":{"type":"int32","optional":false},"payload":5}'
    payload_first = b'{"payload":6,"schema":{"type":"int32","optional":false}}'
    not_connect = b'{"schema":{"type":"decimal"},"payload":1}'
    converter = converter_for({"key.converter": KAFKA_JSON, "value.converter": KAFKA_JSON})
    rows = records_of(
        converter,
        _messages(
            spark,
            [
                ("t", None, good),
                ("t", None, b'{"id":1}'),  # plain JSON: schemas.enable=false was meant
                ("t", '{"id":1}', good),  # a plain JSON key
                ("t", None, payload_first),
                ("t", None, not_connect),
                ("t", None, None),
            ],
        ),
    )
    got = [(r["value"], r[ERROR_COLUMN]) for r in rows.to_pylist()]
    # laid out otherwise than Kafka writes it (payload first) is read, not flagged (arrow_envelopes)
    assert got[0] == (5, None) and got[3] == (6, None) and got[5] == (None, None)
    assert got[1][0] is None and got[4][0] is None  # a flagged value is null
    assert "body is not a Connect JSON envelope" in got[1][1]
    assert "value.converter.schemas.enable=true expects" in got[1][1]
    assert "key is not a Connect JSON envelope" in got[2][1]
    assert "key.converter.schemas.enable=true expects" in got[2][1]
    assert "an envelope's schema is not a Connect schema" in got[4][1] and "decimal" in got[4][1]


def test_plain_json_with_schemas_off_is_read_as_today(spark: SparkSession) -> None:
    converter = converter_for({"value.converter": KAFKA_JSON, "value.converter.schemas.enable": "false"})
    rows = records_of(converter, _messages(spark, [("t", '{"id":1}', b'{"id":1}')])).to_pylist()
    assert [(r["key"], r["value"], r[ERROR_COLUMN]) for r in rows] == [('{"id":1}', '{"id":1}', None)]
