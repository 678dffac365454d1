"""pgoutput messages -> Debezium change records, transaction by transaction, with positions.

Positions: every record of a transaction gets ``(end_lsn, seq)`` — the end of the transaction's
commit record and the record's index within the transaction (over every captured table, so a
multi-table transaction keeps its order). Commit records follow each other in the WAL, so these
keys order records in commit order, and "the transaction ending at ``E`` is done" is the position
``(E + 1, 0)``. Only whole transactions are ever assembled (pgoutput emits a transaction at its
commit), so a batch always ends on a transaction boundary.

Debezium's rules, followed here: an UPDATE that changes the primary key becomes a delete of the
old key (and its tombstone) and a create of the new one, so a keyed sink does not keep the old
row; ``before`` holds the old row under ``REPLICA IDENTITY FULL``, the old key (other columns null)
on deletes and key-changing updates under ``DEFAULT``, and is null on other updates (PostgreSQL
does not log the old row then). A TOASTed value an UPDATE left unchanged is not in the WAL: it is
taken from the old row under ``FULL``, else it becomes Debezium's placeholder
``__debezium_unavailable_value`` (text and bytes columns; others null).

A TRUNCATE becomes one truncate event (``op`` ``t``, ``before``/``after`` null, no key) per
truncated captured table, in the order pgoutput lists them (a ``CASCADE`` lists the cascaded tables
too), at its place in the transaction like any other record — so its position is exact and a
re-read yields it once, as for a row change. Whether it is sent is ``skipped.operations``'s
business (connectors.cdc.operations: Debezium skips truncates by default).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from sluice.connectors.cdc.envelope import (
    OP_CREATE,
    OP_DELETE,
    OP_TRUNCATE,
    OP_UPDATE,
    ChangeRecord,
    envelope,
)
from sluice.connectors.cdc.postgres import pgoutput as pg
from sluice.connectors.cdc.postgres.values import mapped_column, parse_value
from sluice.connectors.jdbc.types import MappedColumn

UNAVAILABLE: Final = "__debezium_unavailable_value"
#: The ``source`` block of a PostgreSQL change event (Debezium's field names), as Spark DDL.
SOURCE_FIELDS: Final = (
    ("version", "STRING"),
    ("connector", "STRING"),
    ("name", "STRING"),
    ("ts_ms", "BIGINT"),
    ("snapshot", "STRING"),
    ("db", "STRING"),
    ("schema", "STRING"),
    ("table", "STRING"),
    ("txId", "BIGINT"),
    ("lsn", "BIGINT"),
)
VERSION: Final = "sluice-1"


def snapshot_source(server: str, db: str, schema: str, table: str) -> dict[str, Any]:
    """The ``source`` block of a snapshot row: no transaction or LSN (it was not read from the log)."""
    return {
        "version": VERSION,
        "connector": "postgresql",
        "name": server,
        "db": db,
        "schema": schema,
        "table": table,
        "txId": None,
        "lsn": None,
    }


@dataclass(frozen=True)
class TableShape:
    """A relation as the decoder last saw it: mapped columns and key columns."""

    partition: str  # "schema.table"
    schema: str
    table: str
    columns: tuple[MappedColumn, ...]
    keys: tuple[str, ...]


@dataclass(frozen=True)
class Change:
    """One record of one table with its position ``(end_lsn, seq)``."""

    partition: str
    position: tuple[int, int]
    record: ChangeRecord
    shape: TableShape


@dataclass
class _Txn:
    begin: pg.Begin
    events: list[tuple[int, pg.Message]] = field(default_factory=list)


class ChangeDecoder:
    """Feeds on ``(lsn, data)`` rows of a peek, in order; yields whole transactions' changes.

    ``primary_keys`` maps each captured ``schema.table`` to its primary-key columns (others are
    skipped; the Relation's key flags are the replica identity, every column under FULL);
    ``where`` names the connector in errors; ``server``/``db`` fill ``source.name``/``source.db``.
    """

    def __init__(
        self,
        primary_keys: Mapping[str, Sequence[str]],
        *,
        where: str,
        server: str,
        db: str,
        tombstones: bool = True,
    ) -> None:
        self.primary_keys = {t: tuple(k) for t, k in primary_keys.items()}
        self.where = where
        self.server = server
        self.db = db
        self.tombstones = tombstones
        self.shapes: dict[int, TableShape | None] = {}
        self._txn: _Txn | None = None
        self.last_end_lsn: int | None = None  # the end of the last transaction seen

    def feed(self, lsn: int, data: bytes) -> list[Change]:
        """Changes of a transaction when ``data`` is its Commit; else nothing yet."""
        msg = pg.decode(data)
        if isinstance(msg, pg.Relation):
            self.shapes[msg.relation_id] = self._shape(msg)
        elif isinstance(msg, pg.Begin):
            self._txn = _Txn(msg)
        elif isinstance(msg, pg.Commit):
            txn, self._txn = self._txn, None
            if txn is None:
                raise pg.PgOutputError(f"{self.where}: Commit at LSN {msg.end_lsn} without a Begin")
            self.last_end_lsn = msg.end_lsn
            return self._changes(txn, msg)
        elif isinstance(msg, pg.Insert | pg.Update | pg.Delete | pg.Truncate):
            if self._txn is None:
                raise pg.PgOutputError(f"{self.where}: change at LSN {lsn} outside a transaction")
            self._txn.events.append((lsn, msg))
        return []

    def _shape(self, rel: pg.Relation) -> TableShape | None:
        partition = f"{rel.schema}.{rel.table}"
        keys = self.primary_keys.get(partition)
        if keys is None:
            return None
        where = f"{self.where} table {partition!r}"
        columns = tuple(mapped_column(c.name, c.type_oid, c.type_modifier, where) for c in rel.columns)
        missing = [k for k in keys if k not in {c.name for c in columns}]
        if missing or not keys:
            raise pg.PgOutputError(
                f"{where}: primary key column(s) {missing or '(none)'} not in the change stream"
            )
        return TableShape(partition, rel.schema, rel.table, columns, keys)

    def _row(self, shape: TableShape, values: pg.Tuple, fallback: Mapping[str, Any] | None) -> dict[str, Any]:
        where = f"{self.where} table {shape.partition!r}"
        row: dict[str, Any] = {}
        for col, raw in zip(shape.columns, values, strict=True):
            if raw is pg.UNCHANGED:
                if fallback is not None and col.name in fallback:
                    row[col.name] = fallback[col.name]
                elif col.spark_ddl == "STRING":
                    row[col.name] = UNAVAILABLE
                elif col.spark_ddl == "BINARY":
                    row[col.name] = UNAVAILABLE.encode()
                else:
                    row[col.name] = None
            else:
                assert not isinstance(raw, pg._Unchanged)
                row[col.name] = parse_value(col, raw, where)
        return row

    def _changes(self, txn: _Txn, commit: pg.Commit) -> list[Change]:
        out: list[Change] = []
        ts_ms = commit.commit_time_us // 1000

        def emit(
            shape: TableShape, lsn: int, op: str | None, key: dict[str, Any] | None, before: Any, after: Any
        ) -> None:
            source = {
                "version": VERSION,
                "connector": "postgresql",
                "name": self.server,
                "ts_ms": ts_ms,
                "snapshot": "false",
                "db": self.db,
                "schema": shape.schema,
                "table": shape.table,
                "txId": txn.begin.xid,
                "lsn": lsn,
            }
            value = None if op is None else envelope(op, before, after, source, ts_ms)
            record = ChangeRecord(0, key, value, commit.commit_time_us)
            out.append(Change(shape.partition, (commit.end_lsn, len(out)), record, shape))

        for lsn, msg in txn.events:
            if isinstance(msg, pg.Truncate):
                for relation_id in msg.relation_ids:
                    truncated = self._known(relation_id)
                    if truncated is not None:
                        emit(truncated, lsn, OP_TRUNCATE, None, None, None)
                continue
            assert isinstance(msg, pg.Insert | pg.Update | pg.Delete)
            shape = self._known(msg.relation_id)
            if shape is None:
                continue  # a table that is not captured
            if isinstance(msg, pg.Insert):
                after = self._row(shape, msg.new, None)
                emit(shape, lsn, OP_CREATE, _key(shape, after), None, after)
            elif isinstance(msg, pg.Update):
                old = None if msg.old is None else self._row(shape, msg.old, None)
                after = self._row(shape, msg.new, None if msg.old_is_key else old)
                new_key = _key(shape, after)
                old_key = new_key if old is None else _key(shape, old)
                if old_key != new_key:
                    self._delete(emit, shape, lsn, old_key, old)
                    emit(shape, lsn, OP_CREATE, new_key, None, after)
                else:
                    emit(shape, lsn, OP_UPDATE, new_key, None if msg.old_is_key else old, after)
            else:
                before = self._row(shape, msg.old, None)
                self._delete(emit, shape, lsn, _key(shape, before), before)
        return out

    def _known(self, relation_id: int) -> TableShape | None:
        """The shape of a relation a change names (None: a table that is not captured)."""
        if relation_id not in self.shapes:
            raise pg.PgOutputError(f"{self.where}: change of unknown relation {relation_id}")
        return self.shapes[relation_id]

    def _delete(
        self, emit: Callable[..., None], shape: TableShape, lsn: int, key: dict[str, Any], before: Any
    ) -> None:
        emit(shape, lsn, OP_DELETE, key, before, None)
        if self.tombstones:
            emit(shape, lsn, None, key, None, None)


def _key(shape: TableShape, row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in shape.keys}


def with_offsets(changes: Sequence[Change], start_lsn: int) -> list[Change]:
    """The changes with record offsets for the runtime: ``(end_lsn - start_lsn) * 2**20 + seq``,
    ordered like the positions and unique while a transaction has fewer than 32 million records
    (a commit record is at least 32 bytes of WAL, so the next transaction's offsets lie above)."""
    out = []
    for c in changes:
        end_lsn, seq = c.position
        offset = ((end_lsn - start_lsn) << 20) + seq
        record = ChangeRecord(offset, c.record.key, c.record.value, c.record.timestamp_us)
        out.append(Change(c.partition, c.position, record, c.shape))
    return out
