"""Tasks that act once an interval (a replicator's checkpoints and heartbeats) as sources.

Their one partition's position is the number of intervals since the epoch (wall-clock
milliseconds over the interval): a batch is every round due since the last one (one record set
for all of them: only the latest state counts), and a new task starts with one round.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from sluice.connectors.api import SourceTask
from sluice.connectors.positions import Position


class RoundsTask(SourceTask):
    """A source task of rounds (module docstring): subclasses set ``rounds`` and ``interval_ms``."""

    position_unit = "records"
    #: the task's one partition
    rounds: str = "rounds"

    def __init__(self, config: Mapping[str, Any], task_id: int, interval_ms: int) -> None:
        super().__init__(config, task_id)
        self.interval_ms = interval_ms

    def partitions(self) -> list[str]:
        return [self.rounds]

    def _round(self) -> int:
        return int(time.time() * 1000) // self.interval_ms

    def earliest_positions(self) -> dict[str, Position]:
        return {self.rounds: Position((0,))}  # the first batch is one round, however late it starts

    def latest_positions(self, committed: Mapping[str, Position]) -> dict[str, Position]:
        return {self.rounds: Position((self._round(),))}

    def batch_end(self, partition: str, start: Position, latest: Position, budget: int | None) -> Position:
        return latest  # every round due, as one
