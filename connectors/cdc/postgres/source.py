"""postgres-cdc: every INSERT, UPDATE and DELETE of PostgreSQL tables, from a logical replication
slot decoded with the built-in ``pgoutput`` plugin, as Debezium change events.

One task (a slot has one reader); one partition per captured table (``schema.table``), each routed
to its topic ``<topic.prefix>.<schema>.<table>`` (connectors.cdc.topics). Positions are
``(end_lsn, seq)`` (connectors.cdc.postgres.changes); every table's range in a batch ends at the
same transaction boundary, so the whole batch is one stretch of the WAL. What both CDC sources
share (partitions, topics, snapshots, signals, ``read``) is connectors.cdc.log_source; this module
is the slot's part: peeking and advancing it, its positions, the publication.

Exactly once into RocketMQ, per batch:
  1. Planning (``latest_positions``) first advances the slot to what the store has committed
     (catching up an advance a crash skipped), then peeks up to the flushed WAL and at most
     ``batch.max.records`` rows (whole transactions): the batch ends after the last commit seen, at
     ``E``; every table's latest position is ``(E + 1, 0)``.
  2. ``read`` returns the changes in ``[start, end)``: from that peek, or after a crash by peeking
     again up to ``E`` — the slot has not moved past ``start``, so the same changes come back.
  3. After the runtime committed the positions, ``committed(plan)`` advances the slot to ``E``
     (:class:`sluice.connectors.api.CommitListener`); PostgreSQL may then recycle that WAL.
The slot's confirmed position is flushed only at checkpoints and may step back after a server
crash: the committed position is the truth, and changes below it are filtered out. A slot that
vanished while positions are committed is data loss (``data.loss``), named with slot and position.
``snapshot.mode=initial`` reads the existing rows first, after the slot exists and while the log is
held at the slot's start (connectors.cdc.snapshot); ``initial_only`` reads them without a slot.
``signal.data.collection``: signals re-snapshot tables while streaming (connectors.cdc.ondemand).
``skipped.operations`` (connectors.cdc.operations) filters what ``read`` emits, nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from sluice.connectors.cdc import ondemand as od
from sluice.connectors.cdc import signals
from sluice.connectors.cdc import snapshot as snap
from sluice.connectors.cdc.log_source import Keys, LogBatch, LogCdcConnector, LogCdcTask
from sluice.connectors.cdc.postgres import slot as sql
from sluice.connectors.cdc.postgres import snapshot as pgsnap
from sluice.connectors.cdc.postgres.changes import (
    SOURCE_FIELDS,
    Change,
    ChangeDecoder,
    snapshot_source,
    with_offsets,
)
from sluice.connectors.cdc.postgres.checks import params, start_problems
from sluice.connectors.cdc.postgres.config import (
    FIELDS,
    select_tables,
    table_problems,
)
from sluice.connectors.config import ConfigDef, ConfigError, FieldError
from sluice.connectors.jdbc.urls import Dialect
from sluice.connectors.model import BatchPlan, DataLossPolicy, PartitionRange
from sluice.connectors.positions import Position

log = logging.getLogger(__name__)
#: WAL bytes an idle capture's slot may lag behind the server before an empty batch moves it.
KEEPALIVE_LAG = 1 << 20


def _names(config: Mapping[str, Any], connector: str) -> tuple[str, str]:
    slot = str(config.get("slot.name") or "") or sql.default_name(connector)
    return slot, str(config.get("publication.name") or "") or slot


def _done(position: Position) -> int | None:
    """The LSN the slot may move to once ``position`` is committed: ``(E + 1, 0)`` -> ``E``."""
    lsn, seq = position.key
    return int(lsn) - 1 if seq == 0 and int(lsn) > 0 else None


class PostgresCdcTask(LogCdcTask[Change]):
    """Reads the slot's changes of its tables; see the module docstring."""

    #: its read creates (or moves) a replication slot and a publication
    previewable: ClassVar[bool] = False

    source_fields: ClassVar[Sequence[tuple[str, str]]] = SOURCE_FIELDS
    dialect: ClassVar[Dialect] = Dialect.POSTGRESQL
    #: A missing slot is data loss to name, not a broken connection.
    keeps_connection: ClassVar[tuple[type[Exception], ...]] = (sql.SlotMissing, LookupError)

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        super().__init__(config, task_id)
        self.params = params(config)
        self.slot, self.publication = _names(config, self.name)
        self._known: dict[str, Position] = {}
        self._cache: tuple[int, list[Change]] | None = None  # (E, changes up to E)
        self._idle_upto: int | None = None  # the flushed LSN of the last poll that found nothing

    # ---- connection, tables, slot ----------------------------------------------------------------
    def _connect(self) -> Any:
        return sql.connect(self.params, self.where)

    def read_chunk(self, conn: Any, query: snap.ChunkQuery) -> snap.Rows:
        return pgsnap.read_chunk(conn, query, self.where)

    def _captured_tables(self) -> tuple[Keys, Keys]:
        """Also makes the publication match the captured tables (and the signal table)."""
        facts = {t.name: t for t in self._guarded(sql.list_tables)}
        selected = [t for t in select_tables(self.config, list(facts)) if t != self.signal_table]
        problems = table_problems(
            self.where,
            selected,
            {t: facts[t].primary_key for t in selected},
            {t: facts[t].replica_identity for t in selected},
        )
        signal = facts.get(self.signal_table)
        if self.signal_table and (signal is None or not signal.primary_key):
            problems.append(
                signals.unusable(self.where, self.signal_table, "it is gone or has no primary key")
            )
        if problems:
            raise ConfigError(problems)
        mode = str(self.config.get("publication.autocreate.mode") or "all_tables")
        published = selected + ([self.signal_table] if self.signal_table else [])
        self._guarded(sql.ensure_publication, self.publication, mode, published)
        keys = {t: facts[t].primary_key for t in selected}
        return keys, ({self.signal_table: signal.primary_key} if signal is not None else {})

    def _snapshot_source(self, table: str) -> Mapping[str, Any]:
        schema, _, name = table.partition(".")
        return snapshot_source(self.prefix, self.params.dbname, schema, name)

    def _slot_lost(self, committed: Mapping[str, Position]) -> None:
        error = sql.slot_lost(self.where, self.slot, str(min(committed.values())))
        if DataLossPolicy(self.config.get("data.loss", "fail")) is DataLossPolicy.FAIL:
            raise error
        log.warning("%s; data.loss=skip: creating the slot again", error)

    def _slot(self, committed: Mapping[str, Position]) -> sql.SlotInfo:
        info = self._guarded(sql.slot_info, self.slot)
        if info is None:
            if committed:
                self._slot_lost(committed)
            self._guarded(sql.create_slot, self.slot)
            info = self._guarded(sql.slot_info, self.slot)
        if info.plugin != sql.PLUGIN or info.database != self.params.dbname:
            raise ConfigError(
                [
                    FieldError(
                        "slot.name",
                        f"{self.where}: replication slot {self.slot!r} belongs to plugin {info.plugin!r} "
                        f"on database {info.database!r}; it needs pgoutput on {self.params.dbname!r} "
                        "(choose another slot.name)",
                    )
                ]
            )
        return info

    # ---- positions -------------------------------------------------------------------------------
    def _log_earliest(self) -> dict[str, Position]:
        """Where the slot is: ``(confirmed + 1, 0)``; nothing before the slot exists."""
        info = self._guarded(sql.slot_info, self.slot)
        if info is None:
            return {}  # latest_positions creates it (or names the data loss)
        return {p: Position((info.confirmed_flush + 1, 0)) for p in self._stream()}

    def _advance(self, positions: Mapping[str, Position]) -> None:
        if not positions:
            return
        target = _done(min(positions.values()))
        if target is not None:
            self._guarded(sql.advance, self.slot, target)

    def _held(self, mine: Mapping[str, Position], shots: Mapping[str, Position]) -> dict[str, Position]:
        """The slot exists first (its consistent point is capture's start); a table starts at its
        committed position, never below the slot's."""
        self._known = dict(mine)
        info = self._slot(mine or shots)
        earliest = Position((info.confirmed_flush + 1, 0))
        return {p: max(mine.get(p, earliest), earliest) for p in self._stream()}

    def _log_batch(
        self, mine: Mapping[str, Position], held: Mapping[str, Position], shots: Mapping[str, Position]
    ) -> LogBatch | None:
        """Advances the slot to what is committed, then peeks up to the flushed WAL; the starts
        are taken again after that advance. A slot gone now (``data.loss=skip``): None."""
        try:
            self._advance(mine)
            info = self._slot(mine or shots)  # committed positions a missing slot would lose
            earliest = Position((info.confirmed_flush + 1, 0))
            upto = self._guarded(sql.flush_lsn)
            rows = self._guarded(sql.peek, self.slot, self.publication, upto, self.max_records)
        except sql.SlotMissing:
            self._slot_lost(mine or {p: Position((0, 0)) for p in self._stream()})
            return None
        changes, end = self._decode(rows)
        self._behind = len(rows) >= self.max_records
        if end is not None:
            self._cache, self._idle_upto = (end, changes), None
        else:
            end = self._keepalive(info.confirmed_flush, upto)
        starts = {p: max(mine.get(p, earliest), earliest) for p in self._stream()}
        ends = {
            p: max(base, Position((end + 1, 0))) if end is not None else base for p, base in starts.items()
        }
        return LogBatch(ends, changes, starts)

    def _changed_since(self, table: str, log: str) -> set[str]:
        """From ``log`` (the slot is not past it) to the flushed WAL."""
        start = Position(tuple(int(p) for p in log.split(":")))
        upto = self._guarded(sql.flush_lsn)
        rows = self._guarded(sql.peek, self.slot, self.publication, upto, None)
        return od.changed_keys(self._decode(rows)[0], table, self._tables()[table], start)

    def _keepalive(self, confirmed: int, upto: int) -> int | None:
        """An end for a batch without records when this database is idle but the server is not.

        WAL is shared by every database of a server: while the captured tables do not change, no
        commit of ours moves the slot, and it holds back (and every peek re-decodes) all the WAL the
        other databases write. When two polls in a row found nothing, no transaction of ours
        committed before the first poll's flushed LSN (any commit started before it is flushed by
        the second), so an empty batch may end there; committing it moves the slot like any other.
        Only once the slot lags by KEEPALIVE_LAG bytes, so an idle server makes no batches.
        """
        previous, self._idle_upto = self._idle_upto, upto
        if previous is None or previous - confirmed < KEEPALIVE_LAG:
            return None
        self._cache = (previous, [])
        return previous

    def committed(self, plan: BatchPlan) -> None:
        """After the runtime committed ``plan``: let the slot go of what every table has committed."""
        ranges = [r for r in plan.ranges if not snap.is_snapshot(r.partition)]
        if not self._known and not ranges:
            return
        known = {**self._known, **{r.partition: r.end for r in ranges}}
        self._known = known
        if self._stream() and set(self._stream()) <= set(known):
            self._advance(known)

    # ---- reading ---------------------------------------------------------------------------------
    def _decode(self, rows: Sequence[tuple[int, bytes]]) -> tuple[list[Change], int | None]:
        decoder = ChangeDecoder(
            {**self._tables(), **self._signal_keys},
            where=self.where,
            server=self.prefix,
            db=self.params.dbname,
            tombstones=bool(self.config.get("tombstones.on.delete", True)),
        )
        changes: list[Change] = []
        end: int | None = None
        for lsn, data in rows:
            done = decoder.feed(lsn, data)
            if data[:1] == b"C":
                end = decoder.last_end_lsn
            changes.extend(done)
        return changes, end

    def _changes_upto(self, end: int, start: Position) -> list[Change]:
        if self._cache is not None and self._cache[0] == end:
            return self._cache[1]
        try:
            rows = self._guarded(sql.peek, self.slot, self.publication, end, None)
        except sql.SlotMissing:
            self._slot_lost({"": start})
            return []
        changes = [c for c in self._decode(rows)[0] if c.position[0] <= end]
        self._cache = (end, changes)
        return changes

    def changes_of(self, r: PartitionRange) -> list[Change]:
        """The changes of a log range in WAL order, from the peek up to its end ``E``."""
        end = int(r.end.key[0]) - 1
        return [
            c
            for c in self._changes_upto(end, r.start)
            if c.partition == r.partition and r.start.key <= c.position < r.end.key
        ]

    def _with_offsets(self, changes: list[Change], r: PartitionRange) -> list[Change]:
        """From their LSN distance to the range's start (connectors.cdc.postgres.changes.with_offsets)."""
        return with_offsets(changes, int(r.start.key[0]))


class PostgresCdcConnector(LogCdcConnector):
    """Debezium's PostgreSQL connector keys (connectors.cdc.postgres.config); one task. ``start``
    checks the server and the tables up front (wal_level, REPLICATION privilege, tables that exist
    and have primary keys, topic names)."""

    plugin_name = "postgres-cdc"
    task_class = PostgresCdcTask
    config_def = ConfigDef(FIELDS)

    def server_problems(self, config: Mapping[str, Any], name: str) -> list[FieldError]:
        return start_problems(config, name)
