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
    it names, and its commit time (ms, from the log: the same on every re-read)."""

    id: str
    action: str
    tables: tuple[str, ...]
    ts_ms: int


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
    return Signal(sid, kind, tuple(tables), ts_ms)


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
