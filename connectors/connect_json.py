"""Kafka Connect's JSON schema and Spark types, both ways, and values as JSON text.

Used by the json converter (connectors.converters): ``connect_schema``/``spark_type`` map a Connect
schema (the ``schema`` half of the ``{"schema", "payload"}`` envelope, key order as Kafka writes
it) to a Spark type and back; ``wire_type``/``convert_wire`` rewrite a column between its Spark type
and how JSON carries it (instants as ISO-8601 text with microseconds, Debezium's ZonedTimestamp;
zone-less date-times as epoch micros, Debezium's MicroTimestamp; Kafka's millisecond Timestamp is
read too; dates as epoch days, bytes as base64).
No module-level pyspark import.
"""

from __future__ import annotations

import base64
import binascii
import decimal
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pyspark.sql import Column
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
_ISO_MICROS: Final = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"
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


def convert_wire(
    column: Column, data_type: DataType, to_wire: bool, numeric_decimals: bool = False
) -> Column:
    """Rewrite a column between its Spark type and its JSON wire type (see ``wire_type``;
    ``numeric_decimals``: decimals are plain JSON numbers, as in a body read with a declared schema)."""
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if wire_type(data_type, numeric_decimals) == data_type and not isinstance(data_type, T.BinaryType):
        return column
    if isinstance(data_type, T.TimestampType):
        if to_wire:
            return F.date_format(column, _ISO_MICROS)  # the session's zone is UTC (activities.spark)
        millis = F.timestamp_millis(column.cast("long"))  # Kafka's Timestamp: epoch millis
        return F.when(column.rlike("^-?[0-9]+$"), millis).otherwise(column.cast("timestamp"))
    if isinstance(data_type, T.TimestampNTZType):
        if to_wire:
            return F.unix_micros(column.cast("timestamp"))
        return F.timestamp_micros(column).cast(data_type)
    if isinstance(data_type, T.DateType):
        return F.unix_date(column) if to_wire else F.date_from_unix_date(column)
    if isinstance(data_type, T.BinaryType):
        return F.base64(column) if to_wire else F.unbase64(column)
    if isinstance(data_type, T.DecimalType):
        if not to_wire:  # read back only as plain JSON numbers (numeric_decimals): a sink reads in Arrow
            raise ValueError(f"no Spark read of {data_type.simpleString()} from base64")
        return decimal_to_base64(column, data_type)
    if isinstance(data_type, T.ArrayType):
        return F.transform(
            column, lambda x: convert_wire(x, data_type.elementType, to_wire, numeric_decimals)
        )
    if isinstance(data_type, T.MapType):
        return F.transform_values(
            column, lambda _, v: convert_wire(v, data_type.valueType, to_wire, numeric_decimals)
        )
    assert isinstance(data_type, T.StructType)
    rebuilt = F.struct(
        *[
            convert_wire(column[f.name], f.dataType, to_wire, numeric_decimals).alias(f.name)
            for f in data_type.fields
        ]
    )
    return F.when(column.isNull(), F.lit(None)).otherwise(rebuilt)


def json_text(column: Column, data_type: DataType) -> Column:
    """JSON text of any column (``null`` for null), nulls inside structs written as Kafka does."""
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    options = {"ignoreNullFields": "false"}
    wire = convert_wire(column, data_type, to_wire=True)
    if isinstance(data_type, T.StructType | T.ArrayType | T.MapType):
        text = F.to_json(wire, options)
    else:  # a scalar: serialise inside a one-field struct and cut the value out
        text = F.regexp_extract(F.to_json(F.struct(wire.alias("v")), options), r'^\{"v":(.*)\}$', 1)
    return F.coalesce(text, F.lit("null"))


#: Python's default decimal context keeps 28 digits; Spark decimals have up to 38 (plus the scale).
_EXACT: Final = decimal.Context(prec=100)


def _unscaled_bytes(value: Any, scale: int) -> bytes:
    """Kafka's Decimal encoding: ``BigInteger.toByteArray()`` of the unscaled value (minimal length)."""
    unscaled = int(value.scaleb(scale, context=_EXACT))
    return unscaled.to_bytes(max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1), "big", signed=True)


#: Widest decimal whose unscaled value fits a long: converted in Spark SQL, not in Python.
_LONG_DIGITS: Final = 18


def _native_to_base64(column: Column, scale: int) -> Column:
    """``_unscaled_bytes`` in Spark SQL for an unscaled value that fits a long: the long's 64-bit
    two's complement (``hex`` of a negative long is exactly that) without its redundant leading
    sign bytes. One expression per step, each used once: a form that picked the length with nested
    CASEs repeated the value in every branch and made the projection too big to be compiled
    (bench/db_profile.py), and a Python function per row cost more than the rest of the converter.
    """
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import functions as F

    unscaled = (column * F.lit(10**scale)).cast("long") if scale else column.cast("long")
    return F.base64(F.unhex(_without_sign_padding(F.lpad(F.hex(unscaled), 16, "0"))))


def _without_sign_padding(hexed: Column) -> Column:
    """Hex digits of a two's-complement integer without redundant leading sign bytes (``00``
    before a digit 0-7, ``FF`` before 8-F): the minimal form, as Java's ``BigInteger`` writes it."""
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import functions as F

    return F.regexp_replace(F.regexp_replace(hexed, "^(00)+(?=[0-7])", ""), "^(FF)+(?=[89A-F])", "")


def decimal_to_base64(column: Column, data_type: Any) -> Column:
    """A decimal column as Kafka's Decimal payload (base64 text), computed on executors.

    Up to 18 digits in Spark SQL (``_native_to_base64``); wider, a Python function (Arrow-batched):
    Spark SQL has no 128-bit integer to bytes.
    """
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import functions as F

    scale = int(data_type.scale)
    if int(data_type.precision) <= _LONG_DIGITS:
        return _native_to_base64(column, scale)

    def one(value: Any) -> str | None:
        return None if value is None else base64.b64encode(_unscaled_bytes(value, scale)).decode()

    return F.udf(one, "string", useArrow=True)(column)


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
