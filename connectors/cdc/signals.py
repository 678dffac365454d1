"""Debezium's signal table: ``signal.data.collection`` names a table whose inserted rows ask the
connector to act — here, to snapshot tables again while streaming (connectors.cdc.ondemand).

The table has Debezium's layout (``id varchar(42) primary key, type varchar(32), data
varchar(2048)``); a user (or a tool written for Debezium) inserts e.g.::

    INSERT INTO shop.debezium_signal VALUES
      ('resnap-1', 'execute-snapshot', '{"data-collections": ["shop.orders"], "type": "incremental"}')

The connector reads the table's inserts from the log like a captured table's, but never sends its
rows to a topic. Because a signal is an event *in the log*, it acts at its place in the stream: the
batch whose log range holds it also starts the new snapshot generation, so the request is committed
with that batch and a crash or restart neither loses nor repeats it.

Understood here:
  * ``execute-snapshot``: ``data-collections`` are names (or Debezium-style regular expressions
    matched against whole names) of captured tables. ``type`` ``incremental`` (the default) and
    ``blocking`` are both run as the incremental, lock-free re-snapshot: a blocking snapshot would
    stop streaming, which a micro-batch source does not need for consistency.
    ``additional-conditions`` (Debezium 2.4+: ``[{"data-collection": "shop.orders", "filter":
    "id > 100"}]``) or ``additional-condition`` (Debezium 2.0-2.3: one filter for every table)
    re-read only the rows that meet the filter: ``sluice connector backfill`` makes the same
    request through the store (connectors.backfills).
  * ``stop-snapshot``: ends the running on-demand snapshot of the named tables (all, when the list
    is empty or absent).
A signal Sluice cannot act on (another type such as ``pause-snapshot`` or ``log``, JSON that does not
parse, a table that is not captured) is logged as a warning naming its id and skipped: one bad row
must not stop the capture of every table.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sluice.connectors.config import ConfigField, FieldError

log = logging.getLogger(__name__)

FIELD_NAME: Final = "signal.data.collection"
COLUMNS: Final = ("id", "type", "data")
EXECUTE: Final = "execute-snapshot"
STOP: Final = "stop-snapshot"
KINDS: Final = ("incremental", "blocking")


def _name_problem(value: Any) -> str | None:
    text = str(value or "")
    if not text:
        return None
    left, dot, right = text.partition(".")
    if not (left and dot and right):
        return f"{text!r} is not a qualified table name (<database or schema>.<table>)"
    return None


def signal_field(example: str) -> ConfigField:
    """The config field (Debezium's key), ``example`` showing the source's name form."""
    return ConfigField(
        FIELD_NAME,
        str,
        "",
        doc=f"a table (e.g. {example}) with columns id, type, data whose inserted rows are signals: "
        "execute-snapshot re-reads tables while streaming (empty: no signals)",
        validator=_name_problem,
    )


def signal_table(config: Mapping[str, Any]) -> str:
    return str(config.get(FIELD_NAME) or "")


def columns_problem(owner: str, table: str, columns: Sequence[str] | None) -> str | None:
    """Why ``table`` (with ``columns``; None: it does not exist) cannot be the signal table."""
    if columns is None:
        return (
            f"{owner}: {FIELD_NAME} table {table!r} does not exist: create it as (id VARCHAR(42) "
            "PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048))"
        )
    missing = [c for c in COLUMNS if c not in {n.lower() for n in columns}]
    if missing:
        return (
            f"{owner}: {FIELD_NAME} table {table!r} lacks column(s) {', '.join(missing)} (it has "
            f"{', '.join(columns)}): a signal table is (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32), "
            "data VARCHAR(2048))"
        )
    return None


def unusable(owner: str, table: str, why: str) -> FieldError:
    return FieldError(FIELD_NAME, f"{owner}: {FIELD_NAME} table {table!r} cannot be used: {why}")


def table_errors(
    owner: str,
    config: Mapping[str, Any],
    columns: Sequence[str] | None,
    primary_key: Sequence[str],
    streaming: bool,
) -> list[FieldError]:
    """What is wrong with the configured signal table (``columns`` None: it does not exist)."""
    table = signal_table(config)
    if not table:
        return []
    if not streaming:
        return [
            unusable(owner, table, "signals are read from the log, and snapshot.mode=initial_only reads none")
        ]
    problem = columns_problem(owner, table, columns)
    if problem:
        return [FieldError(FIELD_NAME, problem)]
    if [k.lower() for k in primary_key] != ["id"]:
        return [unusable(owner, table, f"its primary key is ({', '.join(primary_key)}), not (id)")]
    return []


@dataclass(frozen=True)
class Signal:
    """One understood signal: its id, ``execute-snapshot`` or ``stop-snapshot``, the captured tables
    it names, its commit time (ms, from the log: the same on every re-read), the filter of each
    table that has one, and (made from a backfill request, not a signal row) the request's number."""

    id: str
    action: str
    tables: tuple[str, ...]
    ts_ms: int
    conditions: tuple[tuple[str, str], ...] = ()
    request: int = 0

    def condition(self, table: str) -> str:
        return dict(self.conditions).get(table, "")


def _match(pattern: str, captured: Sequence[str]) -> list[str]:
    if pattern in captured:
        return [pattern]
    try:
        return [t for t in captured if re.fullmatch(pattern, t)]
    except re.error:
        return []


def parse(row: Mapping[str, Any], ts_ms: int, captured: Sequence[str], where: str) -> Signal | None:
    """The signal a signal-table row asks for, or None (after a warning naming its id)."""
    sid = str(row.get("id"))
    kind = str(row.get("type") or "")

    def skip(why: str) -> None:
        log.warning("%s: signal %r (type %r) skipped: %s", where, sid, kind, why)

    if kind not in (EXECUTE, STOP):
        skip(f"only {EXECUTE} and {STOP} are supported")
        return None
    try:
        data = json.loads(str(row.get("data") or "{}"))
    except ValueError as exc:
        skip(f"its data is not JSON ({exc})")
        return None
    if not isinstance(data, dict):
        skip("its data is not a JSON object")
        return None
    snapshot_type = str(data.get("type") or "incremental").lower()
    if snapshot_type not in KINDS:
        skip(f"snapshot type {snapshot_type!r} is not one of {', '.join(KINDS)}")
        return None
    names = data.get("data-collections")
    if names is None and kind == STOP:
        names = []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        skip('"data-collections" must be a list of table names')
        return None
    if kind == EXECUTE and not names:
        skip('"data-collections" names no table')
        return None
    tables: list[str] = []
    for name in names:
        found = _match(name, captured)
        if not found:
            skip(f"{name!r} is not a captured table (captured: {', '.join(captured) or 'none'})")
            return None
        tables += [t for t in found if t not in tables]
    if kind == STOP and not names:
        tables = list(captured)
    conditions = _conditions(data, tables)
    if isinstance(conditions, str):
        skip(conditions)
        return None
    return Signal(sid, kind, tuple(tables), ts_ms, conditions)


def _conditions(data: Mapping[str, Any], tables: Sequence[str]) -> tuple[tuple[str, str], ...] | str:
    """Each table's filter from Debezium's ``additional-conditions`` (or the older single
    ``additional-condition``), or why they cannot be used."""
    single = data.get("additional-condition")
    if single is not None and not isinstance(single, str):
        return '"additional-condition" must be a string'
    found = {t: single for t in tables} if single else {}
    listed = data.get("additional-conditions") or []
    if not isinstance(listed, list):
        return '"additional-conditions" must be a list of {"data-collection", "filter"} objects'
    for item in listed:
        name = item.get("data-collection") if isinstance(item, dict) else None
        text = item.get("filter") if isinstance(item, dict) else None
        if not isinstance(name, str) or not isinstance(text, str):
            return 'each of "additional-conditions" needs "data-collection" and "filter" strings'
        matched = _match(name, tables)
        if not matched:
            return f"additional condition for {name!r}, which the signal does not name"
        found.update({t: text for t in matched if text.strip()})
    return tuple(sorted(found.items()))


def signals_in(
    inserts: Iterable[tuple[Mapping[str, Any], int]], captured: Sequence[str], where: str
) -> list[Signal]:
    """The understood signals among inserted signal rows ``(row, commit ts_ms)``, in log order."""
    out = []
    for row, ts_ms in inserts:
        signal = parse(row, ts_ms, captured, where)
        if signal is not None:
            out.append(signal)
    return out
