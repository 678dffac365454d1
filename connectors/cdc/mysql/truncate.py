"""``TRUNCATE TABLE`` in the binlog -> Debezium truncate events, as Debezium's MySQL connector does.

MySQL and MariaDB log a TRUNCATE as a statement (a query event, even under ``binlog_format=ROW``),
not as row events; it commits on its own. Debezium's MySQL connector turns a TRUNCATE of a captured
table into a truncate event (``op`` ``t``, no before/after, no key) on the table's topic unless
``skipped.operations`` has ``t`` (its default). Sluice does the same: ``sluice.connectors.cdc.mysql.binlog``
hands the statement's table with its commit event, ``scan`` asks ``decode`` for its records before
closing the window, and this module makes the one record. Its position is ``(file, start of the
query event, 0)``, inside the window the statement ends, so a re-read of the range yields it again
once. The table's columns (the envelope's type) are information_schema's now, mapped like the
snapshot's (``sluice.connectors.cdc.mysql.snapshot.columns``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from sluice.connectors.cdc.envelope import ChangeRecord, envelope
from sluice.connectors.cdc.mysql.changes import COMMIT, BinlogEvent, Change, TableShape, binlog_source
from sluice.connectors.records import OP_TRUNCATE

_NAME: Final = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_TRUNCATE: Final = re.compile(
    rf"^\s*(?:/\*.*?\*/\s*)*TRUNCATE\s+(?:TABLE\s+)?(?P<first>{_NAME})(?:\s*\.\s*(?P<second>{_NAME}))?\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def truncated_table(query: Any, schema: Any) -> tuple[str, str] | None:
    """``(db, table)`` when ``query`` is ``TRUNCATE [TABLE] [db.]name`` (``schema``: the statement's
    default database, text or bytes); else None."""
    text = query.decode("utf-8", "replace") if isinstance(query, bytes) else str(query or "")
    m = _TRUNCATE.match(text)
    if m is None:
        return None
    default = schema.decode("utf-8", "replace") if isinstance(schema, bytes) else str(schema or "")
    if m["second"] is None:
        return default, _unquote(m["first"])
    return _unquote(m["first"]), _unquote(m["second"])


class TruncateDecoder:
    """The truncate event of a statement's commit event, for captured tables (others: nothing).

    ``primary_keys`` maps each captured ``db.table`` to its key columns; ``columns(table)`` gives
    its mapped columns; ``server`` fills ``source.name``.
    """

    def __init__(
        self,
        primary_keys: Mapping[str, Sequence[str]],
        columns: Callable[[str], tuple[Any, ...]],
        *,
        server: str,
    ) -> None:
        self.primary_keys = {t: tuple(k) for t, k in primary_keys.items()}
        self.columns = columns
        self.server = server
        self._shapes: dict[str, TableShape] = {}

    def decode(self, ev: BinlogEvent, gtid: str) -> list[Change]:
        if ev.kind != COMMIT or ev.payload is None:
            return []
        db, table = ev.payload
        partition = f"{db}.{table}"
        keys = self.primary_keys.get(partition)
        if keys is None:
            return []
        shape = self._shapes.get(partition)
        if shape is None:
            shape = self._shapes[partition] = TableShape(partition, db, table, self.columns(partition), keys)
        source = binlog_source(self.server, shape, ev, gtid, 0)
        value = envelope(OP_TRUNCATE, None, None, source, ev.timestamp * 1000)
        record = ChangeRecord(0, None, value, ev.timestamp * 1_000_000)
        return [Change(partition, (ev.file_index, ev.start, 0), record, shape)]


def decoding(
    rows: Callable[[BinlogEvent, str], list[Change]], truncates: TruncateDecoder
) -> Callable[[BinlogEvent, str], list[Change]]:
    """One ``decode`` for ``scan``: row events to ``rows``, a statement's commit to ``truncates``."""
    return lambda ev, gtid: truncates.decode(ev, gtid) if ev.kind == COMMIT else rows(ev, gtid)
