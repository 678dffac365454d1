"""Converters between records and RocketMQ messages (Kafka Connect's Converter).

``to_messages(records)`` gives ``topic, body (binary), keys, tags, properties`` for the RocketMQ
writer; ``arrow_records()`` plans how a sink's stages make the records of the reader's messages
(``topic, partition, queue_offset, keys, tags, properties, born_timestamp, store_timestamp,
body``) in Arrow (connectors.arrow_records). Record position and headers travel as message
properties (``sluice.partition``, ``sluice.offset`` plus one per header), and the header
``rocketmq.tags`` becomes the message tag.

:class:`JsonConverter` with ``schemas_enable`` reads and writes the Connect JSON envelope of Kafka's
and RocketMQ Connect's JsonConverter: ``{"schema": {...}, "payload": ...}``. Records that do not
parse are flagged in ``_sluice_error``, never dropped; so are messages over the broker's size
limit (``to_messages``, connectors.rocketmq.limits).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from sluice.connectors.barriers import BARRIER_HEADER
from sluice.connectors.config import converter_fields, converter_name
from sluice.connectors.connect_json import json_text, nullable_type, wire_type
from sluice.connectors.envelopes import (
    Narrow,
    SeenPrefixes,
    envelope_head,
    envelope_text,
    met_value_types,
    parse_json,
)
from sluice.connectors.records import ERROR_COLUMN, KEY_SCHEMA_HEADER, VALUE_SCHEMA_HEADER, flag_errors

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

    from sluice.connectors.arrow_envelopes import EnvelopeDecoder
    from sluice.connectors.arrow_messages import KeyText, MessageEncoder
    from sluice.connectors.arrow_records import Decoder, RecordsPlan

PARTITION_PROPERTY: Final = "sluice.partition"
OFFSET_PROPERTY: Final = "sluice.offset"
TAGS_HEADER: Final = "rocketmq.tags"
#: Marks a message whose record value was null (a tombstone): its body is empty, and an empty body
#: without it is an empty value (e.g. ""), never a null one.
TOMBSTONE_PROPERTY: Final = "sluice.tombstone"
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
        """The value is read from Connect envelopes whose schemas the batches bring (learnt as
        they come: sink_stages.envelope_prefixes_of)."""
        return False

    def __init__(self) -> None:
        #: envelope schemas met in earlier batches: later ones recognise them cheaply
        self.seen_prefixes = SeenPrefixes()

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

    def arrow_records(self, narrow: Narrow | None = None) -> RecordsPlan:
        """A plan that makes the records of a sink batch's messages in Arrow
        (connectors.arrow_records). Raises ValueError, naming it, for a type Sluice does not read."""
        from sluice.connectors.arrow_records import RecordsPlan

        value, own_values = self._arrow_values(narrow)
        key, own_keys = self._envelope_decoder("key", None) if self.key_envelopes else (None, None)
        own = [(VALUE_SCHEMA_HEADER, own_values), (KEY_SCHEMA_HEADER, own_keys)]
        return RecordsPlan(
            value, key, TOMBSTONE_PROPERTY, TAGS_HEADER,
            own_types=tuple(
                (header, tuple((topic, kind.json()) for topic, kind in types.items()))
                for header, types in own
                if types
            ),
        )  # fmt: skip

    def _arrow_values(self, narrow: Narrow | None) -> tuple[Decoder, dict[str, DataType] | None]:
        """The Arrow decoder of the values and each topic's own type where topics differ."""
        return self._envelope_decoder("value", narrow)

    def _envelope_decoder(
        self, name: str, narrow: Narrow | None
    ) -> tuple[EnvelopeDecoder, dict[str, DataType] | None]:
        """The Arrow decoder of the envelopes of ``name`` (value, key) met so far and each topic's
        own type where topics differ (envelopes.met_value_types). Raises ValueError, naming the
        type, for one Sluice does not read (or the topics' types do not merge)."""
        # pyspark, pyarrow: config validation imports this module (via connectors.plugins)
        from pyspark.sql.pandas.types import to_arrow_type
        from pyspark.sql.types import StringType

        from sluice.connectors.arrow_envelopes import plan_decoder

        known, refused = self.seen_prefixes.known(name), self.seen_prefixes.refused(name)
        met = met_value_types(known, narrow) if known else (StringType(), None)  # every record flagged
        data_type = nullable_type(met[0])  # as a JSON parse types it: any field may be null in a payload
        what, setting = ("body", "value.converter.schemas.enable") if name == "value" else (
            "key", "key.converter.schemas.enable"
        )  # fmt: skip
        try:
            wire, value = to_arrow_type(wire_type(data_type)), to_arrow_type(data_type)
            decoder = plan_decoder(
                known, wire, value, TOMBSTONE_PROPERTY, type_name=data_type.simpleString(), what=what,
                setting=setting, refused=refused,
            )  # fmt: skip
        except TypeError:  # a type Arrow has no form for
            decoder = None
        if decoder is None:
            raise ValueError(
                f"json converter: a {what} of type {data_type.simpleString()} is not read by Sluice"
            )
        return decoder, met[1]


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

    def _arrow_values(self, narrow: Narrow | None) -> tuple[Decoder, None]:
        from sluice.connectors.arrow_bodies import BodyDecoder

        return BodyDecoder(text=True, tombstone=TOMBSTONE_PROPERTY), None


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

    def _arrow_values(self, narrow: Narrow | None) -> tuple[Decoder, None]:
        from sluice.connectors.arrow_bodies import BodyDecoder

        return BodyDecoder(text=False, tombstone=TOMBSTONE_PROPERTY), None


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

    def _arrow_values(self, narrow: Narrow | None) -> tuple[Decoder, dict[str, DataType] | None]:
        """Envelopes of the schemas met, or a body of the declared schema (in an envelope with
        schemas on), or schemaless text (connectors.arrow_json_bodies)."""
        from sluice.connectors.arrow_json_bodies import DeclaredJsonDecoder, JsonTextDecoder

        declared = self._declared_type()
        if declared is None and self.schemas_enable:
            return super()._arrow_values(narrow)
        if declared is None:
            return JsonTextDecoder(TOMBSTONE_PROPERTY), None
        decoder = DeclaredJsonDecoder.plan(
            declared, envelope=self.schemas_enable, tombstone=TOMBSTONE_PROPERTY
        )
        if decoder is None:
            raise ValueError(
                f"json converter: value schema {self.value_schema!r} holds a type read only from "
                "Connect envelopes (a map): declare a struct instead, or send envelopes"
            )
        return decoder, None

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
            df = parse_json(df, F.col("value"), declared, what="value")
            data_type = declared
        if not self.schemas_enable:
            if isinstance(data_type, StringType):
                df = _flag_not_json(df, F.col("value"), "value")
                return df.withColumn("body", F.encode(F.col("value"), "UTF-8"))
            return df.withColumn("body", F.encode(json_text(F.col("value"), data_type), "UTF-8"))
        body = envelope_text(F.col("value"), data_type, df.schema["value"].nullable)
        return df.withColumn("body", F.encode(body, "UTF-8"))


def _envelope_head(field: pa.Field) -> str:
    """The ``{"schema":…,"payload":`` prefix ``envelope_text`` writes for values of an Arrow field
    (its Spark type as the source's frame has it: activities.spark_binding.spark_schema)."""
    from pyspark.sql.pandas.types import from_arrow_type

    return envelope_head(from_arrow_type(field.type, prefer_timestamp_ntz=True), field.nullable)


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
