"""Helpers of the store tests."""

from __future__ import annotations

from collections.abc import Mapping

from sluice.connectors.positions import PartitionKey, Position


def offsets(positions: Mapping[PartitionKey, Position]) -> dict[str, int]:
    """Offset positions as plain ``{"topic/queue": n}`` for readable assertions."""
    return {str(k): p.offset for k, p in positions.items()}
