"""A source connector whose tasks take backfills, with no database: what worker.backfills checks a
request with (the tables a task reads, the condition of a range, the source's objections), and a
store of requests in memory. Loaded by its path (``connector.class``), as a third-party plugin is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Final

from sluice.connectors.api import SourceConnector, SourceTask, split_round_robin
from sluice.connectors.backfills import Backfill, range_condition
from sluice.connectors.config import ConfigDef, ConfigField
from sluice.connectors.model import PartitionRange
from sluice.connectors.positions import PartitionKey, Position
from sluice.connectors.source_reads import SourceRead

CLASS: Final = "tests.worker.backfill_fakes:FakeBackfillConnector"
#: each table's default column for --from/--to; a table not here has none
DEFAULT_COLUMNS: Final = {
    "shop.orders": "created_at",
    "shop.items": "created_at",
    "shop.events": "id",
    "shop.log": "ts",
}
#: tables the fake source says have no primary key
NO_KEY: Final = frozenset({"shop.log"})


class FakeBackfillTask(SourceTask):
    position_unit = "records"
    #: every task opened (and whether it was closed), newest last
    opened: ClassVar[list[FakeBackfillTask]] = []

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        super().__init__(config, task_id)
        self.tables = list(config.get("assigned.tables") or [])
        self.closed = False
        self.opened.append(self)

    def partitions(self) -> list[str]:
        return [f"snapshot:{t}" for t in self.tables]

    def latest_positions(self, committed: Mapping[str, Position]) -> dict[str, Position]:
        return {}

    def read(self, ranges: Sequence[PartitionRange]) -> SourceRead:
        return SourceRead()

    def close(self) -> None:
        self.closed = True

    def take_backfills(self, requests: Sequence[Backfill]) -> None:
        raise AssertionError("only the runtime hands a task its requests")

    def backfill_tables(self) -> list[str]:
        return list(self.tables)

    def backfill_range(self, table: str, column: str, low: str | None, high: str | None) -> str:
        chosen = column or DEFAULT_COLUMNS.get(table)
        if not chosen:
            raise ValueError("it has no timestamp, incrementing or one-column key column: name one (column)")
        return range_condition(chosen, low, high, mysql=False)

    def backfill_problem(self, table: str, condition: str) -> str | None:
        if table in NO_KEY:
            return "it has no primary key, so it cannot be read in key chunks"
        if "((" in condition:  # as the built-in tasks say it: naming connector and table
            return f"connector {self.name!r} table {table!r}: the condition {condition!r} cannot be used"
        return None


class FakeBackfillConnector(SourceConnector):
    plugin_name = "fake-backfill-source"
    task_class = FakeBackfillTask
    config_def = ConfigDef(
        (
            ConfigField("tables", list[str], []),
            ConfigField("assigned.tables", list[str], [], doc="set by task_configs"),
        )
    )

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        tables = [t for t in str(config.get("tables") or "").split(",") if t]
        return [{**config, "assigned.tables": ",".join(g)} for g in split_round_robin(tables, max_tasks)]


def config(*tables: str, tasks: int = 1, **extra: str) -> dict[str, str]:
    return {
        "connector.class": CLASS,
        "topic": "t",
        "tables": ",".join(tables),
        "tasks.max": str(tasks),
        **extra,
    }


@dataclass
class MemoryStore:
    """The offset store's backfill calls (worker.backfills.BackfillStore), in memory."""

    registered: set[str] = field(default_factory=set)
    requests: dict[str, list[Backfill]] = field(default_factory=dict)
    positions: dict[PartitionKey, Position] = field(default_factory=dict)

    def connectors(self, *, include_deleted: bool = False) -> dict[str, str]:
        return {name: "source" for name in sorted(self.registered)}

    def add_backfill(self, connector: str, tables: list[str], condition: str) -> Backfill:
        number = 1 + sum(len(r) for r in self.requests.values())
        request = Backfill(number, tuple(tables), condition, 1_700_000_000_000 + number)
        self.requests.setdefault(connector, []).append(request)
        return request

    def backfills(self, connector: str) -> list[Backfill]:
        return list(self.requests.get(connector, []))

    def cancel_backfills(self, connector: str, request: int | None = None) -> list[int]:
        mine = self.requests.get(connector, [])
        now = [r.id for r in mine if not r.cancelled and request in (None, r.id)]
        self.requests[connector] = [replace(r, cancelled=True) if r.id in now else r for r in mine]
        return now

    def committed_positions(self, connector: str) -> dict[PartitionKey, Position]:
        return dict(self.positions)

    def __repr__(self) -> str:
        return "MemoryStore()"
