"""Debezium's ``ExtractNewRecordState``: a change event's value becomes the row after the change.

Accepted as ``io.debezium.transforms.ExtractNewRecordState`` (and ``ExtractNewRecordState``), with
Debezium's options and defaults:

- ``drop.tombstones`` (true): drop the tombstones the source wrote after deletes.
- ``delete.handling.mode`` (drop): a delete event is dropped (``drop``), becomes a tombstone — a
  null value under the same key, which ``jdbc-sink`` with ``delete.enabled=true`` deletes by
  (``none``) — or becomes the old row with ``__deleted=true`` (``rewrite``; others get
  ``__deleted=false``).
- ``delete.tombstone.handling.mode`` (Debezium 2.5+, wins when set): ``tombstone`` (deletes become
  tombstones), ``drop``, ``rewrite``, ``rewrite-with-tombstone``.
- ``add.fields`` / ``add.fields.prefix`` (``__``): envelope fields added to the row: ``op``,
  ``ts_ms``, a ``source`` field by name (``table``, ``lsn``) or as ``source.<name>``.
- ``drop.truncates`` (true; Sluice's key): a truncate event (``op`` ``t``, no before/after) is
  dropped, as Debezium's transform always does. ``false`` passes it on as a record with null key and
  value and the header ``__op=t`` (connectors.cdc.envelope.OP_HEADER), which ``jdbc-sink`` with
  ``truncate.enabled=true`` turns into emptying the table — the replica path for TRUNCATE.

A value that is not an envelope (no ``op``/``after``) passes unchanged. When one sink batch mixes
topics of different tables, each record's own-schema header (``sluice.value.schema``) is rewritten
to its own row type, so the sink writes each table its own columns.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sluice.connectors.config import ConfigDef, ConfigField
from sluice.connectors.converters import HEADER_VALUES_METADATA, VALUE_SCHEMA_HEADER
from sluice.connectors.records import OP_HEADER, OP_TRUNCATE, LeftToSpark, flag_errors, keep_where
from sluice.connectors.transforms.base import Transform, register

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType, StructType

_MODES = {  # delete.tombstone.handling.mode -> (delete.handling.mode, drop.tombstones)
    "tombstone": ("none", True),
    "drop": ("drop", True),
    "rewrite": ("rewrite", True),
    "rewrite-with-tombstone": ("rewrite", False),
    "delete": ("none", True),
}


def _envelope_field(added: str) -> str:
    """The envelope field an ``add.fields`` entry is read from: ``op`` and ``ts_ms`` themselves,
    anything else (``source.lsn``, or a bare ``table``) from ``source``."""
    return added if added in ("op", "ts_ms") else "source"


@register(
    "ExtractNewRecordState",
    "io.debezium.transforms.ExtractNewRecordState",
    "extract-new-record-state",
    keyed=False,
)
class ExtractNewRecordState(Transform):
    options_def = ConfigDef(
        (
            ConfigField("drop.tombstones", bool, True, doc="drop tombstones the source wrote"),
            ConfigField(
                "delete.handling.mode",
                str,
                "drop",
                doc="drop | none | rewrite",
                choices=("drop", "none", "rewrite"),
            ),
            ConfigField(
                "delete.tombstone.handling.mode",
                str,
                "",
                doc="Debezium 2.5+: tombstone | drop | rewrite | rewrite-with-tombstone",
                choices=("", *_MODES),
            ),
            ConfigField("add.fields", list[str], [], doc="envelope fields added to the row"),
            ConfigField("add.fields.prefix", str, "__", doc="prefix of the added fields' names"),
            ConfigField(
                "drop.truncates",
                bool,
                True,
                doc="drop truncate events (Debezium's behaviour); false: pass them on as a null record "
                "with header __op=t (jdbc-sink truncate.enabled empties the table)",
            ),
        )
    )

    def _modes(self) -> tuple[str, bool]:
        combined = self.options["delete.tombstone.handling.mode"]
        if combined:
            return _MODES[combined]
        return self.options["delete.handling.mode"], self.options["drop.tombstones"]

    def value_read(self, value_type: DataType) -> DataType:
        """PrunesValue: of a change event, ``op``, ``after``, ``before`` when deletes are rewritten
        to the old row, and what ``add.fields`` names; any other value is read whole."""
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql.types import StructType

        if not isinstance(value_type, StructType) or not {"op", "after"} <= set(value_type.fieldNames()):
            return value_type
        mode, _ = self._modes()
        read = {"op", "after", *(["before"] if mode == "rewrite" else [])}
        read |= {_envelope_field(name) for name in self.options["add.fields"]}
        return StructType([f for f in value_type.fields if f.name in read])

    def _added(self, value_type: StructType) -> list[tuple[str, Column, Any]]:
        """(name, column, Spark type) of each ``add.fields`` entry."""
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        source = value_type["source"].dataType if "source" in value_type.fieldNames() else StructType()
        assert isinstance(source, StructType)
        out = []
        for name in self.options["add.fields"]:
            field = name[len("source.") :] if name.startswith("source.") else name
            outer = _envelope_field(name) != "source"
            holder = value_type if outer else source
            if field not in holder.fieldNames():
                raise ValueError(f"{self.where}: add.fields entry {name!r} is not an envelope field")
            column = F.col("value")[field] if outer else F.col("value")["source"][field]
            out.append(
                (self.options["add.fields.prefix"] + name.replace(".", "_"), column, holder[field].dataType)
            )
        return out

    def apply(self, df: DataFrame) -> DataFrame:
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F
        from pyspark.sql.types import StringType, StructType

        value_type = df.schema["value"].dataType
        if not isinstance(value_type, StructType) or not {"op", "after"} <= set(value_type.fieldNames()):
            return df
        owns = df.schema["headers"].metadata.get(HEADER_VALUES_METADATA, {}).get(VALUE_SCHEMA_HEADER)
        row_type = value_type["after"].dataType
        assert isinstance(row_type, StructType)
        mode, drop_tombstones = self._modes()
        value = F.col("value")
        tombstone, is_delete = value.isNull(), value["op"] == F.lit("d")
        is_truncate = value["op"] == F.lit(OP_TRUNCATE)
        keep = F.lit(True)
        if drop_tombstones:
            keep = keep & ~tombstone
        if mode == "drop":
            keep = keep & (tombstone | ~is_delete)
        if self.options["drop.truncates"]:
            keep = keep & (tombstone | ~is_truncate)
        added = self._added(value_type)
        extra = list(added)
        if mode == "rewrite":
            deleted = F.when(is_delete, "true").otherwise("false")
            extra.append((f"{self.options['add.fields.prefix']}deleted", deleted, StringType()))

        def row_of(struct: Column) -> Column:
            fields = [struct[f.name].alias(f.name) for f in row_type.fields]
            return F.struct(*fields, *[c.alias(n) for n, c, _ in extra])

        if mode == "rewrite":
            new_value = F.when(is_delete, row_of(value["before"])).otherwise(row_of(value["after"]))
        else:
            new_value = F.when(is_delete, F.lit(None)).otherwise(row_of(value["after"]))
        # A value without ``op`` in a batch typed as change events belongs to another topic's kind of
        # record (one sink batch reads several topics). Debezium's transform passes such a record
        # unchanged; one value type per batch cannot, and dropping it would lose it silently.
        not_an_event = F.lit(
            f"{self.where}: the record is not a change event (its value has no 'op'), but its sink "
            "batch holds change events of other topics: give its topic a sink of its own"
        )
        df = flag_errors(df, value.isNotNull() & value["op"].isNull(), not_an_event)
        out = keep_where(df, keep)
        if not self.options["drop.truncates"]:  # marked before ``value`` loses its ``op``
            marker = F.create_map(F.lit(OP_HEADER), F.lit(OP_TRUNCATE))
            marked = F.map_concat(F.map_filter(F.col("headers"), lambda k, _: k != F.lit(OP_HEADER)), marker)
            out = out.withColumn(
                "headers", F.when(~tombstone & is_truncate, marked).otherwise(F.col("headers"))
            )
        out = out.withColumn("value", F.when(tombstone | is_truncate, F.lit(None)).otherwise(new_value))
        return self._own_headers(out, [(n, t) for n, _, t in extra], owns)

    def apply_arrow(self, records: pa.Table) -> pa.Table:
        """TransformsArrow: ``apply`` without ``add.fields``, with deletes dropped or made
        tombstones and truncates dropped (the CDC replica's options and Debezium's defaults);
        anything else, or a value that is not a change event, is ``apply``'s.
        """
        # pyarrow: config validation imports this module (via connectors.plugins)
        import pyarrow as pa
        import pyarrow.compute as pc

        value = records.column("value").combine_chunks()
        kind = value.type
        if not pa.types.is_struct(kind) or not {"op", "after"} <= {f.name for f in kind}:
            return records
        mode, drop_tombstones = self._modes()
        if self.options["add.fields"] or mode == "rewrite" or not self.options["drop.truncates"]:
            raise LeftToSpark(f"{self.where}: its options are applied in Spark")
        op = pc.struct_field(value, "op")
        tombstone = pc.is_null(value)
        if pc.any(pc.and_(pc.invert(tombstone), pc.is_null(op))).as_py():  # apply flags them
            raise LeftToSpark(f"{self.where}: a record's value is not a change event")
        is_delete = pc.fill_null(pc.equal(op, "d"), False)
        is_truncate = pc.fill_null(pc.equal(op, OP_TRUNCATE), False)
        keep = pc.invert(pc.and_(pc.invert(tombstone), is_truncate))
        if drop_tombstones:
            keep = pc.and_(keep, pc.invert(tombstone))
        if mode == "drop":
            keep = pc.and_(keep, pc.or_(tombstone, pc.invert(is_delete)))
        after = pc.struct_field(value, "after")
        row = pa.StructArray.from_arrays(
            after.flatten(), fields=list(after.type), mask=pc.or_(pc.or_(tombstone, is_delete), is_truncate)
        )
        column = records.schema.get_field_index("value")
        records = records.set_column(column, pa.field("value", row.type), row)
        return _own_row_types(records).filter(keep)

    def _own_headers(self, df: DataFrame, extra: list[tuple[str, Any]], owns: list[str] | None) -> DataFrame:
        """Each record's own-schema header (a mixed-topic sink batch) becomes its own row type.

        ``owns``: the header's values, as the json converter lists them in the ``headers`` column's
        metadata (HEADER_VALUES_METADATA); None when nothing listed them (another converter, or a
        transform before this one rebuilt the headers), and then one Spark job finds them.
        """
        # pyspark: config validation imports this module (via connectors.plugins)
        from pyspark.sql import functions as F

        header = F.col("headers")[VALUE_SCHEMA_HEADER]
        if owns is None:
            owns = [r[0] for r in df.select(header).where(header.isNotNull()).distinct().collect()]
        if not owns:
            return df
        mapping: list[Column] = []
        for own in owns:
            row = _row_type_json(own, extra)
            if row is not None:
                mapping += [F.lit(own), F.lit(row)]
        if not mapping:
            return df
        renamed = F.coalesce(F.create_map(*mapping)[header], header)
        headers = F.when(header.isNull(), F.col("headers")).otherwise(
            F.map_concat(
                F.map_filter(F.col("headers"), lambda k, _: k != F.lit(VALUE_SCHEMA_HEADER)),
                F.create_map(F.lit(VALUE_SCHEMA_HEADER), renamed),
            )
        )
        return df.withColumn("headers", headers)


def _own_row_types(records: pa.Table) -> pa.Table:
    """``_own_headers`` in Arrow: each record's own-schema header names its own row type."""
    # pyarrow: config validation imports this module (via connectors.plugins)
    import pyarrow as pa
    import pyarrow.compute as pc

    from sluice.connectors.arrow_records import headers_with

    headers = records.column("headers").combine_chunks()
    own = pc.map_lookup(headers, VALUE_SCHEMA_HEADER, "first")
    owns = pc.unique(own.drop_null())
    if not len(owns):
        return records
    texts = owns.to_pylist()
    row_types = [_row_type_json(text, []) for text in texts]
    if all(row is None for row in row_types):
        return records
    renamed = [text if row is None else row for text, row in zip(texts, row_types, strict=True)]
    rows = pa.array(renamed, pa.string()).take(pc.index_in(own, value_set=owns))
    column = records.schema.get_field_index("headers")
    made = headers_with(headers, dropped=[VALUE_SCHEMA_HEADER], appended=[(VALUE_SCHEMA_HEADER, rows)])
    return records.set_column(column, records.schema.field(column), made)


def _row_type_json(own: str, extra: list[tuple[str, Any]]) -> str | None:
    """The row type (Spark JSON) a record of own type ``own`` has once unwrapped, its ``after``'s
    fields then ``extra``'s; None when ``own`` is not a change event's type."""
    # pyspark: config validation imports this module (via connectors.plugins)
    from pyspark.sql.types import StructField, StructType

    envelope = StructType.fromJson(json.loads(own))
    if "after" not in envelope.fieldNames():
        return None
    row = envelope["after"].dataType
    assert isinstance(row, StructType)
    return StructType([*row.fields, *[StructField(n, t, True) for n, t in extra]]).json()
