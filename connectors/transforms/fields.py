"""Field transforms on the value (or key) struct: Kafka's InsertField, ReplaceField, MaskField, Cast,
Flatten, TimestampConverter, ExtractField, HoistField and ValueToKey, as column expressions.

A null value (a tombstone) stays null, as in Kafka. Values a transform cannot convert (a Cast of
"abc" to int32, an unparseable timestamp) are flagged in ``_sluice_error`` rather than turned into
nulls silently, so the runtime can fail naming the record position.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from sluice.connectors.config import ConfigDef, ConfigField
from sluice.connectors.records import flag_errors
from sluice.connectors.transforms.base import Transform, register

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType, StructType

# Connect schema types -> Spark SQL types (Cast$Value spec).
CONNECT_TO_SPARK: Final = {
    "int8": "tinyint",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "float32": "float",
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "binary",
}


def _struct_of(df: DataFrame, column: str, where: str) -> StructType:
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql.types import StructType

    data_type = df.schema[column].dataType
    if not isinstance(data_type, StructType):
        raise ValueError(
            f"{where}: needs a struct {column}, got {data_type.simpleString()} "
            f"(use a json converter with a schema, or a sql transform, first)"
        )
    return data_type


def _rebuild(source: Column, fields: list[tuple[str, Column]]) -> Column:
    """A struct of ``fields`` that stays null where ``source`` is null (tombstones)."""
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import functions as F

    return F.when(source.isNull(), F.lit(None)).otherwise(F.struct(*[c.alias(n) for n, c in fields]))


def _field_name(option: Any) -> str:
    # Kafka allows a "!" (required) or "?" (optional) suffix; Spark columns are always nullable.
    return str(option or "").strip().rstrip("!?")


@register("InsertField", "insert-field")
class InsertField(Transform):
    """Add record metadata or a static value as fields of the value struct."""

    options_def = ConfigDef(
        (
            ConfigField("topic.field", str, ""),
            ConfigField("partition.field", str, ""),
            ConfigField("offset.field", str, ""),
            ConfigField("timestamp.field", str, ""),
            ConfigField("static.field", str, ""),
            ConfigField("static.value", str, ""),
        )
    )

    def check(self) -> list[str]:
        names = [k for k in self.options_def.fields if k.name.endswith(".field") and self.options[k.name]]
        return (
            []
            if names
            else [
                "set at least one of topic.field, partition.field, offset.field, "
                "timestamp.field, static.field"
            ]
        )

    def apply(self, df: DataFrame) -> DataFrame:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F

        struct = _struct_of(df, self.target, self.where)
        source = F.col(self.target)
        added = {
            "topic.field": F.col("topic"),
            "partition.field": F.col("partition"),
            "offset.field": F.col("offset"),
            "timestamp.field": F.col("timestamp"),
            "static.field": F.lit(self.options["static.value"]),
        }
        fields = [(f.name, source[f.name]) for f in struct.fields]
        for option, column in added.items():
            name = _field_name(self.options[option])
            if name:
                fields = [(n, c) for n, c in fields if n != name] + [(name, column)]
        return df.withColumn(self.target, _rebuild(source, fields))


@register("ReplaceField", "replace-field")
class ReplaceField(Transform):
    """Keep (include), drop (exclude) and rename fields; exclude wins over include, renames apply last."""

    options_def = ConfigDef(
        (
            ConfigField("include", list[str], [], doc="fields to keep (all when empty)"),
            ConfigField("exclude", list[str], [], doc="fields to drop"),
            ConfigField("renames", list[str], [], doc="old:new pairs"),
            ConfigField("whitelist", list[str], [], doc="old name of include"),
            ConfigField("blacklist", list[str], [], doc="old name of exclude"),
        )
    )

    def check(self) -> list[str]:
        bad = [pair for pair in self.options["renames"] if pair.count(":") != 1 or "" in pair.split(":")]
        return [f"option 'renames': expected old:new pairs, got {bad}"] if bad else []

    def apply(self, df: DataFrame) -> DataFrame:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F

        struct = _struct_of(df, self.target, self.where)
        include = set(self.options["include"] or self.options["whitelist"])
        exclude = set(self.options["exclude"] or self.options["blacklist"])
        renames = dict(pair.split(":") for pair in self.options["renames"])
        source = F.col(self.target)
        fields = [
            (renames.get(f.name, f.name), source[f.name])
            for f in struct.fields
            if f.name not in exclude and (not include or f.name in include)
        ]
        return df.withColumn(self.target, _rebuild(source, fields))


def _mask_value(data_type: DataType, replacement: str) -> Column:
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType, NumericType, StringType

    if isinstance(data_type, StringType):
        return F.lit(replacement)
    if isinstance(data_type, NumericType):
        return F.lit(replacement or "0").cast(data_type)
    if isinstance(data_type, BooleanType):
        return F.lit(False)
    return F.lit(None).cast(data_type)


@register("MaskField", "mask-field")
class MaskField(Transform):
    """Replace fields with an empty value (``""``, 0, false) or ``replacement``."""

    options_def = ConfigDef(
        (
            ConfigField("fields", list[str], doc="fields to mask"),
            ConfigField("replacement", str, "", doc="value for string/numeric fields"),
        )
    )

    def apply(self, df: DataFrame) -> DataFrame:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F

        struct = _struct_of(df, self.target, self.where)
        masked = set(self.options["fields"])
        missing = masked - set(struct.fieldNames())
        if missing:
            raise ValueError(f"{self.where}: no field(s) {sorted(missing)} in {struct.simpleString()}")
        source = F.col(self.target)
        fields = [
            (
                f.name,
                _mask_value(f.dataType, self.options["replacement"]) if f.name in masked else source[f.name],
            )
            for f in struct.fields
        ]
        return df.withColumn(self.target, _rebuild(source, fields))


@register("Cast", "cast")
class Cast(Transform):
    """Cast fields (``a:int32,b:string``) or the whole value (``int64``) to Connect primitive types."""

    options_def = ConfigDef((ConfigField("spec", list[str], doc="field:type pairs, or one type"),))

    def check(self) -> list[str]:
        problems = []
        for item in self.options["spec"]:
            type_name = item.rpartition(":")[2]
            if type_name not in CONNECT_TO_SPARK:
                problems.append(
                    f"option 'spec': unknown type {type_name!r} in {item!r} "
                    f"(known: {', '.join(CONNECT_TO_SPARK)})"
                )
        whole = [i for i in self.options["spec"] if ":" not in i]
        if whole and len(self.options["spec"]) > 1:
            problems.append("option 'spec': a whole-value type cannot be mixed with field:type pairs")
        return problems

    def apply(self, df: DataFrame) -> DataFrame:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F

        source = F.col(self.target)
        spec = self.options["spec"]
        if ":" not in spec[0]:
            target = CONNECT_TO_SPARK[spec[0]]
            failed = source.isNotNull() & source.try_cast(target).isNull()
            df = flag_errors(df, failed, F.lit(f"{self.where}: cannot cast {self.target} to {spec[0]}"))
            return df.withColumn(self.target, source.try_cast(target))
        struct = _struct_of(df, self.target, self.where)
        casts = {name: type_name for name, _, type_name in (i.rpartition(":") for i in spec)}
        missing = set(casts) - set(struct.fieldNames())
        if missing:
            raise ValueError(f"{self.where}: no field(s) {sorted(missing)} in {struct.simpleString()}")
        for name, type_name in casts.items():
            field = source[name]
            failed = field.isNotNull() & field.try_cast(CONNECT_TO_SPARK[type_name]).isNull()
            df = flag_errors(df, failed, F.lit(f"{self.where}: cannot cast field {name!r} to {type_name}"))
        fields = [
            (
                f.name,
                source[f.name].try_cast(CONNECT_TO_SPARK[casts[f.name]])
                if f.name in casts
                else source[f.name],
            )
            for f in struct.fields
        ]
        return df.withColumn(self.target, _rebuild(source, fields))


def _flatten(source: Column, struct: StructType, prefix: str, delimiter: str) -> list[tuple[str, Column]]:
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql.types import StructType

    out: list[tuple[str, Column]] = []
    for f in struct.fields:
        name = f"{prefix}{f.name}"
        if isinstance(f.dataType, StructType):
            out.extend(_flatten(source[f.name], f.dataType, f"{name}{delimiter}", delimiter))
        else:
            out.append((name, source[f.name]))
    return out


@register("Flatten", "flatten")
class Flatten(Transform):
    """Nested structs become top-level fields named ``outer<delimiter>inner``; arrays/maps are kept."""

    options_def = ConfigDef((ConfigField("delimiter", str, "."),))

    def apply(self, df: DataFrame) -> DataFrame:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F

        struct = _struct_of(df, self.target, self.where)
        source = F.col(self.target)
        return df.withColumn(
            self.target, _rebuild(source, _flatten(source, struct, "", self.options["delimiter"]))
        )


_UNIX: Final = {"seconds": "seconds", "milliseconds": "millis", "microseconds": "micros"}


@register("TimestampConverter", "timestamp-converter")
class TimestampConverter(Transform):
    """Convert a field (or the whole value) between string, unix epoch, Date and Timestamp."""

    options_def = ConfigDef(
        (
            ConfigField("field", str, "", doc="field to convert; empty: the whole value"),
            ConfigField("target.type", str, choices=("string", "unix", "Date", "Timestamp")),
            ConfigField("format", str, "", doc="Spark datetime pattern for string input/output"),
            ConfigField("unix.precision", str, "milliseconds", choices=tuple(_UNIX)),
        )
    )

    def _to_timestamp(self, column: Column, data_type: DataType) -> Column:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F
        from pyspark.sql.types import DateType, IntegralType, StringType, TimestampType

        if isinstance(data_type, StringType):
            fmt = self.options["format"]
            return F.try_to_timestamp(column, F.lit(fmt)) if fmt else F.try_to_timestamp(column)
        if isinstance(data_type, IntegralType):
            return getattr(F, f"timestamp_{_UNIX[self.options['unix.precision']]}")(column)
        if isinstance(data_type, TimestampType | DateType):
            return column.cast("timestamp")
        raise ValueError(f"{self.where}: cannot convert {data_type.simpleString()} to a timestamp")

    def _from_timestamp(self, ts: Column) -> Column:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F

        target = self.options["target.type"]
        if target == "Timestamp":
            return ts
        if target == "Date":
            return F.to_date(ts)
        if target == "unix":
            return getattr(F, f"unix_{_UNIX[self.options['unix.precision']]}")(ts)
        fmt = self.options["format"]
        return F.date_format(ts, fmt) if fmt else ts.cast("string")

    def apply(self, df: DataFrame) -> DataFrame:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F

        field = self.options["field"]
        source = F.col(self.target)
        if not field:
            column, data_type = source, df.schema[self.target].dataType
        else:
            struct = _struct_of(df, self.target, self.where)
            if field not in struct.fieldNames():
                raise ValueError(f"{self.where}: no field {field!r} in {struct.simpleString()}")
            column, data_type = source[field], struct[field].dataType
        ts = self._to_timestamp(column, data_type)
        what = f"field {field!r}" if field else self.target
        df = flag_errors(
            df, column.isNotNull() & ts.isNull(), F.lit(f"{self.where}: cannot parse {what} as a timestamp")
        )
        converted = self._from_timestamp(ts)
        if not field:
            return df.withColumn(self.target, converted)
        fields = [(f.name, converted if f.name == field else source[f.name]) for f in struct.fields]
        return df.withColumn(self.target, _rebuild(source, fields))


@register("ExtractField", "extract-field")
class ExtractField(Transform):
    """Replace the struct with one of its fields."""

    options_def = ConfigDef((ConfigField("field", str),))

    def apply(self, df: DataFrame) -> DataFrame:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F

        struct = _struct_of(df, self.target, self.where)
        field = self.options["field"]
        if field not in struct.fieldNames():
            raise ValueError(f"{self.where}: no field {field!r} in {struct.simpleString()}")
        return df.withColumn(self.target, F.col(self.target)[field])


@register("HoistField", "hoist-field")
class HoistField(Transform):
    """Wrap the value in a struct with one field."""

    options_def = ConfigDef((ConfigField("field", str),))

    def apply(self, df: DataFrame) -> DataFrame:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F

        source = F.col(self.target)
        return df.withColumn(self.target, _rebuild(source, [(self.options["field"], source)]))


@register("ValueToKey", "value-to-key", keyed=False)
class ValueToKey(Transform):
    """The key becomes a struct of the listed value fields (converters serialise it as JSON)."""

    options_def = ConfigDef((ConfigField("fields", list[str]),))

    def apply(self, df: DataFrame) -> DataFrame:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F

        struct = _struct_of(df, "value", self.where)
        missing = set(self.options["fields"]) - set(struct.fieldNames())
        if missing:
            raise ValueError(f"{self.where}: no field(s) {sorted(missing)} in {struct.simpleString()}")
        source = F.col("value")
        return df.withColumn("key", _rebuild(source, [(n, source[n]) for n in self.options["fields"]]))
