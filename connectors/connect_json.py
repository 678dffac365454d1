"""Kafka Connect's JSON schema and Spark types, both ways, and the JSON wire form of each type.

Used by the json converter (connectors.converters): ``connect_schema``/``spark_type`` map a Connect
schema (the ``schema`` half of the ``{"schema", "payload"}`` envelope, key order as Kafka writes
it) to a Spark type and back; ``wire_type`` is how JSON carries a Spark type (instants as ISO-8601
text with microseconds, Debezium's ZonedTimestamp; zone-less date-times as epoch micros, Debezium's
MicroTimestamp; Kafka's millisecond Timestamp is read too; dates as epoch days, bytes and decimals
as base64), which Arrow writes (connectors.arrow_messages.connect_payloads) and reads
(connectors.arrow_json.converted). No module-level pyspark import.
"""

from __future__ import annotations

import base64
import binascii
import decimal
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

_PRIMITIVES: Final = {
    "int8": "ByteType",
    "int16": "ShortType",
    "int32": "IntegerType",
    "int64": "LongType",
    "float32": "FloatType",
    "float64": "DoubleType",
    "boolean": "BooleanType",
    "string": "StringType",
    "bytes": "BinaryType",
}
_TIMESTAMP: Final = "org.apache.kafka.connect.data.Timestamp"
# Debezium's names for what Kafka's millisecond Timestamp cannot carry exactly: an instant with
# microseconds (ISO-8601 text, UTC) and a zone-less date-time in microseconds since the epoch.
_ZONED_TIMESTAMP: Final = "io.debezium.time.ZonedTimestamp"
_MICRO_TIMESTAMP: Final = "io.debezium.time.MicroTimestamp"
_DATE: Final = "org.apache.kafka.connect.data.Date"
_DECIMAL: Final = "org.apache.kafka.connect.data.Decimal"
_PRECISION: Final = "connect.decimal.precision"
#: Precision assumed for a Connect Decimal whose schema does not say (Kafka's schemas often do not).
DEFAULT_DECIMAL_PRECISION: Final = 38


def connect_schema(data_type: DataType, optional: bool = True) -> dict[str, Any]:
    """The Connect JSON schema of a Spark type, keys in the order Kafka's JsonConverter writes them."""
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import types as T

    for name, spark_name in _PRIMITIVES.items():
        if type(data_type).__name__ == spark_name:
            return {"type": name, "optional": optional}
    if isinstance(data_type, T.TimestampType):
        return {"type": "string", "optional": optional, "name": _ZONED_TIMESTAMP, "version": 1}
    if isinstance(data_type, T.TimestampNTZType):
        return {"type": "int64", "optional": optional, "name": _MICRO_TIMESTAMP, "version": 1}
    if isinstance(data_type, T.DateType):
        return {"type": "int32", "optional": optional, "name": _DATE, "version": 1}
    if isinstance(data_type, T.DecimalType):
        return {
            "type": "bytes",
            "optional": optional,
            "name": _DECIMAL,
            "version": 1,
            "parameters": {"scale": str(data_type.scale), _PRECISION: str(data_type.precision)},
        }
    if isinstance(data_type, T.ArrayType):
        return {
            "type": "array",
            "items": connect_schema(data_type.elementType, data_type.containsNull),
            "optional": optional,
        }
    if isinstance(data_type, T.MapType):
        if not isinstance(data_type.keyType, T.StringType):
            raise ValueError(f"json converter: map keys must be strings, got {data_type.simpleString()}")
        return {
            "type": "map",
            "keys": connect_schema(data_type.keyType, False),
            "values": connect_schema(data_type.valueType, data_type.valueContainsNull),
            "optional": optional,
        }
    if isinstance(data_type, T.StructType):
        fields = [{**connect_schema(f.dataType, f.nullable), "field": f.name} for f in data_type.fields]
        return {"type": "struct", "fields": fields, "optional": optional}
    raise ValueError(f"json converter: no Connect schema type for Spark type {data_type.simpleString()}")


def spark_type(schema: Mapping[str, Any], where: str = "schema") -> DataType:
    """The Spark type of a Connect JSON schema (``where`` names the position in errors)."""
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import types as T

    kind = schema.get("type")
    name = schema.get("name")
    if name in (_TIMESTAMP, _ZONED_TIMESTAMP):
        return T.TimestampType()
    if name == _MICRO_TIMESTAMP:
        return T.TimestampNTZType()
    if name == _DATE:
        return T.DateType()
    if name == _DECIMAL:
        params = schema.get("parameters") or {}
        try:
            scale = int(params.get("scale", 0))
            precision = int(params.get(_PRECISION, DEFAULT_DECIMAL_PRECISION))
        except (TypeError, ValueError):
            raise ValueError(
                f"json converter: {where}: Decimal parameters {params!r} are not integers"
            ) from None
        if not 0 <= scale <= precision <= DEFAULT_DECIMAL_PRECISION:
            raise ValueError(
                f"json converter: {where}: Decimal(precision {precision}, scale {scale}) does not fit "
                f"Spark's decimals (precision <= {DEFAULT_DECIMAL_PRECISION}, 0 <= scale <= precision)"
            )
        return T.DecimalType(precision, scale)
    if isinstance(kind, str) and kind in _PRIMITIVES:
        return getattr(T, _PRIMITIVES[kind])()
    if kind == "array":
        items = schema.get("items") or {}
        return T.ArrayType(spark_type(items, f"{where}.items"), bool(items.get("optional", True)))
    if kind == "map":
        keys, values = schema.get("keys") or {}, schema.get("values") or {}
        if keys.get("type") != "string":
            raise ValueError(f"json converter: {where}: only string map keys are supported")
        return T.MapType(
            T.StringType(), spark_type(values, f"{where}.values"), bool(values.get("optional", True))
        )
    if kind == "struct":
        return T.StructType(
            [
                T.StructField(
                    f["field"], spark_type(f, f"{where}.{f['field']}"), bool(f.get("optional", True))
                )
                for f in schema.get("fields", [])
            ]
        )
    raise ValueError(f"json converter: {where}: unsupported Connect schema type {kind!r} (name {name!r})")


def wire_type(data_type: DataType, numeric_decimals: bool = False) -> DataType:
    """How a type appears in JSON: instants as ISO-8601 text (Kafka's epoch millis read too), zone-less
    date-times as epoch micros, dates as epoch days, bytes and decimals as base64."""
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import types as T

    if isinstance(data_type, T.TimestampType):
        return T.StringType()
    if isinstance(data_type, T.TimestampNTZType):
        return T.LongType()
    if isinstance(data_type, T.DateType):
        return T.IntegerType()
    if isinstance(data_type, T.DecimalType) and numeric_decimals:
        return data_type  # a plain JSON number, as schemaless JSON writes it
    if isinstance(data_type, T.BinaryType | T.DecimalType):
        return T.StringType()
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(wire_type(data_type.elementType, numeric_decimals), data_type.containsNull)
    if isinstance(data_type, T.MapType):
        return T.MapType(
            data_type.keyType, wire_type(data_type.valueType, numeric_decimals), data_type.valueContainsNull
        )
    if isinstance(data_type, T.StructType):
        return T.StructType(
            [
                T.StructField(f.name, wire_type(f.dataType, numeric_decimals), f.nullable)
                for f in data_type.fields
            ]
        )
    return data_type


#: Python's default decimal context keeps 28 digits; Spark decimals have up to 38 (plus the scale).
_EXACT: Final = decimal.Context(prec=100)


def decimal_from_text(text: str, precision: int, scale: int) -> Decimal | None:
    """One Kafka Decimal payload (base64 of the unscaled value's big-endian two's complement) as
    a decimal of ``precision`` and ``scale``; None when it is not base64, is empty or does not fit
    (exact to 38 digits: past ``decimal``'s default 28)."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    if not raw:
        return None
    unscaled = int.from_bytes(raw, "big", signed=True)
    if len(str(abs(unscaled))) > precision:
        return None
    return Decimal(unscaled).scaleb(-scale, context=_EXACT)


def nullable_type(data_type: DataType) -> DataType:
    """``data_type`` with every field, element and map value nullable (``from_json``'s typing)."""
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import types as T

    if isinstance(data_type, T.StructType):
        return T.StructType(
            [T.StructField(f.name, nullable_type(f.dataType), True) for f in data_type.fields]
        )
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(nullable_type(data_type.elementType), True)
    if isinstance(data_type, T.MapType):
        return T.MapType(data_type.keyType, nullable_type(data_type.valueType), True)
    return data_type
