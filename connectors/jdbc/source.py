"""JDBC source (Kafka Connect JDBC source semantics) for MySQL/MariaDB and PostgreSQL.

One partition per table (or ``query``); positions are the column values reached
(connectors.jdbc.queries). What each mode can and cannot see:

- ``incrementing``: new rows with a larger id. Not updates, not deletes, not a row inserted late
  with an id below one already read (a transaction committing after a later one).
- ``timestamp``: new and updated rows, once their timestamp is at most now -
  ``timestamp.delay.interval.ms``. Not deletes; and not a row written later with a timestamp at or
  below the position reached (same-millisecond updates after a batch read that timestamp, clocks
  going back): set the delay to cover the longest transaction. Rows with NULL timestamps never.
- ``timestamp+incrementing``: as timestamp, but ties within one timestamp are broken by the id, so a
  batch may end in the middle of a timestamp.
- ``bulk``: every poll (at most one per ``poll.interval.ms``) is a full snapshot of the table as
  one batch, position = the snapshot's number. It sees everything present, deletes only as absence;
  a re-run after a crash reads the table as it is then (at least once, not repeatable).

Change data capture (the binlog, logical decoding) is what sees deletes and every update.

Batches: a range reads ``(start, end]``; ``batch_end`` finds where ``batch.max.rows`` rows end with
``ORDER BY key LIMIT 1 OFFSET n``, so the limit holds across key gaps (in timestamp mode a batch
ends on a timestamp boundary and may exceed the limit by the rows sharing the last timestamp). The
schema is read from the catalogue per batch: a column added to the table appears in later records.
Records (connectors.jdbc.records, framed in Arrow inside the Spark tasks that read the rows; no
PySpark here): ``value`` a struct of the row's columns, ``key`` the primary key as a struct (null
without one), ``offset`` the id (incrementing) or a 63-bit hash of the row's position and key (the
runtime's re-run de-duplication matches records by offset, so the hash is the one earlier releases
computed in Spark: connectors.jdbc.offsets), ``timestamp`` the row's timestamp column in timestamp
modes.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from datetime import UTC
from functools import partial
from typing import Any, ClassVar
from zoneinfo import ZoneInfo

from sluice.connectors import backfills
from sluice.connectors.api import SendOrder, SourceConnector, SourceTask, split_round_robin
from sluice.connectors.backfills import Backfill
from sluice.connectors.config import ConfigDef, FieldError
from sluice.connectors.jdbc import backfill
from sluice.connectors.jdbc import read as db
from sluice.connectors.jdbc.config import (
    DEFAULT_SPLIT_ROWS,
    FIELDS,
    QUERY_PARTITION,
    config_problems,
    topic_for,
)
from sluice.connectors.jdbc.ddl import quote
from sluice.connectors.jdbc.queries import (
    INCREMENTING_FLOOR,
    TIMESTAMP_FLOOR,
    Mode,
    SelectColumn,
    Source,
    Sql,
    latest_query,
    now_query,
    nth_position_query,
    range_query,
    tables_query,
)
from sluice.connectors.jdbc.records import RecordShape, record_schema
from sluice.connectors.jdbc.types import MappedColumn
from sluice.connectors.jdbc.urls import Dialect, dialect_of, engine_url
from sluice.connectors.key_chunks import Chunk, is_snapshot, table_of
from sluice.connectors.model import PartitionRange
from sluice.connectors.positions import Position
from sluice.connectors.secrets import resolve_secrets
from sluice.connectors.source_reads import ArrowSplits, SourceRead

_INTEGRAL = ("TINYINT", "SMALLINT", "INT", "BIGINT", "DECIMAL(20,0)")


class JdbcSourceTask(SourceTask):
    """Reads its tables' ranges; see the module docstring. Holds one planning connection."""

    position_unit: ClassVar[str] = "records"

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        super().__init__(config, task_id)
        self._where = f"connector {self.name!r}"
        url = engine_url(
            str(config["connection.url"]),
            config.get("connection.user") or None,
            config.get("connection.password") or None,
        )
        self.params = db.ConnectParams.of(url)
        self.dialect = dialect_of(url)
        self.mode = Mode(config["mode"])
        self.query = str(config.get("query") or "").strip()
        self.tables = [] if self.query else list(config.get("table.whitelist") or [])
        self.inc = str(config.get("incrementing.column.name") or "")
        self.ts_cols = tuple(config.get("timestamp.column.name") or ())
        self.delay_us = int(config.get("timestamp.delay.interval.ms") or 0) * 1000
        self.poll_ms = int(config.get("poll.interval.ms") or 0)
        self.split_rows = int(config.get("read.split.rows") or DEFAULT_SPLIT_ROWS)
        self.zone = ZoneInfo(str(config.get("db.timezone") or "UTC"))
        self._conn: Any = None
        self._sources: dict[str, tuple[Source, bool]] = {}  # partition -> (source, timestamps zoned)
        self._requests: Sequence[Backfill] = ()

    # ---- connection and catalogue ----------------------------------------------------------------
    def _db(self) -> Any:
        if self._conn is None:
            self._conn = db.connect(self.params, self._where)
        return self._conn

    def _fetch(self, sql: Sql) -> list[tuple[Any, ...]]:
        try:
            return db.fetch_all(self._db(), sql)
        except Exception:
            self.close()  # a broken connection is rebuilt by the next call
            raise

    def columns(self, partition: str) -> tuple[list[MappedColumn], list[str]]:
        """The partition's columns now (a column added since the last batch included) and its key."""
        if partition == QUERY_PARTITION:
            return db.query_columns(self._db(), self.dialect, self.query, self._where), []
        return db.table_columns(self._db(), self.dialect, partition, self._where)

    def _source(self, partition: str) -> tuple[Source, bool]:
        if partition not in self._sources:
            columns, keys = self.columns(partition)
            by_name = {c.name: c for c in columns}
            where = f"{self._where} query" if self.query else f"{self._where} table {partition!r}"
            needed = ([self.inc] if self.mode.uses_incrementing else []) + (
                list(self.ts_cols) if self.mode.uses_timestamp else []
            )
            for name in needed:
                col = by_name.get(name)
                if col is None:
                    raise db.JdbcSourceConfigError(
                        "incrementing.column.name" if name == self.inc else "timestamp.column.name",
                        f"{where}: no column {name!r} (columns: {', '.join(by_name)})",
                    )
                if name == self.inc and col.spark_ddl not in _INTEGRAL:
                    raise db.JdbcSourceConfigError(
                        "incrementing.column.name",
                        f"{where} column {name!r}: the incrementing column "
                        f"must be an integer, it is {col.db_type}",
                    )
                if name in self.ts_cols and not col.spark_ddl.startswith("TIMESTAMP"):
                    raise db.JdbcSourceConfigError(
                        "timestamp.column.name",
                        f"{where} column {name!r}: not a timestamp column ({col.db_type})",
                    )
                # COALESCE exists for NULLs; a query's result says nothing about NOT NULL
                checked = not self.query and (name == self.inc or len(self.ts_cols) == 1)
                if self.config.get("validate.non.null", True) and col.nullable and checked:
                    raise db.JdbcSourceConfigError(
                        "validate.non.null",
                        f"{where} column {name!r} is nullable: rows with NULL there "
                        "would never be read (make it NOT NULL or set validate.non.null=false)",
                    )
            zoned = self.mode.uses_timestamp and by_name[self.ts_cols[0]].spark_ddl == "TIMESTAMP"
            source = Source(
                self.dialect,
                self.mode,
                table="" if self.query else partition,
                query=self.query,
                incrementing=self.inc,
                timestamps=self.ts_cols,
                order_keys=tuple(keys),
            )
            self._sources[partition] = (source, zoned)
        return self._sources[partition]

    # ---- positions -------------------------------------------------------------------------------
    def partitions(self) -> list[str]:
        """The live partitions (each table, or the query), then the snapshot partitions of the
        tables a backfill request named (connectors.jdbc.backfill)."""
        if self.query:
            return [QUERY_PARTITION]
        return list(self.tables) + backfill.partitions(self.tables, self._requests)

    def earliest_positions(self) -> dict[str, Position]:
        floor = {
            Mode.BULK: (0,),
            Mode.INCREMENTING: (INCREMENTING_FLOOR,),
            Mode.TIMESTAMP: (TIMESTAMP_FLOOR,),
            Mode.TIMESTAMP_INCREMENTING: (TIMESTAMP_FLOOR, INCREMENTING_FLOOR),
        }[self.mode]
        return {p: backfill.earliest() if is_snapshot(p) else Position(floor) for p in self.partitions()}

    def _to_key(self, row: Sequence[Any]) -> tuple[int, ...]:
        if self.mode is Mode.INCREMENTING:
            return (int(row[0]),)
        if self.mode is Mode.TIMESTAMP:
            return (db.ts_micros(row[0]),)
        return (db.ts_micros(row[0]), int(row[1]))

    def _params(self, partition: str, key: Sequence[int | str]) -> tuple[Any, ...]:
        _, zoned = self._source(partition)
        if self.mode is Mode.INCREMENTING:
            return (key[0],)
        ts = db.ts_param(int(key[0]), self.dialect, zoned)
        return (ts,) if self.mode is Mode.TIMESTAMP else (ts, key[1])

    def _cap(self, zoned: bool) -> Any:
        """now - timestamp.delay.interval.ms by the database's clock, as a query parameter."""
        now_utc = self._fetch(Sql(now_query(self.dialect)))[0][0]
        if not zoned:
            now_utc = now_utc.replace(tzinfo=UTC).astimezone(self.zone).replace(tzinfo=None)
        return db.ts_param(db.ts_micros(now_utc) - self.delay_us, self.dialect, zoned)

    def latest_positions(self, committed: Mapping[str, Position]) -> dict[str, Position]:
        """Each live partition's last row now (its latest), and each backfill's next step; a table
        with a backfill chunk planned keeps its live partition where it is this once
        (connectors.jdbc.backfill says why)."""
        earliest = self.earliest_positions()
        out: dict[str, Position] = {}
        snapshots: dict[str, Position] = {}
        for p in self.partitions():
            if is_snapshot(p):
                start = committed.get(p) or earliest[p]
                table = table_of(p)
                keys = partial(self._backfill_keys, table)
                snapshots[p] = backfill.next_position(self._requests, table, start, keys, self.split_rows)
                continue
            if self.mode is Mode.BULK:
                out[p] = self._next_snapshot(committed.get(p))
                continue
            source, zoned = self._source(p)
            rows = self._fetch(latest_query(source, self._cap(zoned) if self.mode.uses_timestamp else None))
            row = rows[0] if rows else None
            out[p] = earliest[p] if row is None or row[0] is None else Position(self._to_key(row))
        return {**out, **snapshots, **backfill.hold_live(snapshots, committed)}

    def _next_snapshot(self, committed: Position | None) -> Position:
        now_ms = int(time.time() * 1000)
        if committed is not None and now_ms - int(committed.get("at", "0") or 0) < self.poll_ms:
            return committed
        number = committed.key[0] if committed is not None else 0
        return Position((int(number) + 1,), (("at", str(now_ms)),))

    def backlog(self, partition: str, start: Position, latest: Position) -> int | None:
        return None  # ids and timestamps have gaps: only a query can count (batch_end does)

    def batch_end(self, partition: str, start: Position, latest: Position, budget: int | None) -> Position:
        if budget is None or self.mode is Mode.BULK or is_snapshot(partition) or latest <= start:
            return latest
        source, _ = self._source(partition)
        sql = nth_position_query(
            source, self._params(partition, start.key), self._params(partition, latest.key), budget
        )
        rows = self._fetch(sql)
        return Position(self._to_key(rows[0])) if rows else latest

    # ---- reading ---------------------------------------------------------------------------------
    def splits(self, partition: str, r: PartitionRange, columns: Sequence[SelectColumn]) -> list[Sql]:
        """The range as sub-ranges of ``read.split.rows`` rows each (one Spark task per sub-range)."""
        source, _ = self._source(partition)
        if self.mode is Mode.BULK:
            return [range_query(source, columns, None, None)]
        bounds = [r.start]
        while True:
            sql = nth_position_query(
                source,
                self._params(partition, bounds[-1].key),
                self._params(partition, r.end.key),
                self.split_rows,
            )
            rows = self._fetch(sql)
            if not rows or Position(self._to_key(rows[0])) >= r.end:
                break
            bounds.append(Position(self._to_key(rows[0])))
        bounds.append(r.end)
        return [
            range_query(source, columns, self._params(partition, a.key), self._params(partition, b.key))
            for a, b in zip(bounds, bounds[1:], strict=False)
        ]

    def read_range(self, r: PartitionRange) -> ArrowSplits:
        """The range as splits read by Spark tasks, each framing its rows as records (offsets as
        connectors.jdbc.records says); a backfill's chunk is one split."""
        table = table_of(r.partition)
        columns, keys = self.columns(table)
        self._sources.pop(table, None)  # the key or a type may have changed: plan with fresh facts
        select = [SelectColumn(c.name, c.as_text, c.spark_ddl if c.as_decimal else "") for c in columns]
        splits = (
            self._chunk_split(r, select) if is_snapshot(r.partition) else self.splits(r.partition, r, select)
        )
        inc_type = next((c.spark_ddl for c in columns if c.name == self.inc), "")
        shape = RecordShape(
            topic=self.topic_of(r.partition),
            partition=r.partition,
            keys=tuple(keys),
            timestamps=self.ts_cols if self.mode.uses_timestamp else (),
            incrementing=self.inc if self.mode.uses_incrementing else "",
            id_offset=self.mode is Mode.INCREMENTING and inc_type in _INTEGRAL[:4],
        )
        schema = record_schema(columns, shape)
        where = f"{self._where} table {r.partition!r} range [{r.start}, {r.end})"
        spec = db.ReadSpec(self.params, tuple(columns), schema, shape, where)
        return ArrowSplits(schema, tuple(splits), partial(db.read_split, spec))

    def send_order(self, ranges: Sequence[PartitionRange]) -> SendOrder:
        """KnowsSendOrder: a read returns each row of its table once, so a keyed table's keys are
        unique in a batch and its splits are sent in parallel; a keyless table's are sorted."""
        keyed = all(self._source(table_of(r.partition))[0].order_keys for r in ranges)  # cached
        return SendOrder.ANY if keyed else SendOrder.SORTED

    def read(self, ranges: Sequence[PartitionRange]) -> SourceRead:
        """Records of ``ranges``, one ``ArrowSplits`` per range; several tables only when their rows
        have one shape (the runtime reads one table per call: ``topic_of``)."""
        return SourceRead(splits=tuple(self.read_range(r) for r in ranges if self.holds_records(r)))

    def holds_records(self, r: PartitionRange) -> bool:
        """KnowsEmptyRanges: a backfill range that opens or ends a generation reads nothing."""
        return not r.is_empty and (not is_snapshot(r.partition) or backfill.holds_rows(r.start, r.end))

    # ---- backfills (connectors.jdbc.backfill) ------------------------------------------------------
    def take_backfills(self, requests: Sequence[Backfill]) -> None:
        """TakesBackfills: applied by the next planning."""
        self._requests = requests

    def _backfill_keys(self, table: str, chunk: Chunk, limit: int) -> list[tuple[Any, ...]]:
        source, _ = self._source(table)
        return self._fetch(backfill.keys_query(source, chunk.condition, chunk.after, limit))

    def _chunk_split(self, r: PartitionRange, columns: Sequence[SelectColumn]) -> list[Sql]:
        first, last = Chunk.of(r.start), Chunk.of(r.end)
        source, _ = self._source(table_of(r.partition))
        assert last.after is not None, f"{r.partition}: a range without rows was read"
        return [backfill.rows_query(source, columns, last.condition, first.after, last.after)]

    def backfill_tables(self) -> list[str]:
        return list(self.tables)

    def backfill_range(self, table: str, column: str, low: str | None, high: str | None) -> str:
        """``--from/--to`` on ``column``, or on the table's timestamp, incrementing or one-column
        primary key, in that order (the column a range of the past is usually told by)."""
        if not column:
            _, keys = self.columns(table)
            ts = self.ts_cols[0] if self.mode.uses_timestamp and len(self.ts_cols) == 1 else ""
            inc = self.inc if self.mode.uses_incrementing else ""
            column = ts or inc or (keys[0] if len(keys) == 1 else "")
            if not column:
                raise ValueError(
                    f"{self._where} table {table!r}: no timestamp, incrementing or one-column primary "
                    "key to filter on: name the column (--column) or give --where"
                )
        mysql = self.dialect is Dialect.MYSQL
        return backfills.range_condition(quote(self.dialect, column), low, high, mysql)

    def backfill_problem(self, table: str, condition: str) -> str | None:
        """A table it does not read or without a primary key, or a condition its database refuses
        (probed by reading no rows)."""
        if table not in self.tables:
            return (
                f"{self._where}: {table!r} is not one of its tables ({', '.join(self.tables) or 'a query'})"
            )
        try:
            source, _ = self._source(table)
        except db.JdbcSourceConfigError as exc:  # what its live reads would fail on too
            return str(exc)
        if not source.order_keys:
            return f"{self._where} table {table!r} has no primary key: a backfill reads by key"
        try:
            self._fetch(backfill.keys_query(source, condition, None, 0))
        except Exception as exc:  # the database's own words on the condition
            return f"{self._where} table {table!r}: the condition {condition!r} cannot be used: {exc}"
        return None

    def topic_of(self, partition: str) -> str:
        """The topic a partition's records go to (RoutesTopics): a backfill's are its table's."""
        prefix, topic = str(self.config.get("topic.prefix") or ""), str(self.config.get("topic") or "")
        return topic_for(table_of(partition), prefix, topic)

    def topics(self) -> list[str]:
        return sorted({self.topic_of(p) for p in self.partitions()})

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None


class JdbcSourceConnector(SourceConnector):
    """Kafka Connect's JDBC source keys (connectors.jdbc.config); one task per table, dealt
    round-robin over ``tasks.max``. Without ``table.whitelist`` the tables are listed when the
    connector is validated (minus ``table.blacklist``); tables created later need a new config."""

    plugin_name = "jdbc-source"
    task_class = JdbcSourceTask
    config_def = ConfigDef(FIELDS)

    def validate(self, raw_config: Mapping[str, Any]) -> list[FieldError]:
        errors = super().validate(raw_config)
        name = str(raw_config.get("name") or self.plugin_name)
        canonical = self.full_config_def(name).canonical(raw_config)
        return errors + config_problems(canonical, f"connector {name!r}")

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        parsed = self.parse(config)
        if parsed.get("query"):
            return [dict(config)]
        tables = list(parsed.get("table.whitelist") or []) or self._list_tables(parsed)
        if not tables:
            raise ValueError(f"connector {parsed.get('name')!r}: no tables to read")
        groups = split_round_robin(tables, max_tasks)
        return [{**config, "table.whitelist": ",".join(group)} for group in groups]

    @staticmethod
    def _list_tables(parsed: Mapping[str, Any]) -> list[str]:
        resolved = resolve_secrets({k: v for k, v in parsed.items() if k.startswith("connection.")})
        url = engine_url(
            str(resolved["connection.url"]),
            resolved.get("connection.user") or None,
            resolved.get("connection.password") or None,
        )
        conn = db.connect(db.ConnectParams.of(url), f"connector {parsed.get('name')!r}")
        try:
            tables = [str(r[0]) for r in db.fetch_all(conn, Sql(tables_query(dialect_of(url))))]
        finally:
            conn.close()
        skip = set(parsed.get("table.blacklist") or [])
        return [t for t in tables if t not in skip]
