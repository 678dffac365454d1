"""Connector offsets as Kafka Connect's REST API shows them, read and changed through the workflow.

The workflow's ``offsets`` / ``alter_offsets`` / ``reset_offsets`` updates run these short activities
against the offset store, so a client (REST server, CLI, a service) needs only Temporal, never the
database. One entry per stored partition::

    {"partition": {"partition": "<source partition or queue>", "topic": "<topic, sinks only>"},
     "offset": {"position": {"v": 1, "key": [...], "meta": {...}}}}

``position`` is :meth:`sluice.connectors.positions.Position.to_json`, so what ``offsets`` returns is
exactly what ``alter_offsets`` accepts (a bare integer is accepted too, for offset positions); an
entry whose ``offset`` is ``null`` forgets that partition, as in Kafka Connect. Parsing lives here,
as pure functions, because the workflow parses nothing a user typed and clients check the same
rules before they send anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from sluice.activities.context import RuntimeContext
from sluice.connectors.positions import PartitionKey, Position, PositionFormatError
from sluice.workflows.types import (
    ALTER_OFFSETS_ACTIVITY,
    OFFSETS_ERROR,
    READ_OFFSETS_ACTIVITY,
    RESET_OFFSETS_ACTIVITY,
    OffsetsChange,
)


class OffsetsFormatError(ValueError):
    """An alter request that is not a list of ``{"partition", "offset"}`` entries; names the entry."""


@dataclass(frozen=True)
class ParsedOffsets:
    """An alter request as the store takes it: positions to set and partitions to forget."""

    positions: dict[PartitionKey | str, Position | int] = field(default_factory=dict)
    clear: list[PartitionKey] = field(default_factory=list)


def offsets_to_json(positions: Mapping[PartitionKey, Position]) -> list[dict[str, Any]]:
    """Stored positions as Kafka Connect's offset entries, sorted by partition."""
    entries: list[dict[str, Any]] = []
    for key in sorted(positions):
        partition = {"partition": key.name, **({"topic": key.topic} if key.topic else {})}
        entries.append({"partition": partition, "offset": {"position": positions[key].to_json()}})
    return entries


def _partition(connector: str, where: str, raw: Any) -> PartitionKey:
    if not isinstance(raw, Mapping):
        raise OffsetsFormatError(
            f"connector {connector}: {where}: 'partition' must be an object, got {raw!r}"
        )
    unknown = sorted(set(raw) - {"partition", "topic"})
    if unknown:
        raise OffsetsFormatError(
            f"connector {connector}: {where}: unknown partition field(s) {unknown}; "
            "expected 'partition' and, for a sink's queue, 'topic'"
        )
    name, topic = raw.get("partition"), raw.get("topic", "")
    if not isinstance(name, str) or not name:
        raise OffsetsFormatError(
            f"connector {connector}: {where}: 'partition.partition' must be a non-empty string"
        )
    if not isinstance(topic, str):
        raise OffsetsFormatError(f"connector {connector}: {where}: 'partition.topic' must be a string")
    return PartitionKey(name, topic)


def _position(connector: str, where: str, raw: Any) -> Position | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or set(raw) != {"position"}:
        raise OffsetsFormatError(
            f"connector {connector}: {where}: 'offset' must be null or {{\"position\": …}}, got {raw!r}"
        )
    try:
        return Position.from_json(raw["position"], where=f"connector {connector}: {where}: offset.position")
    except PositionFormatError as exc:
        raise OffsetsFormatError(str(exc)) from None


def parse_offsets(connector: str, offsets: Any) -> ParsedOffsets:
    """Check an alter request and type it; :class:`OffsetsFormatError` names the bad entry."""
    if not isinstance(offsets, list) or not offsets:
        raise OffsetsFormatError(
            f"connector {connector}: offsets must be a non-empty list of "
            '{"partition": …, "offset": …} entries'
        )
    parsed = ParsedOffsets()
    seen: set[PartitionKey] = set()
    for i, entry in enumerate(offsets):
        where = f"offsets[{i}]"
        if not isinstance(entry, Mapping) or set(entry) != {"partition", "offset"}:
            raise OffsetsFormatError(
                f"connector {connector}: {where} must be an object with exactly 'partition' and 'offset'"
            )
        key = _partition(connector, where, entry["partition"])
        if key in seen:
            raise OffsetsFormatError(f"connector {connector}: {where}: partition {str(key)!r} given twice")
        seen.add(key)
        position = _position(connector, where, entry["offset"])
        if position is None:
            parsed.clear.append(key)
        else:
            parsed.positions[key] = position
    return parsed


class OffsetActivities:
    """The offset activities, sharing the worker's one store (activities/context.py)."""

    def __init__(self, ctx: RuntimeContext) -> None:
        self.ctx = ctx

    @activity.defn(name=READ_OFFSETS_ACTIVITY)
    def read(self, connector: str) -> list[dict[str, Any]]:
        return offsets_to_json(self.ctx.store.committed_positions(connector))

    @activity.defn(name=ALTER_OFFSETS_ACTIVITY)
    def alter(self, change: OffsetsChange) -> None:
        try:
            parsed = parse_offsets(change.connector, change.offsets)
            self.ctx.store.set_positions(change.connector, parsed.positions, clear=parsed.clear)
        except ValueError as exc:  # OffsetsFormatError, or a sink key without a topic
            raise ApplicationError(str(exc), type=OFFSETS_ERROR, non_retryable=True) from None

    @activity.defn(name=RESET_OFFSETS_ACTIVITY)
    def reset(self, connector: str) -> None:
        self.ctx.store.reset_positions(connector)

    def all(self) -> list[Any]:
        """Every activity of this class, for the worker's registration."""
        return [self.read, self.alter, self.reset]
