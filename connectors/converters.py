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

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from sluice.connectors.barriers import BARRIER_HEADER
from sluice.connectors.config import converter_fields, converter_name
from sluice.connectors.connect_json import json_text, wire_type
from sluice.connectors.envelopes import (
    Narrow,
    SeenPrefixes,
    decode_envelopes,
    envelope_head,
    envelope_prefixes,
    envelope_text,
    met_value_types,
    parse_json,
    utf8_text,
)
from sluice.connectors.records import ERROR_COLUMN, KEY_SCHEMA_HEADER, VALUE_SCHEMA_HEADER, flag_errors

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

    from sluice.connectors.arrow_bodies import BodyDecoder
    from sluice.connectors.arrow_envelopes import EnvelopeDecoder
    from sluice.connectors.arrow_messages import KeyText, MessageEncoder
    from sluice.connectors.arrow_records import RecordsPlan

PARTITION_PROPERTY: Final = "sluice.partition"
VALUE_SCHEMA_COLUMN: Final = "_sluice_value_schema"
KEY_SCHEMA_COLUMN: Final = "_sluice_key_schema"
_KEY_TEXT: Final = "_sluice_key_text"
_KEY_VALUE: Final = "_sluice_key"
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
    """Value (de)serialisation; keys, tags, properties and positions are handled here once.

    Keys travel in the message's ``KEYS`` property: as they are when they are text, as JSON when
    they are structured, and as Connect envelopes when ``key_envelopes`` (``key.converter`` is JSON
    with schemas, as Kafka's JsonConverter is by default), so a sink gets struct keys back typed.
    """

    #: keys are written and read as Connect JSON envelopes (converter_for sets it from the config)
    key_envelopes: bool = False

    @abstractmethod
    def encode(self, df: DataFrame) -> DataFrame:
        """``df`` with a binary ``body`` column made from ``value`` (may flag ``_sluice_error``)."""

    @property
    def discovers_envelopes(self) -> bool:
        """The value is read from Connect envelopes whose schemas each batch discovers (``decode``
        then takes ``prefixes``, found with the keys' in one job: envelopes.envelope_prefixes)."""
        return False

    def __init__(self) -> None:
        #: envelope schemas met in earlier batches: later ones recognise them cheaply
        self.seen_prefixes = SeenPrefixes()

    @abstractmethod
    def decode(
        self, df: DataFrame, prefixes: Sequence[tuple[str, str]] | None = None, narrow: Narrow | None = None
    ) -> DataFrame:
        """``df`` with a ``value`` column made from the binary ``body`` (may flag ``_sluice_error``);
        ``narrow`` (envelopes only): the part of a value type that is read (``to_records``)."""

    def to_messages(
        self, records: DataFrame, extra_properties: Mapping[str, str] | None = None, *, stamped_bytes: int = 0
    ) -> DataFrame:
        """Messages of ``records``; ``extra_properties`` go on every message, in the same map as the
        position (one map built per row, not several). ``stamped_bytes``: the most the properties
        the writer stamps on each message add (a source's batch reference: the writer's
        ``boundProperties``), counted in the size check."""
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F
        from pyspark.sql.types import ArrayType, MapType, NullType, StringType, StructType

        key_type = records.schema["key"].dataType
        if isinstance(key_type, NullType):
            keys = F.lit(None).cast("string")
        elif self.key_envelopes:
            keys = envelope_text(F.col("key"), key_type, records.schema["key"].nullable)
        elif isinstance(key_type, StringType):
            keys = F.col("key")
        elif isinstance(key_type, StructType | ArrayType | MapType):
            keys = F.to_json(F.col("key"))  # Spark's JSON, as the JDBC and CDC sources always wrote keys
        else:
            keys = json_text(F.col("key"), key_type)
        headers = F.map_filter(
            F.coalesce(F.col("headers"), F.create_map().cast("map<string,string>")),
            # Sluice's own headers stay in the runtime, but a barrier mark travels (connectors.barriers).
            lambda k, v: (
                (~k.startswith("sluice.") | (k == BARRIER_HEADER)) & (k != TAGS_HEADER) & v.isNotNull()
            ),
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
        return flag_unsendable(messages, stamped_bytes)

    def arrow_encoder(self, records: pa.Schema) -> MessageEncoder | None:
        """An encoder that makes ``to_messages``' messages of records of this Arrow schema in
        Arrow (connectors.arrow_messages), planned on the driver and run there or in a split's
        task; None when only Spark's makes them."""
        return None

    def _planned_encoder(self, records: pa.Schema, value_head: str | None) -> MessageEncoder | None:
        """The encoder of ``arrow_encoder``, once the converter writes the value shape
        (``value_head``: MessageEncoder's); None when the key or the records are not written in
        Arrow."""
        from sluice.connectors.arrow_messages import MessageEncoder

        if ERROR_COLUMN in records.names:  # records the source could not decode: Spark flags them
            return None
        key = self._arrow_key_text(records)
        if key is None:
            return None
        return MessageEncoder(
            value_head=value_head, key=key, partition_property=PARTITION_PROPERTY,
            offset_property=OFFSET_PROPERTY, tombstone_property=TOMBSTONE_PROPERTY, tags_header=TAGS_HEADER,
        )  # fmt: skip

    def _own_bytes_encoder(self, records: pa.Schema) -> MessageEncoder | None:
        """``arrow_encoder`` of a converter whose body is a text value's UTF-8 or a binary value as
        it is (the string and bytes converters): a file source's lines skip Spark's ``encode``."""
        import pyarrow as pa

        kind = records.field("value").type
        if not (pa.types.is_string(kind) or pa.types.is_binary(kind)):
            return None
        return self._planned_encoder(records, None)

    def _arrow_key_text(self, records: pa.Schema) -> KeyText | None:
        """How ``to_messages`` writes keys of this Arrow schema, for ``arrow_encoder``s."""
        import pyarrow as pa

        from sluice.connectors.arrow_messages import KeyText, encodable_type

        field = records.field("key")
        kind = field.type
        if pa.types.is_null(kind):
            return KeyText("none")
        if not encodable_type(kind):
            return None
        if self.key_envelopes:
            return KeyText("envelope", _envelope_head(field))
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            return KeyText("text")
        if pa.types.is_struct(kind) or pa.types.is_list(kind) or pa.types.is_map(kind):
            return KeyText("json")
        return None  # a scalar key: its JSON is the converter's wire form, left to Spark

    def knows_schemas(self, topics: Iterable[str]) -> bool:
        """Whether a batch of ``topics`` may be decoded with the schemas met before (the sink's
        stages: connectors.sink_stages): nothing to search, or every envelope of the last batch
        searched was remembered and the values of each topic have been met."""
        if not (self.discovers_envelopes or self.key_envelopes):
            return True
        seen = self.seen_prefixes
        return seen.complete and (not self.discovers_envelopes or seen.knows_topics("value", topics))

    def arrow_records(self, narrow: Narrow | None = None) -> RecordsPlan | None:
        """A plan that makes ``to_records``' records in Arrow (connectors.arrow_records),
        with no Spark job; None when only Spark's make them: schemaless JSON or JSON of a declared
        schema, or keys in envelopes met with more than one type."""
        from sluice.connectors.arrow_records import RecordsPlan

        value = self._arrow_values(narrow)
        key = self._envelope_decoder("key", None) if self.key_envelopes else None
        if value is None or (self.key_envelopes and (key is None or key[2] is not None)):
            return None
        own = tuple((topic, kind.json()) for topic, kind in (value[1] or {}).items())
        return RecordsPlan(
            value[0], None if key is None else key[0], TOMBSTONE_PROPERTY, TAGS_HEADER,
            own_value_types=own, own_value_header=VALUE_SCHEMA_HEADER,
        )  # fmt: skip

    def _arrow_values(
        self, narrow: Narrow | None
    ) -> tuple[EnvelopeDecoder | BodyDecoder, dict[str, DataType] | None] | None:
        """The Arrow decoder of the values and each topic's own type where topics differ; None
        when only Spark's decode reads them."""
        decoded = self._envelope_decoder("value", narrow) if self.discovers_envelopes else None
        return None if decoded is None else (decoded[0], decoded[2])

    def _envelope_decoder(
        self, name: str, narrow: Narrow | None
    ) -> tuple[EnvelopeDecoder, DataType, dict[str, DataType] | None] | None:
        """The Arrow decoder of the envelopes of ``name`` (value, key) met so far, their Spark type
        and each topic's own type where topics differ (envelopes.met_value_types); None when Arrow
        cannot decode them."""
        # pyspark, pyarrow: config validation imports this module (via connectors.plugins)
        from pyspark.sql.pandas.types import to_arrow_type
        from pyspark.sql.types import StringType

        from sluice.connectors.arrow_envelopes import plan_decoder

        known, refused = self.seen_prefixes.known(name), self.seen_prefixes.refused(name)
        met = met_value_types(known, narrow) if known else (StringType(), None)  # every record flagged
        if met is None:
            return None
        data_type = _nullable(met[0])  # as Spark's parse types it: any field may be null in a payload
        try:
            wire, value = to_arrow_type(wire_type(data_type)), to_arrow_type(data_type)
        except TypeError:  # a type Arrow has no form for here
            return None
        what, setting = ("body", "value.converter.schemas.enable") if name == "value" else (
            "key", "key.converter.schemas.enable"
        )  # fmt: skip
        decoder = plan_decoder(
            known, wire, value, TOMBSTONE_PROPERTY, type_name=data_type.simpleString(), what=what,
            setting=setting, refused=refused,
        )  # fmt: skip
        return None if decoder is None else (decoder, data_type, met[1])

    def to_records(self, messages: DataFrame, narrow: Narrow | None = None) -> DataFrame:
        """Records of the reader's ``messages``, their envelopes' schemas searched first (one Spark
        job: envelopes.envelope_prefixes). ``narrow``: given a topic's value type, the part of it
        that is read at all (the first transform's ``PrunesValue``); a value read from Connect
        envelopes is parsed only that far."""
        # pyspark: config validation imports this module (via connectors.plugins)
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
        key = F.when(F.col("keys") != "", F.col("keys"))
        # Schema prefixes are found in the raw bytes: decoding validates the UTF-8, once.
        texts = {"value": F.col("body").cast("string")} if self.discovers_envelopes else {}
        if self.key_envelopes:
            texts["key"] = key
        found = envelope_prefixes(messages, texts, self.seen_prefixes) if texts else {}
        decoded = self.decode(messages, found.get("value"), narrow)
        if self.key_envelopes:
            decoded = decode_envelopes(
                decoded.withColumn(_KEY_TEXT, key), F.col(_KEY_TEXT), what="key",
                setting="key.converter.schemas.enable", out=_KEY_VALUE, own_column=KEY_SCHEMA_COLUMN,
                prefixes=found.get("key"),
            )  # fmt: skip
            key = F.col(_KEY_VALUE)
        extra = [ERROR_COLUMN] if ERROR_COLUMN in decoded.columns else []
        own_schemas = ((VALUE_SCHEMA_COLUMN, VALUE_SCHEMA_HEADER), (KEY_SCHEMA_COLUMN, KEY_SCHEMA_HEADER))
        for column, header in own_schemas:
            if column not in decoded.columns:
                continue
            own = F.col(column)
            headers = F.when(own.isNull(), headers).otherwise(
                F.map_concat(headers, F.create_map(F.lit(header), own))
            )
        return decoded.select(
            F.col("topic"),
            F.col("partition"),
            F.col("queue_offset").cast("long").alias("offset"),
            key.alias("key"),
            F.col("value"),
            headers.alias("headers"),
            born.cast("timestamp").alias("timestamp"),
            *extra,
        )


def flag_unsendable(messages: DataFrame, stamped_bytes: int = 0) -> DataFrame:
    """Flag messages the broker would refuse for their size, per record and before sending
    (connectors.rocketmq.limits): a record over the limit is a bad record, not a failed batch.
    ``stamped_bytes``: properties the writer adds to each message."""
    # pyspark (rocketmq.limits too): config validation imports this module (via connectors.plugins)
    from pyspark.sql import functions as F

    from sluice.connectors.rocketmq.limits import size_problem

    problem = size_problem(
        F.col("body"), F.col("keys"), F.col("tags"), F.col("properties"), F.col("topic"), stamped_bytes
    )
    return flag_errors(messages, problem.isNotNull(), problem)


def _flag_not_json(df: DataFrame, text: Column, what: str) -> DataFrame:
    """Flag rows whose ``text`` is not one JSON value (Kafka's JsonConverter fails such records)."""
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import functions as F

    failed = text.isNotNull() & F.try_parse_json(text).isNull()
    return flag_errors(df, failed, F.lit(f"json converter: {what} is not valid JSON"))


class StringConverter(Converter):
    """UTF-8 text; structs/arrays/maps are written as JSON text, other types via their string cast."""

    def encode(self, df: DataFrame) -> DataFrame:
        # pyspark: config validation imports this module (via connectors.plugins)
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

    def arrow_encoder(self, records: pa.Schema) -> MessageEncoder | None:
        return self._own_bytes_encoder(records)

    def _arrow_values(self, narrow: Narrow | None) -> tuple[BodyDecoder, None]:
        from sluice.connectors.arrow_bodies import BodyDecoder

        return BodyDecoder(text=True, tombstone=TOMBSTONE_PROPERTY), None

    def decode(
        self, df: DataFrame, prefixes: Sequence[tuple[str, str]] | None = None, narrow: Narrow | None = None
    ) -> DataFrame:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F

        text = F.try_validate_utf8(F.col("body").cast("string"))
        df = flag_errors(
            df, F.col("body").isNotNull() & text.isNull(), F.lit("string converter: body is not UTF-8")
        )
        return df.withColumn("value", text)


class BytesConverter(Converter):
    """Bodies as raw bytes (a string value is UTF-8 encoded)."""

    def encode(self, df: DataFrame) -> DataFrame:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F
        from pyspark.sql.types import BinaryType, StringType

        data_type = df.schema["value"].dataType
        if isinstance(data_type, BinaryType):
            return df.withColumn("body", F.col("value"))
        if isinstance(data_type, StringType):
            return df.withColumn("body", F.encode("value", "UTF-8"))
        raise ValueError(f"bytes converter: value must be binary or string, got {data_type.simpleString()}")

    def arrow_encoder(self, records: pa.Schema) -> MessageEncoder | None:
        return self._own_bytes_encoder(records)

    def _arrow_values(self, narrow: Narrow | None) -> tuple[BodyDecoder, None]:
        from sluice.connectors.arrow_bodies import BodyDecoder

        return BodyDecoder(text=False, tombstone=TOMBSTONE_PROPERTY), None

    def decode(
        self, df: DataFrame, prefixes: Sequence[tuple[str, str]] | None = None, narrow: Narrow | None = None
    ) -> DataFrame:
        return df.withColumn("value", df["body"])


class JsonConverter(Converter):
    """JSON bodies; with ``schemas_enable`` the Connect ``{"schema", "payload"}`` envelope.

    ``value_schema`` (Spark DDL) parses JSON text values into a struct when writing and bodies when
    reading; without it, reading a schemaless body keeps the JSON text, and reading an envelope takes
    each topic's Spark type from its messages' schemas. A string value without ``value_schema`` is
    taken to be JSON text already and written unchanged when schemas are off.

    Input that is not JSON is a bad record, never passed through: a body that is not UTF-8 or not
    one JSON value when reading, a body that is not an envelope while schemas are on, a string
    value that is not JSON text when writing (an empty string is not JSON; a null value or body
    stays null). Like Kafka's JsonConverter, which fails such a record with a DataException: under
    ``errors.tolerance=none`` the task fails naming the record's position, under ``all`` the record
    goes to the dead-letter topic. For free text use the ``string`` converter.
    """

    def __init__(self, schemas_enable: bool = False, value_schema: str | None = None) -> None:
        super().__init__()
        self.schemas_enable = schemas_enable
        self.value_schema = value_schema or None

    @property
    def discovers_envelopes(self) -> bool:
        return self.schemas_enable and not self.value_schema

    def arrow_encoder(self, records: pa.Schema) -> MessageEncoder | None:
        # pyarrow: config validation imports this module (via connectors.plugins)
        from sluice.connectors.arrow_messages import encodable_type

        value = records.field("value")
        if not self.schemas_enable or self.value_schema or not encodable_type(value.type):
            return None
        return self._planned_encoder(records, _envelope_head(value))

    def _declared_type(self) -> DataType | None:
        if not self.value_schema:
            return None
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql.types import _parse_datatype_string

        try:
            return _parse_datatype_string(self.value_schema)
        except Exception as exc:
            raise ValueError(
                f"json converter: value schema {self.value_schema!r} is not Spark DDL: {exc}"
            ) from exc

    def encode(self, df: DataFrame) -> DataFrame:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F
        from pyspark.sql.types import StringType

        data_type = df.schema["value"].dataType
        declared = self._declared_type()
        if isinstance(data_type, StringType) and declared is not None:
            df = parse_json(df, F.col("value"), declared, envelope=False, what="value")
            data_type = declared
        if not self.schemas_enable:
            if isinstance(data_type, StringType):
                df = _flag_not_json(df, F.col("value"), "value")
                return df.withColumn("body", F.encode(F.col("value"), "UTF-8"))
            return df.withColumn("body", F.encode(json_text(F.col("value"), data_type), "UTF-8"))
        body = envelope_text(F.col("value"), data_type, df.schema["value"].nullable)
        return df.withColumn("body", F.encode(body, "UTF-8"))

    def decode(
        self, df: DataFrame, prefixes: Sequence[tuple[str, str]] | None = None, narrow: Narrow | None = None
    ) -> DataFrame:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F

        # The validated text is a column of its own: Spark would otherwise validate it once per use.
        df = df.withColumn(_TEXT_COLUMN, utf8_text(F.col("body")))
        text = F.col(_TEXT_COLUMN)
        df = flag_errors(
            df, F.col("body").isNotNull() & text.isNull(), F.lit("json converter: body is not UTF-8")
        )
        return self._decode_text(df, text, prefixes, narrow).drop(_TEXT_COLUMN)

    def _decode_text(
        self, df: DataFrame, text: Column, prefixes: Sequence[tuple[str, str]] | None, narrow: Narrow | None
    ) -> DataFrame:
        declared = self._declared_type()
        if not self.schemas_enable:
            if declared is None:
                return _flag_not_json(df, text, "body").withColumn("value", text)
            return parse_json(df, text, declared, envelope=False, what="body")
        if declared is not None:
            return parse_json(df, text, declared, envelope=True, what="body envelope")
        return decode_envelopes(
            df, text, what="body", setting="value.converter.schemas.enable", out="value",
            own_column=VALUE_SCHEMA_COLUMN, prefixes=prefixes, narrow=narrow,
        )  # fmt: skip


_TEXT_COLUMN: Final = "_sluice_text"


def _envelope_head(field: pa.Field) -> str:
    """The ``{"schema":…,"payload":`` prefix ``envelope_text`` writes for values of an Arrow field
    (its Spark type as the source's frame has it: activities.spark_binding.spark_schema)."""
    from pyspark.sql.pandas.types import from_arrow_type

    return envelope_head(from_arrow_type(field.type, prefer_timestamp_ntz=True), field.nullable)


def _nullable(data_type: DataType) -> DataType:
    """``data_type`` with every field, element and map value nullable (``from_json``'s typing)."""
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import types as T

    if isinstance(data_type, T.StructType):
        return T.StructType([T.StructField(f.name, _nullable(f.dataType), True) for f in data_type.fields])
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(_nullable(data_type.elementType), True)
    if isinstance(data_type, T.MapType):
        return T.MapType(data_type.keyType, _nullable(data_type.valueType), True)
    return data_type


def schemas_enabled(config: Mapping[str, Any], prefix: str) -> bool:
    """``<prefix>.schemas.enable`` of a parsed or raw config; when unset, what the converter's
    name implies (on for Kafka's and RocketMQ Connect's JsonConverter class names)."""
    _, field = converter_fields(prefix)  # the declared field: one place for its default
    raw = config.get(field.name)
    if raw is None or str(raw).strip() == "":
        return bool(field.implied(config) if field.implied else field.default)
    return bool(field.convert(raw))


def converter_for(config: Mapping[str, Any], prefix: str = "value.converter") -> Converter:
    """The converter a (parsed or raw) connector config asks for: ``string`` | ``json`` | ``bytes``;
    its keys travel as Connect envelopes when ``key.converter`` is JSON with schemas."""
    name = str(converter_name(config.get(prefix) or "string")).strip().lower()
    converter: Converter
    if name == "string":
        converter = StringConverter()
    elif name == "bytes":
        converter = BytesConverter()
    elif name == "json":
        converter = JsonConverter(
            schemas_enable=schemas_enabled(config, prefix),
            value_schema=str(config.get(f"{prefix}.schema") or "") or None,
        )
    else:
        raise ValueError(f"config field {prefix!r}: unknown converter {name!r} (known: string, json, bytes)")
    key_name = str(converter_name(config.get("key.converter") or "string")).strip().lower()
    converter.key_envelopes = key_name == "json" and schemas_enabled(config, "key.converter")
    return converter
