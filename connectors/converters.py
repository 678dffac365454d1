"""Converters between records and RocketMQ messages (Kafka Connect's Converter).

``arrow_encoder(schema)`` plans, on the driver, how records of an Arrow schema become messages
(``topic, body (binary), keys, tags, properties``, connectors.arrow_messages) for the RocketMQ
writer; ``arrow_records()`` plans how a sink's stages make the records of the reader's messages
(``topic, partition, queue_offset, keys, tags, properties, born_timestamp, store_timestamp,
body``) in Arrow (connectors.arrow_records). Record position and headers travel as message
properties (``sluice.partition``, ``sluice.offset`` plus one per header), and the header
``rocketmq.tags`` becomes the message tag.

:class:`JsonConverter` with ``schemas_enable`` reads and writes the Connect JSON envelope of Kafka's
and RocketMQ Connect's JsonConverter: ``{"schema": {...}, "payload": ...}``. Records that do not
parse are flagged in ``_sluice_error``, never dropped; so are messages over the broker's size
limit (connectors.rocketmq.limits.unsendable, checked by the source's stages).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final

from sluice.connectors.config import converter_fields, converter_name
from sluice.connectors.connect_json import nullable_type, wire_type
from sluice.connectors.envelopes import Narrow, SeenPrefixes, envelope_head, met_value_types
from sluice.connectors.records import KEY_SCHEMA_HEADER, VALUE_SCHEMA_HEADER

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import DataType

    from sluice.connectors.arrow_envelopes import EnvelopeDecoder
    from sluice.connectors.arrow_json_bodies import DeclaredJsonDecoder
    from sluice.connectors.arrow_messages import MessageEncoder, Written
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
    #: how errors name the converter (``<name> converter: …``)
    name: ClassVar[str] = ""

    @property
    def discovers_envelopes(self) -> bool:
        """The value is read from Connect envelopes whose schemas the batches bring (learnt as
        they come: sink_stages.envelope_prefixes_of)."""
        return False

    def __init__(self) -> None:
        #: envelope schemas met in earlier batches: later ones recognise them cheaply
        self.seen_prefixes = SeenPrefixes()

    def arrow_encoder(self, records: pa.Schema) -> MessageEncoder:
        """The encoder that makes the messages of records of this Arrow schema
        (connectors.arrow_messages), planned here on the driver and run there or in a split's task.
        Raises ValueError, naming the converter, the column and its type, for a key or value type
        it does not write."""
        from sluice.connectors.arrow_messages import MessageEncoder, spark_held_type

        value = records.field("value")
        value = value.with_type(spark_held_type(value.type))
        written, declared = self._value_written(value)
        return MessageEncoder(
            value=written, key=self._key_written(records.field("key")), declared=declared,
            partition_property=PARTITION_PROPERTY, offset_property=OFFSET_PROPERTY,
            tombstone_property=TOMBSTONE_PROPERTY, tags_header=TAGS_HEADER,
        )  # fmt: skip

    @abstractmethod
    def _value_written(self, field: pa.Field) -> tuple[Written, DeclaredJsonDecoder | None]:
        """How values of ``field`` (their type as Spark holds it: arrow_messages.spark_held_type)
        become bodies, and the decoder that parses them first where a schema is declared. Raises
        ValueError, naming the type, for one the converter does not write."""

    def _key_written(self, field: pa.Field) -> Written:
        """How keys of ``field`` become the message's ``KEYS``: none for a null-typed column, a
        Connect envelope with ``key_envelopes``, text as it is, structures as Spark's ``to_json``
        (null fields left out), any other type as the JSON of its Connect wire form."""
        import pyarrow as pa

        from sluice.connectors.arrow_messages import Written, nested, spark_held_type, writable

        field = field.with_type(spark_held_type(field.type))
        kind = field.type
        if pa.types.is_null(kind):
            return Written("none")
        if self.key_envelopes:
            self._check_writable("key", kind, connect=True)
            return Written("envelope", _envelope_head(field))
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            return Written("own")
        if nested(kind) and writable(kind, connect=False):
            return Written("json")  # Spark's JSON, as the JDBC and CDC sources always wrote keys
        self._check_writable("key", kind, connect=True)
        return Written("connect")

    def _check_writable(self, column: str, kind: pa.DataType, *, connect: bool) -> None:
        """ValueError, naming the converter, ``column`` and ``kind``, unless the encoder writes
        values of ``kind`` as JSON (arrow_messages.writable)."""
        from sluice.connectors.arrow_messages import writable

        if not writable(kind, connect=connect):
            raise ValueError(f"{self.name} converter: a {column} of type {kind} is not written by Sluice")

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


class StringConverter(Converter):
    """UTF-8 text; structs/arrays/maps are written as JSON text, other types via their string cast."""

    name = "string"

    def _value_written(self, field: pa.Field) -> tuple[Written, None]:
        import pyarrow as pa

        from sluice.connectors.arrow_messages import Written

        kind = field.type
        if pa.types.is_null(kind):
            return Written("none"), None
        if _text_or_binary(kind):
            return Written("own"), None
        self._check_writable("value", kind, connect=False)
        return Written("text"), None

    def _arrow_values(self, narrow: Narrow | None) -> tuple[Decoder, None]:
        from sluice.connectors.arrow_bodies import BodyDecoder

        return BodyDecoder(text=True, tombstone=TOMBSTONE_PROPERTY), None


class BytesConverter(Converter):
    """Bodies as raw bytes (a string value is UTF-8 encoded)."""

    name = "bytes"

    def _value_written(self, field: pa.Field) -> tuple[Written, None]:
        import pyarrow as pa

        from sluice.connectors.arrow_messages import Written

        kind = field.type
        if pa.types.is_null(kind):
            return Written("none"), None
        if _text_or_binary(kind):
            return Written("own"), None
        raise ValueError(f"bytes converter: value must be binary or string, got {kind}")

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

    name = "json"

    def __init__(self, schemas_enable: bool = False, value_schema: str | None = None) -> None:
        super().__init__()
        self.schemas_enable = schemas_enable
        self.value_schema = value_schema or None

    @property
    def discovers_envelopes(self) -> bool:
        return self.schemas_enable and not self.value_schema

    def _value_written(self, field: pa.Field) -> tuple[Written, DeclaredJsonDecoder | None]:
        """An envelope (schemas on) or the JSON of the value's wire form (off); a text value under
        a declared schema parsed as that type first, and without one, with schemas off, sent as it
        is where it is one JSON value."""
        import pyarrow as pa

        from sluice.connectors.arrow_json_bodies import DeclaredJsonDecoder
        from sluice.connectors.arrow_messages import Written

        kind = field.type
        if pa.types.is_null(kind):
            return Written("none"), None
        text = pa.types.is_string(kind) or pa.types.is_large_string(kind)
        declared = self._declared_type() if text else None
        if declared is not None:
            decoder = DeclaredJsonDecoder.plan(
                declared, envelope=False, tombstone=TOMBSTONE_PROPERTY, what="value"
            )
            if decoder is None:
                raise ValueError(
                    f"json converter: value schema {self.value_schema!r} holds a type Sluice parses "
                    "only from Connect envelopes (a map): declare a struct instead"
                )
            if not self.schemas_enable:
                return Written("connect"), decoder
            return Written("envelope", envelope_head(declared, True)), decoder
        if not self.schemas_enable and text:
            return Written("checked"), None
        self._check_writable("value", kind, connect=True)
        if self.schemas_enable:
            return Written("envelope", _envelope_head(field)), None
        return Written("connect"), None

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
        # pyspark's types: config validation imports this module (via connectors.plugins)
        from sluice.connectors.spark_ddl import parse_ddl

        try:
            return parse_ddl(self.value_schema)
        except ValueError as exc:
            raise ValueError(
                f"json converter: value schema {self.value_schema!r} is not Spark DDL: {exc}"
            ) from exc


def _text_or_binary(kind: pa.DataType) -> bool:
    """Whether a value of ``kind`` is its body's own bytes (text as UTF-8)."""
    import pyarrow as pa

    return any(
        check(kind)
        for check in (
            pa.types.is_string,
            pa.types.is_large_string,
            pa.types.is_binary,
            pa.types.is_large_binary,
        )
    )


def _envelope_head(field: pa.Field) -> str:
    """The ``{"schema":…,"payload":`` prefix of envelopes of values of an Arrow field (its type as
    Spark holds it: arrow_messages.spark_held_type), its schema built from that Spark type."""
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
