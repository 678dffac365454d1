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
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from sluice.connectors.config import ConfigDef, ConfigField
from sluice.connectors.record_tables import (
    child,
    column,
    field_names,
    flag,
    headers_with,
    keep,
    replaced,
    struct_where,
)
from sluice.connectors.records import OP_HEADER, OP_TRUNCATE, VALUE_SCHEMA_HEADER
from sluice.connectors.transforms.base import ArrowTransform, RecordShape, register

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

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
class ExtractNewRecordState(ArrowTransform):
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

    def reshape(self, shape: RecordShape) -> RecordShape:
        """The row's own columns, and the envelope fields ``add.fields`` adds (not in the source's
        table: not compared), ``__deleted`` too when deletes are rewritten."""
        prefix = self.options["add.fields.prefix"]
        added = [prefix + name.replace(".", "_") for name in self.options["add.fields"]]
        if self._modes()[0] == "rewrite":
            added.append(f"{prefix}deleted")
        return shape.added(*added)

    def _added(self, value: pa.StructArray) -> list[tuple[str, pa.Array]]:
        """(name, values) of each ``add.fields`` entry."""
        source = child(value, "source") if "source" in field_names(value) else None
        out = []
        for name in self.options["add.fields"]:
            field = name[len("source.") :] if name.startswith("source.") else name
            outer = _envelope_field(name) != "source"
            holder = value if outer else source
            if holder is None or field not in field_names(holder):
                raise ValueError(f"{self.where}: add.fields entry {name!r} is not an envelope field")
            out.append((self.options["add.fields.prefix"] + name.replace(".", "_"), child(holder, field)))
        return out

    def apply(self, records: pa.Table) -> pa.Table:
        value = column(records, "value")
        if not isinstance(value, pa.StructArray) or not {"op", "after"} <= set(field_names(value)):
            return records
        mode, drop_tombstones = self._modes()
        op = child(value, "op")
        tombstone = pc.is_null(value)
        is_delete = pc.fill_null(pc.equal(op, "d"), False)
        is_truncate = pc.fill_null(pc.equal(op, OP_TRUNCATE), False)
        keeps = pa.repeat(pa.scalar(True), records.num_rows)
        if drop_tombstones:
            keeps = pc.invert(tombstone)
        if mode == "drop":
            keeps = pc.and_(keeps, pc.or_(tombstone, pc.invert(is_delete)))
        if self.options["drop.truncates"]:
            keeps = pc.and_(keeps, pc.or_(tombstone, pc.invert(is_truncate)))
        extra = self._added(value)
        if mode == "rewrite":
            deleted = pc.if_else(is_delete, "true", "false")
            extra.append((f"{self.options['add.fields.prefix']}deleted", deleted))
        # A value without ``op`` in a batch typed as change events belongs to another topic's kind of
        # record (one sink batch reads several topics). Debezium's transform passes such a record
        # unchanged; one value type per batch cannot, and dropping it would lose it silently.
        records = flag(
            records,
            pc.and_(pc.invert(tombstone), pc.is_null(op)),
            f"{self.where}: the record is not a change event (its value has no 'op'), but its sink "
            "batch holds change events of other topics: give its topic a sink of its own",
        )
        after = child(value, "after")
        row = [(name, child(after, name)) for name in field_names(after)] + extra
        if mode == "rewrite":
            before = child(value, "before")
            old = [(name, child(before, name)) for name in field_names(before)] + extra
            row = [(n, pc.if_else(is_delete, o, a)) for (n, a), (_, o) in zip(row, old, strict=True)]
        gone = pc.or_(pc.or_(tombstone, is_truncate), pc.and_(is_delete, pa.scalar(mode != "rewrite")))
        records = replaced(records, "value", struct_where(row, gone))
        if not self.options["drop.truncates"]:  # a truncate passed on is marked for the sink
            marker = pc.if_else(
                pc.and_(pc.invert(tombstone), is_truncate), OP_TRUNCATE, pa.scalar(None, pa.string())
            )
            headers = column(records, "headers")
            marked = headers_with(headers, dropped=[OP_HEADER], appended=[(OP_HEADER, marker)])
            records = replaced(records, "headers", marked)
        return _own_row_types(keep(records, keeps), [(n, v.type) for n, v in extra])


def _own_row_types(records: pa.Table, extra: list[tuple[str, pa.DataType]]) -> pa.Table:
    """Each record's own-schema header (a mixed-topic sink batch, connectors.converters) becomes the
    row type it has once unwrapped, ``extra``'s fields added."""
    headers = column(records, "headers")
    own = pc.map_lookup(headers, VALUE_SCHEMA_HEADER, "first")
    owns = pc.unique(own.drop_null())
    if not len(owns):
        return records
    texts = owns.to_pylist()
    row_types = [_row_type_json(text, extra) for text in texts]
    if all(row is None for row in row_types):
        return records
    renamed = [text if row is None else row for text, row in zip(texts, row_types, strict=True)]
    rows = pa.array(renamed, pa.string()).take(pc.index_in(own, value_set=owns))
    made = headers_with(headers, dropped=[VALUE_SCHEMA_HEADER], appended=[(VALUE_SCHEMA_HEADER, rows)])
    return replaced(records, "headers", made)


def _row_type_json(own: str, extra: list[tuple[str, pa.DataType]]) -> str | None:
    """The row type (Spark JSON, as the json converter writes a record's own type) a record of own
    type ``own`` has once unwrapped, its ``after``'s fields then ``extra``'s; None when ``own`` is
    not a change event's type."""
    # pyspark's types only (no JVM): the own-type header is written in Spark's JSON of types
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    envelope = StructType.fromJson(json.loads(own))
    if "after" not in envelope.fieldNames():
        return None
    row = envelope["after"].dataType
    assert isinstance(row, StructType)
    return StructType([*row.fields, *[StructField(n, from_arrow_type(t), True) for n, t in extra]]).json()
