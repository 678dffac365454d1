"""A batch's records as OpenSearch bulk actions, and the NDJSON body of a ``_bulk`` request.

One action per record, in record order (topic, queue, offset), so a key's writes reach OpenSearch
in the order they were made (a bulk request applies the items of one shard in order, and a
document id always lives in one shard):

* a value -> ``index`` (``write.method=insert``: the record replaces the document) or ``update``
  with ``doc_as_upsert`` (``upsert``: its fields are merged into the document, which is created
  when missing);
* a null value (tombstone) -> ``delete`` with ``behavior.on.null.values=delete``, nothing with
  ``ignore``, a bad record with ``fail``.

The document id is the record key (a string or number as it is; a struct of one field that
field's value, of several its JSON) or, with ``key.ignore``, ``<topic>+<queue>+<offset>``: either
way a re-run batch writes the same ids, so it overwrites what its first run wrote.
Documents are JSON objects: struct and map values as Spark's ``to_json`` writes them (nulls kept,
so an upsert clears a field the record clears), string or binary values when they hold a JSON
object. Anything else cannot be a document (``Invalid``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import pyarrow as pa

INDEX: Final = "index"
UPDATE: Final = "update"
DELETE: Final = "delete"


@dataclass(frozen=True)
class WriteRules:
    """How records become actions (the parsed keys of connectors.opensearch.config)."""

    key_ignore: bool = False
    write_method: str = "insert"
    null_values: str = "fail"
    index_map: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Action:
    """One bulk item and the record it came from."""

    op: str
    index: str
    doc_id: str
    source: str | None  # the document's JSON text (index, update); None for delete
    topic: str | None
    partition: str
    offset: int

    def where(self) -> str:
        """How errors name the record: ``topic 't' queue 'broker-a:1' offset 7``."""
        topic = f"topic {self.topic!r} " if self.topic else ""
        return f"{topic}queue {self.partition!r} offset {self.offset}"


@dataclass(frozen=True)
class Invalid:
    """A record that cannot be an action, and why (never its content)."""

    topic: str | None
    partition: str
    offset: int
    reason: str


def _document_texts(values: pa.Array) -> tuple[list[str | None], str | None]:
    """Each value's document JSON (None: null value, or not a document), and what a non-null
    value that is no document is (None when all are)."""
    import pyarrow as pa

    from sluice.connectors.spark_json import json_values

    kind = values.type
    if pa.types.is_struct(kind) or pa.types.is_map(kind):
        return json_values(values, keep_nulls=True).to_pylist(), None
    if pa.types.is_null(kind):
        return [None] * len(values), None
    textual = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary)
    if not any(check(kind) for check in textual):
        return [None] * len(
            values
        ), f"a value of type {kind} is not a document (a struct, a map or JSON text)"
    texts: list[str | None] = []
    for raw in values.to_pylist():
        if raw is None:
            texts.append(None)
            continue
        try:
            parsed = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            parsed = None
        texts.append(json.dumps(parsed, ensure_ascii=False, separators=(",", ":"))
                     if isinstance(parsed, dict) else None)  # fmt: skip
    return texts, "the value is not a JSON object"


def _key_ids(keys: pa.Array) -> list[str | None]:
    """Document ids from record keys (None: no usable key)."""
    import pyarrow as pa

    from sluice.connectors.spark_json import cast_text, json_values

    kind = keys.type
    if pa.types.is_null(kind):
        return [None] * len(keys)
    if pa.types.is_struct(kind):
        if kind.num_fields == 1:
            only = keys.field(0)
            text = _key_ids(only)
            return [None if k is None else t for k, t in zip(keys.to_pylist(), text, strict=True)]
        return json_values(keys).to_pylist()
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return [None if k is None else k.decode("utf-8", "replace") for k in keys.to_pylist()]
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return keys.to_pylist()
    if pa.types.is_nested(kind):
        return json_values(keys).to_pylist()
    return cast_text(keys).to_pylist()


def build_actions(records: pa.Table, rules: WriteRules) -> tuple[list[Action], list[Invalid], int]:
    """The batch's actions in record order, the records that cannot be one, and how many
    tombstones were ignored (``behavior.on.null.values=ignore``)."""
    from sluice.connectors.opensearch.config import index_for

    order = [("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")]
    ordered = records.sort_by(order)
    values = ordered.column("value").combine_chunks()
    documents, not_document = _document_texts(values)
    value_null = values.is_null().to_pylist()
    topics = ordered.column("topic").to_pylist()
    partitions = ordered.column("partition").to_pylist()
    offsets = ordered.column("offset").to_pylist()
    if rules.key_ignore:
        ids: list[str | None] = [f"{t}+{p}+{o}" for t, p, o in zip(topics, partitions, offsets, strict=True)]
    else:
        ids = _key_ids(ordered.column("key").combine_chunks())
    mapping = rules.index_map or {}
    op = UPDATE if rules.write_method == "upsert" else INDEX
    actions: list[Action] = []
    invalid: list[Invalid] = []
    ignored = 0
    for i, topic in enumerate(topics):
        partition, offset, doc_id = partitions[i], offsets[i], ids[i]
        if value_null[i] and rules.null_values == "ignore":
            ignored += 1
            continue
        reason = None
        if value_null[i] and rules.null_values == "fail":
            reason = "a null value (tombstone) with behavior.on.null.values=fail"
        elif doc_id is None:
            reason = "the record key is null and is the document id (key.ignore=false)"
        elif doc_id == "":
            reason = "the record key is empty and is the document id (key.ignore=false)"
        elif not value_null[i] and documents[i] is None:
            reason = not_document or "the value is not a document"
        if reason is not None:
            invalid.append(Invalid(topic, partition, offset, reason))
            continue
        assert doc_id is not None
        index = index_for(topic or "", mapping)
        if value_null[i]:
            actions.append(Action(DELETE, index, doc_id, None, topic, partition, offset))
        else:
            actions.append(Action(op, index, doc_id, documents[i], topic, partition, offset))
    return actions, invalid, ignored


def bulk_body(actions: Sequence[Action]) -> bytes:
    """The NDJSON body of one ``_bulk`` request: an action line, then (but for deletes) its source
    line (for an update, ``{"doc": …, "doc_as_upsert": true}``); a newline after every line."""
    lines: list[str] = []
    for a in actions:
        meta = json.dumps({a.op: {"_index": a.index, "_id": a.doc_id}}, ensure_ascii=False)
        lines.append(meta)
        if a.op == INDEX:
            lines.append(a.source or "{}")
        elif a.op == UPDATE:
            lines.append(f'{{"doc":{a.source or "{}"},"doc_as_upsert":true}}')
    return ("\n".join(lines) + "\n").encode("utf-8")
