"""What the source and sink runners share, and the shape the task activity drives."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from connectors.model import BatchPlan, DataLossPolicy

if TYPE_CHECKING:
    from activities.context import RuntimeContext
    from connectors.converters import Converter
    from connectors.transforms import Transform


@dataclass(frozen=True)
class TaskSetup:
    """One task's resolved pieces: built once per activity attempt from its (secret-resolved) config."""

    ctx: RuntimeContext
    connector: str
    config: Mapping[str, Any]
    converter: Converter
    chain: list[Transform] = field(default_factory=list)

    @property
    def data_loss(self) -> DataLossPolicy:
        return DataLossPolicy(self.config.get("data.loss", "fail"))

    @property
    def poll_interval_s(self) -> float:
        return int(self.config.get("poll.interval.ms", 1000)) / 1000


class BatchRunner(Protocol):
    """A task's micro-batch loop body, run by the task activity until it is cancelled.

    1. ``ensure_topic`` once per attempt;
    2. ``next_plan``: the recorded, uncommitted plan to re-run, or a new recorded plan, or None;
    3. ``run``: execute exactly that plan and commit it; return the records it covered.
    """

    setup: TaskSetup

    def ensure_topic(self) -> None: ...

    def next_plan(self) -> tuple[BatchPlan | None, bool]: ...

    def run(self, plan: BatchPlan, rerun: bool) -> int: ...
