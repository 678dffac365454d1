"""`sluice connector backfill`: a source connector's backfill requests made, listed and cancelled
(connectors.backfills says what a stored request does).

A request is checked before it is stored, against the source itself, by the connector's own tasks
(``TakesBackfills``): the tables they read, the condition ``--from/--to`` make on a column, and
what the source says of the condition (a table without a primary key, SQL it refuses). So a typo is
one clear error now, not a task that fails later. The CLI, the REST API and the Client all come
through here (the Client in a thread: it waits on the source and the store).

The requests live in the offset store the workers read (activities.store), reached with the
workers' settings (``SLUICE_DATABASE_URL``, ``SLUICE_STORE_SCHEMA``): the workflow has no part in
it, the runtime reads the store before each planning.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol, cast

from sluice.connectors.backfills import Backfill, TableProgress, progress
from sluice.worker.errors import BackfillNotFoundError, BackfillRequestError, ConnectorConfigError

if TYPE_CHECKING:
    from sluice.activities.store import OffsetStore
    from sluice.connectors.api import TakesBackfills
    from sluice.connectors.positions import PartitionKey, Position

Providers = Mapping[str, Callable[[str, str], str]]

#: tables named in an "unknown table" error, at most (a database of hundreds would bury the line)
TABLES_SHOWN: Final = 20
#: seconds to connect to the store: `connector status` shows backfills only if it answers in time
STORE_CONNECT_TIMEOUT_S: Final = 10


class BackfillStore(Protocol):
    """What of :class:`~sluice.activities.store.OffsetStore` this module uses."""

    def add_backfill(self, connector: str, tables: list[str], condition: str) -> Backfill: ...

    def backfills(self, connector: str) -> list[Backfill]: ...

    def cancel_backfills(self, connector: str, request: int | None = None) -> list[int]: ...

    def committed_positions(self, connector: str) -> dict[PartitionKey, Position]: ...

    def connectors(self, *, include_deleted: bool = False) -> dict[str, str]: ...


@dataclass(frozen=True)
class BackfillStatus:
    """A request and how far it got in each of its tables."""

    request: Backfill
    tables: tuple[TableProgress, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            **request_json(self.request),
            "progress": [
                {"table": p.table, "state": p.state, "rows": p.rows, "last_key": p.last_key or None}
                for p in self.tables
            ],
        }


def request_json(request: Backfill) -> dict[str, Any]:
    """A request as the CLI's ``--output json`` and the REST API show it."""
    return {
        "id": request.id,
        "tables": list(request.tables),
        "condition": request.condition,
        "requested_ms": request.requested_ms,
        "cancelled": request.cancelled,
    }


def open_store() -> OffsetStore:
    """The workers' offset store, from the settings. Not migrated here: a client pointed at the
    wrong schema must not make an empty store there, where no worker would read its requests."""
    from sqlalchemy import create_engine  # the store's driver: only the commands that use it

    from sluice.activities.store import OffsetStore
    from sluice.worker.settings import settings

    env = settings()
    engine = create_engine(
        env.database_url, pool_pre_ping=True, connect_args={"connect_timeout": STORE_CONNECT_TIMEOUT_S}
    )
    return OffsetStore(env.database_url, schema=env.store_schema, engine=engine)


@dataclass(frozen=True)
class BackfillAsk:
    """What a user asks to re-read: ``tables`` (none: every table the tasks read) and either the
    rows matching ``where`` (SQL) or ``low <= column < high`` (``column`` "": each table's own)."""

    tables: tuple[str, ...] = ()
    where: str | None = None
    column: str = ""
    low: str | None = None
    high: str | None = None

    def problem(self) -> str | None:
        """Why it cannot be asked of any source (checked before the store or the source is asked)."""
        ranged = self.low is not None or self.high is not None
        if self.where is not None and (ranged or self.column):
            return "give a condition (where) or a range (from/to), not both"
        if self.where is None and not ranged:
            what = "a range needs from, to or both" if self.column else "say what to re-read"
            return f"{what}: a condition (where) or a range of a column (from/to)"
        if self.where is not None and not self.where.strip():
            return "the condition is empty (to re-read every row, write 1=1)"
        return None

    def checked(self, name: str) -> BackfillAsk:
        problem = self.problem()
        if problem:
            raise BackfillRequestError(name, f"connector {name}: {problem}")
        return self


def request_backfill(
    store: BackfillStore,
    name: str,
    config: Mapping[str, str],
    ask: BackfillAsk,
    providers: Providers | None = None,
) -> list[Backfill]:
    """Check a backfill of connector ``name`` (its current ``config``, secrets as references that
    ``providers`` resolve) against its source, then store it. Tables with one condition share one
    request; a range that makes different conditions (a different default column per table) makes
    one request per condition. Raises BackfillRequestError naming what is wrong; nothing is stored
    then."""
    ask.checked(name)
    with _store_errors(store, name):
        known = store.connectors()
    if name not in known:
        raise BackfillRequestError(
            name,
            f"connector {name} is not in the offset store {store!r}: it has not run yet, or "
            "SLUICE_DATABASE_URL and SLUICE_STORE_SCHEMA here are not the workers'",
        )
    planned = planned_requests(name, config, ask, providers)
    return [store.add_backfill(name, list(group), condition) for group, condition in planned]


def planned_requests(
    name: str, config: Mapping[str, str], ask: BackfillAsk, providers: Providers | None = None
) -> list[tuple[tuple[str, ...], str]]:
    """:func:`request_backfill`'s requests, checked, as (tables, condition), before any is stored."""
    ask.checked(name)
    with source_tasks(name, config, providers) as tasks:
        return grouped(name, tasks, ask)


@contextmanager
def source_tasks(
    name: str, config: Mapping[str, str], providers: Providers | None
) -> Iterator[list[TakesBackfills]]:
    """The connector's source tasks, opened from its config as the runtime opens them (a direct
    pipeline's source side), closed after; BackfillRequestError if they cannot take backfills."""
    from sluice.activities.validation import validate_config
    from sluice.connectors.api import SourceConnector, TakesBackfills, open_source_task
    from sluice.connectors.config import ConfigError
    from sluice.connectors.direct import direct_sides, is_direct
    from sluice.connectors.plugins import load_connector_class
    from sluice.connectors.secrets import SecretResolutionError, resolve_secrets

    result = validate_config(name, config, providers)
    if result.errors:
        raise ConnectorConfigError(name, result.errors)
    with ExitStack() as opened:
        tasks: list[TakesBackfills] = []
        for task_id, task_config in enumerate(result.task_configs):
            try:  # what a task's start would fail on too, named as the runtime names it
                raw = {**resolve_secrets(task_config, providers), "name": name}
                if is_direct(raw):
                    raw = direct_sides(raw).source
                cls = load_connector_class(str(raw.get("connector.class") or result.connector_class))
                if not (issubclass(cls, SourceConnector) and issubclass(cls.task_class, TakesBackfills)):
                    raise BackfillRequestError(name, _cannot(name, cls.plugin_name or result.connector_class))
                task = open_source_task(cls, raw, task_id)
            except (ConfigError, SecretResolutionError) as exc:
                raise ConnectorConfigError(name, [str(exc)]) from None
            opened.callback(task.close)
            tasks.append(cast("TakesBackfills", task))
        yield tasks


def _cannot(name: str, plugin: str) -> str:
    able = backfill_connectors()
    which = f"{', '.join(able)} can" if able else "no installed connector can"
    return f"connector {name} ({plugin}) cannot be backfilled: its tasks re-read no table ({which})"


def backfill_connectors() -> list[str]:
    """The built-in connectors whose tasks take backfills, found rather than listed (so the
    refusal stays true as connectors learn it)."""
    from sluice.connectors.api import SourceConnector, TakesBackfills
    from sluice.connectors.plugins import BUILTIN_CONNECTORS, load_connector_class

    able = []
    for plugin in BUILTIN_CONNECTORS:
        try:
            cls = load_connector_class(plugin)
        except Exception:  # noqa: BLE001 - a plugin that cannot load here cannot backfill here
            continue
        if issubclass(cls, SourceConnector) and issubclass(cls.task_class, TakesBackfills):
            able.append(plugin)
    return sorted(able)


def grouped(
    name: str, tasks: Sequence[TakesBackfills], ask: BackfillAsk
) -> list[tuple[tuple[str, ...], str]]:
    """Each table's condition from the task that reads it, checked by that task against the
    source, grouped by condition (the tables named in their order, else all of them sorted);
    every problem found is in the one error."""
    reader = {table: task for task in tasks for table in task.backfill_tables()}
    wanted = list(dict.fromkeys(ask.tables)) or sorted(reader)
    if not reader:
        raise BackfillRequestError(name, f"connector {name} reads no table to backfill")
    unknown = [t for t in wanted if t not in reader]
    if unknown:
        known = sorted(reader)
        more = len(known) - TABLES_SHOWN
        shown = ", ".join(known[:TABLES_SHOWN]) + (f" and {more} more" if more > 0 else "")
        raise BackfillRequestError(
            name, f"connector {name} does not read {', '.join(map(repr, unknown))}; its tables: {shown}"
        )
    problems: list[str] = []
    by_condition: dict[str, list[str]] = {}
    for table in wanted:
        task = reader[table]
        try:
            condition = (
                ask.where
                if ask.where is not None
                else task.backfill_range(table, ask.column, ask.low, ask.high)
            )
        except ValueError as exc:
            problems.append(_about(name, table, str(exc)))
            continue
        problem = task.backfill_problem(table, condition)
        if problem:
            problems.append(_about(name, table, problem))
        else:
            by_condition.setdefault(condition, []).append(table)
    if problems:
        raise BackfillRequestError(name, "; ".join(problems))
    return [(tuple(group), condition) for condition, group in by_condition.items()]


def _about(name: str, table: str, text: str) -> str:
    """A task's objection naming connector and table (the built-in tasks' own words already do)."""
    return text if text.startswith("connector ") else f"connector {name}: table {table}: {text}"


def backfill_statuses(store: BackfillStore, name: str) -> list[BackfillStatus]:
    """The connector's requests, oldest first, each with its tables' progress read from the
    connector's committed positions (its snapshot partitions: connectors.backfills.progress)."""
    with _store_errors(store, name):
        requests = store.backfills(name)
        if not requests:
            return []
        positions = {k.name: v for k, v in store.committed_positions(name).items() if not k.topic}
    return [BackfillStatus(r, tuple(progress(r, positions))) for r in requests]


def cancel_backfill(store: BackfillStore, name: str, request: int | None = None) -> list[int]:
    """Cancel request ``request`` (None: every one not cancelled yet); the ids cancelled now (none
    when it was cancelled before). BackfillNotFoundError for a number the connector never had."""
    with _store_errors(store, name):
        if request is not None and request not in {r.id for r in store.backfills(name)}:
            raise BackfillNotFoundError(name, request)
        return store.cancel_backfills(name, request)


#: PostgreSQL's words for a schema or table that is not there: a store no worker of this version
#: migrated, or not the workers' store at all
_NO_STORE: Final = frozenset({"3F000", "42P01"})


@contextmanager
def _store_errors(store: BackfillStore, name: str) -> Iterator[None]:
    """The offset store's missing tables as one clear error naming the settings that find it."""
    from sqlalchemy.exc import ProgrammingError

    try:
        yield
    except ProgrammingError as exc:
        if getattr(exc.orig, "sqlstate", None) not in _NO_STORE:
            raise
        raise BackfillRequestError(
            name,
            f"connector {name}: the offset store {store!r} has no backfill requests: "
            "SLUICE_DATABASE_URL and SLUICE_STORE_SCHEMA here are not the workers', or no worker of "
            "this version has run on it",
        ) from None
