"""Converters between record DataFrames and RocketMQ message DataFrames (Kafka Connect's Converter).

``to_messages(records)`` gives ``topic, body (binary), keys, tags, properties`` for the RocketMQ
writer; ``to_records(messages)`` takes the reader's ``topic, partition, queue_offset, keys, tags,
properties, born_timestamp, store_timestamp, body`` and gives record columns. Record position and
headers travel as message properties (``sluice.partition``, ``sluice.offset`` plus one per header),
and the header ``rocketmq.tags`` becomes the message tag.

:class:`JsonConverter` with ``schemas_enable`` reads and writes the Connect JSON envelope of Kafka's
and RocketMQ Connect's JsonConverter: ``{"schema": {...}, "payload": ...}``. Rows that do not parse
are flagged in ``_sluice_error`` (see connectors.records.raise_on_bad_records), never dropped; so
are messages over the broker's size limit (``to_messages``, connectors.rocketmq.limits).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from connectors.connect_json import connect_schema, convert_wire, json_text, spark_type, wire_type
from connectors.records import ERROR_COLUMN, flag_errors

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

PARTITION_PROPERTY: Final = "sluice.partition"
#: Header the json converter sets when one batch's topics carry different schemas: the record's own
#: topic's value type (Spark's JSON form; merge_schemas), so a sink writes each table its own columns
#: with their own types.
VALUE_SCHEMA_HEADER: Final = "sluice.value.schema"
VALUE_SCHEMA_COLUMN: Final = "_sluice_value_schema"
OFFSET_PROPERTY: Final = "sluice.offset"
TAGS_HEADER: Final = "rocketmq.tags"
#: Marks a message whose record value was null (a tombstone): its body is empty, and an empty body
#: without it is an empty value (e.g. ""), never a null one.
TOMBSTONE_PROPERTY: Final = "sluice.tombstone"
# RocketMQ's own message properties (MessageConst): not user headers.
SYSTEM_PROPERTIES: Final = frozenset(
    [
        "KEYS",
        "TAGS",
        "WAIT",
        "DELAY",
        "RETRY_TOPIC",
        "REAL_TOPIC",
        "REAL_QID",
        "TRAN_MSG",
        "PGROUP",
        "MIN_OFFSET",
        "MAX_OFFSET",
        "BUYER_ID",
        "ORIGIN_MESSAGE_ID",
        "TRANSFER_FLAG",
        "CORRECTION_FLAG",
        "MQ2_FLAG",
        "RECONSUME_TIME",
        "MSG_REGION",
        "TRACE_ON",
        "UNIQ_KEY",
        "MAX_RECONSUME_TIMES",
        "CONSUME_START_TIME",
        "INNER_NUM",
        "INNER_BASE",
        "CLUSTER",
        "TRAN_PREPARED_QUEUE_OFFSET",
        "__STARTDELIVERTIME",
        "TIMER_DELIVER_MS",
        "TIMER_DELAY_SEC",
        "TIMER_DELAY_MS",
        "TIMER_OUT_MS",
    ]
)

# --- converters ------------------------------------------------------------------------------------


class Converter(ABC):
    """Value (de)serialisation; keys, tags, properties and positions are handled here once."""

    @abstractmethod
    def encode(self, df: DataFrame) -> DataFrame:
        """``df`` with a binary ``body`` column made from ``value`` (may flag ``_sluice_error``)."""

    @abstractmethod
    def decode(self, df: DataFrame) -> DataFrame:
        """``df`` with a ``value`` column made from the binary ``body`` (may flag ``_sluice_error``)."""

    def to_messages(self, records: DataFrame, extra_properties: Mapping[str, str] | None = None) -> DataFrame:
        """Messages of ``records``; ``extra_properties`` (e.g. the runtime's batch reference) go on
        every message, in the same map as the position (one map built per row, not several)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StringType

        key_type = records.schema["key"].dataType
        keys = F.col("key") if isinstance(key_type, StringType) else json_text(F.col("key"), key_type)
        headers = F.map_filter(
            F.coalesce(F.col("headers"), F.create_map().cast("map<string,string>")),
            lambda k, v: ~k.startswith("sluice.") & (k != TAGS_HEADER) & v.isNotNull(),
        )
        fixed = [F.lit(part) for item in (extra_properties or {}).items() for part in item]
        offset = F.col("offset").cast("string")
        where = [F.lit(PARTITION_PROPERTY), F.col("partition"), F.lit(OFFSET_PROPERTY), offset]
        position = F.create_map(*where, *fixed)
        tombstone = F.create_map(*where, F.lit(TOMBSTONE_PROPERTY), F.lit("true"), *fixed)
        position = F.when(F.col("value").isNull(), tombstone).otherwise(position)
        # Most records carry no headers: skip the concatenation (a map copy per row) for those.
        properties = F.when(F.size(headers) == 0, position).otherwise(F.map_concat(headers, position))
        encoded = self.encode(records)
        extra = [ERROR_COLUMN] if ERROR_COLUMN in encoded.columns else []
        # A null value travels as an empty body marked as a tombstone (a message needs a body).
        body = F.when(F.col("value").isNull(), F.lit(b"").cast("binary")).otherwise(F.col("body"))
        messages = encoded.select(
            "topic",
            body.alias("body"),
            F.when(F.col("key").isNotNull(), keys).alias("keys"),
            F.col("headers")[TAGS_HEADER].alias("tags"),
            properties.alias("properties"),
            "partition",
            "offset",
            *extra,
        )
        return _flag_unsendable(messages)

    def to_records(self, messages: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F
        from pyspark.sql.types import NumericType

        system = F.array(*[F.lit(p) for p in sorted(SYSTEM_PROPERTIES)])
        props = F.map_filter(
            F.coalesce(F.col("properties"), F.create_map().cast("map<string,string>")),
            lambda k, v: ~F.array_contains(system, k) & (k != TOMBSTONE_PROPERTY),
        )
        tags = F.when(
            F.col("tags").isNotNull() & (F.col("tags") != ""), F.create_map(F.lit(TAGS_HEADER), F.col("tags"))
        )
        headers = F.map_concat(props, F.coalesce(tags, F.create_map().cast("map<string,string>")))
        born = F.col("born_timestamp")
        if isinstance(messages.schema["born_timestamp"].dataType, NumericType):
            born = F.timestamp_millis(born)
        is_tombstone = F.coalesce(F.col("properties")[TOMBSTONE_PROPERTY] == "true", F.lit(False))
        # A tombstone's body is decoded as no body at all: its value is null, never "" nor bad JSON.
        messages = messages.withColumn(
            "body", F.when(is_tombstone, F.lit(None).cast("binary")).otherwise(F.col("body"))
        )
        decoded = self.decode(messages)
        extra = [ERROR_COLUMN] if ERROR_COLUMN in decoded.columns else []
        if VALUE_SCHEMA_COLUMN in decoded.columns:
            own = F.col(VALUE_SCHEMA_COLUMN)
            headers = F.when(own.isNull(), headers).otherwise(
                F.map_concat(headers, F.create_map(F.lit(VALUE_SCHEMA_HEADER), own))
            )
        return decoded.select(
            F.col("topic"),
            F.col("partition"),
            F.col("queue_offset").cast("long").alias("offset"),
            F.when(F.col("keys") != "", F.col("keys")).alias("key"),
            F.col("value"),
            headers.alias("headers"),
            born.cast("timestamp").alias("timestamp"),
            *extra,
        )


def _flag_unsendable(messages: DataFrame) -> DataFrame:
    """Flag messages the broker would refuse for their size, per record and before sending
    (connectors.rocketmq.limits): a record over the limit is a bad record, not a failed batch."""
    from pyspark.sql import functions as F

    from connectors.rocketmq.limits import size_problem

    problem = size_problem(F.col("body"), F.col("keys"), F.col("tags"), F.col("properties"), F.col("topic"))
    return flag_errors(messages, problem.isNotNull(), problem)


def _flag_not_json(df: DataFrame, text: Column, what: str) -> DataFrame:
    """Flag rows whose ``text`` is not one JSON value (Kafka's JsonConverter fails such records)."""
    from pyspark.sql import functions as F

    failed = text.isNotNull() & F.try_parse_json(text).isNull()
    return flag_errors(df, failed, F.lit(f"json converter: {what} is not valid JSON"))


class StringConverter(Converter):
    """UTF-8 text; structs/arrays/maps are written as JSON text, other types via their string cast."""

    def encode(self, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F
        from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructType

        data_type = df.schema["value"].dataType
        value = F.col("value")
        if isinstance(data_type, BinaryType):
            return df.withColumn("body", value)
        if isinstance(data_type, StructType | ArrayType | MapType):
            text = F.to_json(value, {"ignoreNullFields": "false"})
        else:
            text = value if isinstance(data_type, StringType) else value.cast("string")
        return df.withColumn("body", F.encode(text, "UTF-8"))

    def decode(self, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        text = F.try_validate_utf8(F.col("body").cast("string"))
        df = flag_errors(
            df, F.col("body").isNotNull() & text.isNull(), F.lit("string converter: body is not UTF-8")
        )
        return df.withColumn("value", text)


class BytesConverter(Converter):
    """Bodies as raw bytes (a string value is UTF-8 encoded)."""

    def encode(self, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F
        from pyspark.sql.types import BinaryType, StringType

        data_type = df.schema["value"].dataType
        if isinstance(data_type, BinaryType):
            return df.withColumn("body", F.col("value"))
        if isinstance(data_type, StringType):
            return df.withColumn("body", F.encode("value", "UTF-8"))
        raise ValueError(f"bytes converter: value must be binary or string, got {data_type.simpleString()}")

    def decode(self, df: DataFrame) -> DataFrame:
        return df.withColumn("value", df["body"])


class JsonConverter(Converter):
    """JSON bodies; with ``schemas_enable`` the Connect ``{"schema", "payload"}`` envelope.

    ``value_schema`` (Spark DDL) parses JSON text values into a struct when writing and bodies when
    reading; without it, reading a schemaless body keeps the JSON text, and reading an envelope takes
    the Spark type from the first message's schema. A string value without ``value_schema`` is taken
    to be JSON text already and written unchanged when schemas are off.

    Input that is not JSON is a bad record, never passed through: a body that is not UTF-8 or not
    one JSON value when reading, a string value that is not JSON text when writing (an empty string
    is not JSON; a null value or body stays null). Like Kafka's JsonConverter, which fails such a
    record with a DataException: under ``errors.tolerance=none`` the task fails naming the record's
    position, under ``all`` the record goes to the dead-letter topic. For free text use the
    ``string`` converter.
    """

    def __init__(self, schemas_enable: bool = False, value_schema: str | None = None) -> None:
        self.schemas_enable = schemas_enable
        self.value_schema = value_schema or None

    def _declared_type(self) -> DataType | None:
        if not self.value_schema:
            return None
        from pyspark.sql.types import _parse_datatype_string

        try:
            return _parse_datatype_string(self.value_schema)
        except Exception as exc:
            raise ValueError(
                f"json converter: value schema {self.value_schema!r} is not Spark DDL: {exc}"
            ) from exc

    def _parse(
        self, df: DataFrame, text: Column, data_type: DataType, envelope: bool, what: str
    ) -> DataFrame:
        """``value`` parsed from JSON ``text`` as ``data_type``; rows that do not fit are flagged."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StringType, StructField, StructType

        # Decimals are Kafka's base64 inside a Connect envelope, plain JSON numbers in a bare body.
        numeric = not envelope
        wire = wire_type(data_type, numeric)
        inner = StructType([StructField("payload", wire)]) if envelope else wire
        if not isinstance(inner, StructType):
            inner = StructType([StructField("payload", wire)])
            text = F.concat(F.lit('{"payload":'), text, F.lit("}"))
            envelope = True
        schema = StructType([*inner.fields, StructField("_corrupt", StringType())])
        parsed = F.from_json(text, schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt"})
        df = df.withColumn("_parsed", parsed)
        failed = text.isNotNull() & (F.col("_parsed").isNull() | F.col("_parsed._corrupt").isNotNull())
        df = flag_errors(
            df, failed, F.lit(f"json converter: {what} does not parse as {data_type.simpleString()}")
        )
        if envelope:
            value = F.col("_parsed.payload")
        else:
            value = F.struct(*[F.col(f"_parsed.{f.name}").alias(f.name) for f in inner.fields])
            value = F.when(F.col("_parsed").isNull(), F.lit(None)).otherwise(value)
        return df.withColumn("value", convert_wire(value, data_type, False, numeric)).drop("_parsed")

    def encode(self, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F
        from pyspark.sql.types import StringType

        data_type = df.schema["value"].dataType
        declared = self._declared_type()
        if isinstance(data_type, StringType) and declared is not None:
            df = self._parse(df, F.col("value"), declared, envelope=False, what="value")
            data_type = declared
        if not self.schemas_enable:
            if isinstance(data_type, StringType):
                df = _flag_not_json(df, F.col("value"), "value")
                return df.withColumn("body", F.encode(F.col("value"), "UTF-8"))
            return df.withColumn("body", F.encode(json_text(F.col("value"), data_type), "UTF-8"))
        nullable = df.schema["value"].nullable
        schema_json = json.dumps(connect_schema(data_type, nullable), separators=(",", ":"))
        body = F.concat(
            F.lit(f'{{"schema":{schema_json},"payload":'), json_text(F.col("value"), data_type), F.lit("}")
        )
        return df.withColumn("body", F.encode(body, "UTF-8"))

    def decode(self, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        # The validated text is a column of its own: Spark would otherwise validate it once per use.
        df = df.withColumn(_TEXT_COLUMN, F.try_validate_utf8(F.col("body").cast("string")))
        text = F.col(_TEXT_COLUMN)
        df = flag_errors(
            df, F.col("body").isNotNull() & text.isNull(), F.lit("json converter: body is not UTF-8")
        )
        return self._decode_text(df, text).drop(_TEXT_COLUMN)

    def _decode_text(self, df: DataFrame, text: Column) -> DataFrame:
        from pyspark.sql import functions as F

        declared = self._declared_type()
        if not self.schemas_enable:
            if declared is None:
                return _flag_not_json(df, text, "body").withColumn("value", text)
            return self._parse(df, text, declared, envelope=False, what="body")
        if declared is not None:
            return self._parse(df, text, declared, envelope=True, what="body envelope")
        by_topic = self._schemas_by_topic(df, text)
        if not by_topic:  # no messages: nothing to parse
            return df.withColumn("value", text)
        data_type, own_types = merge_schemas(by_topic)
        df = self._parse(df, text, data_type, envelope=True, what="body envelope")
        if own_types is None:
            return df
        own_schema = F.lit(None).cast("string")
        for topic, own in own_types.items():
            own_schema = F.when(F.col("topic") == topic, F.lit(own.json())).otherwise(own_schema)
        return df.withColumn(VALUE_SCHEMA_COLUMN, own_schema)

    @staticmethod
    def _schemas_by_topic(df: DataFrame, text: Column) -> dict[str, list[DataType]]:
        """Every distinct envelope schema of the batch, per topic: one sink batch may read several
        topics (one table each), and a topic's schema may change within a batch (a column added).

        Found without parsing the JSON when it can be (``_envelope_schemas``); otherwise, e.g.
        for a producer that writes ``payload`` first, by a JSON path query over every message.
        """
        from pyspark.sql import functions as F

        prefixes = (
            df.select(F.col("topic"), F.substring_index(text, _PAYLOAD_KEY, 1).alias("s"))
            .where(F.col("s").isNotNull())
            .distinct()
            .collect()
        )
        schemas = _envelope_schemas([(str(row["topic"]), row["s"]) for row in prefixes])
        if schemas is None:
            rows = (
                df.select(F.col("topic"), F.get_json_object(text, "$.schema").alias("s"))
                .where(F.col("s").isNotNull())
                .distinct()
                .collect()
            )
            schemas = [(str(row["topic"]), json.loads(row["s"])) for row in rows]
        found: dict[str, list[DataType]] = {}
        for topic, schema in sorted(schemas, key=lambda ts: (ts[0], json.dumps(ts[1], sort_keys=True))):
            try:
                data_type = spark_type(schema)
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(
                    f"json converter: topic {topic!r}: a message's schema is not a Connect schema: {exc}"
                ) from exc
            kinds = found.setdefault(topic, [])
            if data_type not in kinds:
                kinds.append(data_type)
        return found


_TEXT_COLUMN: Final = "_sluice_text"
_SCHEMA_KEY: Final = '{"schema":'
_PAYLOAD_KEY: Final = ',"payload":'


def _envelope_schemas(prefixes: list[tuple[str, str]]) -> list[tuple[str, Any]] | None:
    """The schemas of envelopes laid out as Kafka's JsonConverter writes them, from each body's
    text up to its first ``,"payload":``; None when a body is laid out otherwise.

    Why this is exact: a prefix ``{"schema":`` + ``P`` where ``P`` parses as one JSON value means
    ``P`` is the whole value of the envelope's ``schema`` key (a JSON value ends where it ends,
    whatever follows), and comparing these short prefixes is far cheaper than parsing every
    message (bench/db_profile.py). A ``,"payload":`` inside the schema (a default value, a doc)
    leaves an unterminated ``P`` that does not parse, and the caller falls back to parsing.
    A ``null`` schema (a schemaless envelope) is skipped, as the JSON path query skips it.
    """
    found: list[tuple[str, Any]] = []
    for topic, prefix in prefixes:
        if not prefix.startswith(_SCHEMA_KEY):
            return None
        try:
            schema = json.loads(prefix[len(_SCHEMA_KEY) :])
        except ValueError:
            return None
        if schema is not None:
            found.append((topic, schema))
    return found


def widest_number(a: DataType, b: DataType) -> DataType | None:
    """A numeric type holding every value of both (tables of one batch often differ only there:
    an ``INT`` key in one, a ``BIGINT`` key in another); None when either is not a number."""
    from pyspark.sql import types as T

    integral = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    digits = {T.ByteType: 3, T.ShortType: 5, T.IntegerType: 10, T.LongType: 20}

    def as_decimal(t: DataType) -> tuple[int, int] | None:
        if isinstance(t, T.DecimalType):
            return t.precision - t.scale, t.scale
        return (digits[type(t)], 0) if isinstance(t, integral) else None

    if isinstance(a, integral) and isinstance(b, integral):
        return a if integral.index(type(a)) >= integral.index(type(b)) else b
    if isinstance(a, T.FloatType | T.DoubleType) or isinstance(b, T.FloatType | T.DoubleType):
        numeric = (*integral, T.DecimalType, T.FloatType, T.DoubleType)
        return T.DoubleType() if isinstance(a, numeric) and isinstance(b, numeric) else None
    da, db = as_decimal(a), as_decimal(b)
    if da is None or db is None:
        return None
    whole, scale = max(da[0], db[0]), max(da[1], db[1])
    return T.DecimalType(min(38, whole + scale), scale) if whole + scale <= 38 else None


def merge_schemas(by_topic: Mapping[str, list[DataType]]) -> tuple[DataType, dict[str, DataType] | None]:
    """One Spark type for a batch's envelope schemas, and each topic's own type when they differ.

    Structs merge by field name (every merged field nullable: a topic without it leaves it null;
    numbers of different widths widen, ``widest_number``); other differences are an error naming
    the topics. A topic's own type is the merge of its own schemas (a column added within the
    batch). The own types (None when every topic's equals the merged one) let a sink write each
    table only its own columns, with their own types (``VALUE_SCHEMA_HEADER``).
    """
    from pyspark.sql.types import StructField, StructType

    def merge(types: list[tuple[str, DataType]]) -> DataType:
        if all(t == types[0][1] for _, t in types):
            return types[0][1]
        if not all(isinstance(t, StructType) for _, t in types):
            raise ValueError(
                "json converter: topics " + ", ".join(sorted({topic for topic, _ in types}))
                + " carry different non-struct schemas in one batch; give each its own sink connector"
            )
        merged: dict[str, StructField] = {}
        owners: dict[str, str] = {}
        for topic, struct in types:
            assert isinstance(struct, StructType)
            for f in struct.fields:
                if f.name in merged and merged[f.name].dataType != f.dataType:
                    a, b = merged[f.name].dataType, f.dataType
                    # nested structs (a change event's before/after rows) merge field by field too
                    both = isinstance(a, StructType) and isinstance(b, StructType)
                    wider = merge([(owners[f.name], a), (topic, b)]) if both else widest_number(a, b)
                    if wider is None:
                        raise ValueError(
                            f"json converter: field {f.name!r} is {merged[f.name].dataType.simpleString()} "
                            f"in topic {owners[f.name]!r} but {f.dataType.simpleString()} in topic "
                            f"{topic!r}; give those topics sink connectors of their own"
                        )
                    merged[f.name] = StructField(f.name, wider, True)
                merged.setdefault(f.name, StructField(f.name, f.dataType, True))
                owners.setdefault(f.name, topic)
        return StructType(list(merged.values()))

    own = {topic: merge([(topic, t) for t in types]) for topic, types in by_topic.items()}
    data_type = merge(list(own.items()))
    return data_type, (None if all(t == data_type for t in own.values()) else own)


def converter_for(config: Mapping[str, Any], prefix: str = "value.converter") -> Converter:
    """The converter a (parsed or raw) connector config asks for: ``string`` | ``json`` | ``bytes``."""
    from connectors.config import ConfigField, converter_name

    name = str(converter_name(config.get(prefix) or "string")).strip().lower()
    if name == "string":
        return StringConverter()
    if name == "bytes":
        return BytesConverter()
    if name == "json":
        schemas = ConfigField(f"{prefix}.schemas.enable", bool, False).convert(
            config.get(f"{prefix}.schemas.enable", False)
        )
        return JsonConverter(
            schemas_enable=schemas, value_schema=str(config.get(f"{prefix}.schema") or "") or None
        )
    raise ValueError(f"config field {prefix!r}: unknown converter {name!r} (known: string, json, bytes)")
