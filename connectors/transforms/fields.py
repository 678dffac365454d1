"""Field transforms on the value (or key) struct: Kafka's InsertField, ReplaceField, MaskField, Cast,
Flatten, TimestampConverter, ExtractField, HoistField and ValueToKey, over a batch's records in
Arrow (connectors.record_tables).

A null value (a tombstone) stays null, as in Kafka. Values a transform cannot convert (a Cast of
"abc" to int32, an unparseable timestamp) are flagged in ``_sluice_error`` rather than turned into
nulls silently, so the runtime can fail naming the record position.
"""

from __future__ import annotations

from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors.config import ConfigDef, ConfigField
from sluice.connectors.record_tables import child, column, field_names, flag, rebuilt, replaced, struct_of
from sluice.connectors.transforms.base import ArrowTransform, RecordShape, register
from sluice.connectors.transforms.values import (
    CONNECT_TYPES,
    INSTANT,
    instant_text,
    parse_instants,
    strftime_pattern,
    try_cast,
)


def _field_name(option: Any) -> str:
    # Kafka allows a "!" (required) or "?" (optional) suffix; Arrow fields are always nullable here.
    return str(option or "").strip().rstrip("!?")


def _fields(struct: pa.StructArray) -> list[tuple[str, pa.Array]]:
    return [(name, child(struct, name)) for name in field_names(struct)]


def _missing(struct: pa.StructArray, names: set[str], where: str) -> None:
    missing = names - set(field_names(struct))
    if missing:
        raise ValueError(f"{where}: no field(s) {sorted(missing)} in {struct.type}")


@register("InsertField", "insert-field")
class InsertField(ArrowTransform):
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

    def apply(self, records: pa.Table) -> pa.Table:
        struct = struct_of(records, self.target, self.where)
        static = pa.repeat(pa.scalar(self.options["static.value"], pa.string()), records.num_rows)
        added = {
            "topic.field": column(records, "topic"),
            "partition.field": column(records, "partition"),
            "offset.field": column(records, "offset"),
            "timestamp.field": column(records, "timestamp"),
            "static.field": static,
        }
        fields = _fields(struct)
        for option, values in added.items():
            name = _field_name(self.options[option])
            if name:
                fields = [(n, c) for n, c in fields if n != name] + [(name, values)]
        return replaced(records, self.target, rebuilt(struct, fields))

    def reshape(self, shape: RecordShape) -> RecordShape:
        if self.target == "key":
            return shape
        names = [
            _field_name(self.options[f.name]) for f in self.options_def.fields if f.name.endswith(".field")
        ]
        return shape.added(*(n for n in names if n))


@register("ReplaceField", "replace-field")
class ReplaceField(ArrowTransform):
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

    def apply(self, records: pa.Table) -> pa.Table:
        struct = struct_of(records, self.target, self.where)
        include = set(self.options["include"] or self.options["whitelist"])
        exclude = set(self.options["exclude"] or self.options["blacklist"])
        renames = dict(pair.split(":") for pair in self.options["renames"])
        fields = [
            (renames.get(name, name), values)
            for name, values in _fields(struct)
            if name not in exclude and (not include or name in include)
        ]
        return replaced(records, self.target, rebuilt(struct, fields))

    def reshape(self, shape: RecordShape) -> RecordShape:
        if self.target == "key":
            return shape
        include = set(self.options["include"] or self.options["whitelist"])
        exclude = set(self.options["exclude"] or self.options["blacklist"])
        renames = dict(pair.split(":") for pair in self.options["renames"])
        return shape.renamed(
            {
                name: None
                if name in exclude or (include and name not in include)
                else renames.get(name, name)
                for name, _ in shape.fields
            }
        )


def _masked(kind: pa.DataType, replacement: str, rows: int) -> pa.Array:
    """What a masked field holds: ``replacement`` (text), it or 0 (numbers), false, or null."""
    if pa.types.is_string(kind):
        return pa.repeat(pa.scalar(replacement, pa.string()), rows)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return pa.repeat(pa.scalar(replacement or "0", pa.string()).cast(kind), rows)
    if pa.types.is_boolean(kind):
        return pa.repeat(pa.scalar(False), rows)
    return pa.nulls(rows, kind)


@register("MaskField", "mask-field")
class MaskField(ArrowTransform):
    """Replace fields with an empty value (``""``, 0, false) or ``replacement``."""

    options_def = ConfigDef(
        (
            ConfigField("fields", list[str], doc="fields to mask"),
            ConfigField("replacement", str, "", doc="value for string/numeric fields"),
        )
    )

    def apply(self, records: pa.Table) -> pa.Table:
        struct = struct_of(records, self.target, self.where)
        masked = set(self.options["fields"])
        _missing(struct, masked, self.where)
        replacement, rows = self.options["replacement"], records.num_rows
        fields = [
            (name, _masked(values.type, replacement, rows) if name in masked else values)
            for name, values in _fields(struct)
        ]
        return replaced(records, self.target, rebuilt(struct, fields))

    def reshape(self, shape: RecordShape) -> RecordShape:
        """A masked field holds nothing of its source column: not compared."""
        if self.target == "key":
            return shape
        masked = set(self.options["fields"])
        return RecordShape(shape.topic, tuple((n, None if n in masked else o) for n, o in shape.fields))


@register("Cast", "cast")
class Cast(ArrowTransform):
    """Cast fields (``a:int32,b:string``) or the whole value (``int64``) to Connect primitive types."""

    options_def = ConfigDef((ConfigField("spec", list[str], doc="field:type pairs, or one type"),))

    def check(self) -> list[str]:
        problems = []
        for item in self.options["spec"]:
            type_name = item.rpartition(":")[2]
            if type_name not in CONNECT_TYPES:
                problems.append(
                    f"option 'spec': unknown type {type_name!r} in {item!r} "
                    f"(known: {', '.join(CONNECT_TYPES)})"
                )
        whole = [i for i in self.options["spec"] if ":" not in i]
        if whole and len(self.options["spec"]) > 1:
            problems.append("option 'spec': a whole-value type cannot be mixed with field:type pairs")
        return problems

    def apply(self, records: pa.Table) -> pa.Table:
        spec = self.options["spec"]
        if ":" not in spec[0]:
            values = column(records, self.target)
            cast = try_cast(values, CONNECT_TYPES[spec[0]])
            failed = pc.and_(pc.is_valid(values), pc.is_null(cast))
            records = flag(records, failed, f"{self.where}: cannot cast {self.target} to {spec[0]}")
            return replaced(records, self.target, cast)
        struct = struct_of(records, self.target, self.where)
        casts = {name: type_name for name, _, type_name in (i.rpartition(":") for i in spec)}
        _missing(struct, set(casts), self.where)
        fields = []
        for name, values in _fields(struct):
            if name in casts:
                cast = try_cast(values, CONNECT_TYPES[casts[name]])
                failed = pc.and_(pc.is_valid(values), pc.is_null(cast))
                records = flag(records, failed, f"{self.where}: cannot cast field {name!r} to {casts[name]}")
                values = cast
            fields.append((name, values))
        return replaced(records, self.target, rebuilt(struct, fields))

    def reshape(self, shape: RecordShape) -> RecordShape:
        """The same fields: a cast value is compared with its source column by value."""
        return shape


def _flatten(struct: pa.StructArray, prefix: str, delimiter: str) -> list[tuple[str, pa.Array]]:
    out: list[tuple[str, pa.Array]] = []
    for name, values in _fields(struct):
        if isinstance(values, pa.StructArray):
            out.extend(_flatten(values, f"{prefix}{name}{delimiter}", delimiter))
        else:
            out.append((f"{prefix}{name}", values))
    return out


@register("Flatten", "flatten")
class Flatten(ArrowTransform):
    """Nested structs become top-level fields named ``outer<delimiter>inner``; arrays/maps are kept."""

    options_def = ConfigDef((ConfigField("delimiter", str, "."),))

    def apply(self, records: pa.Table) -> pa.Table:
        struct = struct_of(records, self.target, self.where)
        return replaced(
            records, self.target, rebuilt(struct, _flatten(struct, "", self.options["delimiter"]))
        )

    def reshape(self, shape: RecordShape) -> RecordShape:
        """The same fields for a table's flat rows (nothing nested to flatten)."""
        return shape


#: unix.precision -> microseconds per unit
_UNIX: Final = {"seconds": 1_000_000, "milliseconds": 1_000, "microseconds": 1}


@register("TimestampConverter", "timestamp-converter")
class TimestampConverter(ArrowTransform):
    """Convert a field (or the whole value) between string, unix epoch, Date and Timestamp."""

    options_def = ConfigDef(
        (
            ConfigField("field", str, "", doc="field to convert; empty: the whole value"),
            ConfigField("target.type", str, choices=("string", "unix", "Date", "Timestamp")),
            ConfigField("format", str, "", doc="Java datetime pattern (Kafka's) for string input/output"),
            ConfigField("unix.precision", str, "milliseconds", choices=tuple(_UNIX)),
        )
    )

    def check(self) -> list[str]:
        try:
            strftime_pattern(self.options["format"])
        except ValueError as exc:
            return [f"option 'format': {exc}"]
        return []

    def _instants(self, values: pa.Array) -> pa.Array:
        kind = values.type
        if pa.types.is_string(kind):
            return parse_instants(values, self.options["format"])
        if pa.types.is_integer(kind):
            micros = pc.multiply_checked(values.cast(pa.int64()), _UNIX[self.options["unix.precision"]])
            return micros.cast(pa.timestamp("us")).cast(INSTANT)
        if pa.types.is_timestamp(kind):
            return values.cast(pa.timestamp("us", tz=kind.tz)).cast(INSTANT)
        if pa.types.is_date(kind):
            return values.cast(pa.timestamp("us")).cast(INSTANT)
        raise ValueError(f"{self.where}: cannot convert {kind} to a timestamp")

    def _converted(self, instants: pa.Array) -> pa.Array:
        target = self.options["target.type"]
        if target == "Timestamp":
            return instants
        if target == "Date":
            return instants.cast(pa.date32())
        if target == "unix":
            micros = instants.cast(pa.int64())
            return pc.floor(pc.divide(micros.cast(pa.float64()), _UNIX[self.options["unix.precision"]])).cast(
                pa.int64()
            )
        return instant_text(instants, self.options["format"])

    def apply(self, records: pa.Table) -> pa.Table:
        field = self.options["field"]
        struct = None
        if not field:
            values = column(records, self.target)
        else:
            struct = struct_of(records, self.target, self.where)
            if field not in field_names(struct):
                raise ValueError(f"{self.where}: no field {field!r} in {struct.type}")
            values = child(struct, field)
        instants = self._instants(values)
        what = f"field {field!r}" if field else self.target
        failed = pc.and_(pc.is_valid(values), pc.is_null(instants))
        records = flag(records, failed, f"{self.where}: cannot parse {what} as a timestamp")
        converted = self._converted(instants)
        if struct is None:
            return replaced(records, self.target, converted)
        fields = [(n, converted if n == field else v) for n, v in _fields(struct)]
        return replaced(records, self.target, rebuilt(struct, fields))


@register("ExtractField", "extract-field")
class ExtractField(ArrowTransform):
    """Replace the struct with one of its fields."""

    options_def = ConfigDef((ConfigField("field", str),))

    def apply(self, records: pa.Table) -> pa.Table:
        struct = struct_of(records, self.target, self.where)
        field = self.options["field"]
        if field not in field_names(struct):
            raise ValueError(f"{self.where}: no field {field!r} in {struct.type}")
        return replaced(records, self.target, child(struct, field))


@register("HoistField", "hoist-field")
class HoistField(ArrowTransform):
    """Wrap the value in a struct with one field."""

    options_def = ConfigDef((ConfigField("field", str),))

    def apply(self, records: pa.Table) -> pa.Table:
        values = column(records, self.target)
        return replaced(records, self.target, rebuilt(values, [(self.options["field"], values)]))


@register("ValueToKey", "value-to-key", keyed=False)
class ValueToKey(ArrowTransform):
    """The key becomes a struct of the listed value fields (converters serialise it as JSON)."""

    options_def = ConfigDef((ConfigField("fields", list[str]),))

    def apply(self, records: pa.Table) -> pa.Table:
        struct = struct_of(records, "value", self.where)
        _missing(struct, set(self.options["fields"]), self.where)
        key = rebuilt(struct, [(n, child(struct, n)) for n in self.options["fields"]])
        return replaced(records, "key", key)

    def reshape(self, shape: RecordShape) -> RecordShape:
        """The key is set from the value: the value's fields are unchanged."""
        return shape
