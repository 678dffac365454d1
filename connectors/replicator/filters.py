"""Which source messages a replicator copies, decided over Arrow columns (no loop per message).

- tags: the ``src.topictags`` expression of the message's topic (``TagA||TagB``; ``*`` every one);
  a message without a tag matches only ``*``, as a RocketMQ subscription does;
- ``filter.properties``: ``p1,p2`` (the message has the property) or ``p1=v1,p2=v2`` (it equals
  the value), joined by ``filter.properties.operator`` (``and``, ``or``);
- loops: a message whose ``REPLICATOR-BORN-SOURCE`` already names the target cluster came from
  there, and is not copied back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import pyarrow as pa

BORN_SOURCE: Final = "REPLICATOR-BORN-SOURCE"
#: as RocketMQ Connect's copies carry it on the wire (connectors.replicator.reads)
BORN_SOURCE_EXTENSION: Final = "connect-ext-" + BORN_SOURCE


@dataclass(frozen=True)
class PropertyFilter:
    """Properties a message must have (value None) or equal, all of them or any (``any_of``)."""

    conditions: tuple[tuple[str, str | None], ...]
    any_of: bool = False


def parse_property_filter(text: str, operator: str) -> PropertyFilter:
    """``filter.properties`` and its operator; raises ValueError naming the bad item."""
    conditions: list[tuple[str, str | None]] = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        if not name.strip():
            raise ValueError(f"{item!r} names no property")
        conditions.append((name.strip(), value.strip() if sep else None))
    if operator not in ("and", "or"):
        raise ValueError(f"operator {operator!r} is not 'and' or 'or'")
    return PropertyFilter(tuple(conditions), any_of=operator == "or")


def copied(
    tags: pa.Array,
    properties: pa.Array,
    *,
    wanted_tags: frozenset[str] | None,
    wanted: PropertyFilter | None,
    target_label: str,
) -> pa.Array:
    """Per message, whether it is copied (module docstring)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(tags)
    keep = pa.array([True] * n, pa.bool_())
    if wanted_tags is not None:
        keep = pc.fill_null(pc.is_in(tags, value_set=pa.array(sorted(wanted_tags), pa.string())), False)
    if wanted is not None and wanted.conditions:
        tests = [_holds(properties, name, value) for name, value in wanted.conditions]
        joined = tests[0]
        for test in tests[1:]:
            joined = pc.or_(joined, test) if wanted.any_of else pc.and_(joined, test)
        keep = pc.and_(keep, joined)
    if target_label.strip("_") and n:
        born = pc.coalesce(
            pc.map_lookup(properties, pa.scalar(BORN_SOURCE_EXTENSION), "first"),
            pc.map_lookup(properties, pa.scalar(BORN_SOURCE), "first"),
        )
        looped = pc.fill_null(pc.match_substring(born, f"{target_label},"), False)
        keep = pc.and_(keep, pc.invert(looped))
    return keep


def _holds(properties: pa.Array, name: str, value: str | None) -> pa.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    from sluice.connectors.record_tables import has_header

    if value is None:
        return has_header(properties, name)
    if not len(properties):
        return pa.array([], pa.bool_())
    return pc.fill_null(pc.equal(pc.map_lookup(properties, pa.scalar(name), "first"), value), False)
