"""``delta-sink`` and ``iceberg-sink``: RocketMQ topics into Delta Lake and Iceberg tables, written
by Spark itself, exactly once.

Both are ``WritesFrames`` sinks (connectors.api): the runtime hands them the batch's records as a
DataFrame and the table write is the batch's Spark job, run by the executors; nothing is collected
to the driver. Per batch and table (``write_frame``):

1. the records become rows (``rows.table_rows``): a struct value's fields, or the record's
   coordinates; in upsert mode keyed, the last record of a key winning, deletes flagged;
2. a missing table is created from the rows' schema (``auto.create``, partitioned by
   ``partition.fields``); fields the table lacks are added as columns (``auto.evolve``);
3. one commit: an append, or a MERGE on the key (update, insert, delete), marked with the batch's
   reference (``tables``).

Exactly once: the runtime records the plan before it runs and commits the batch's positions after
the table commit. A crash between the two re-runs the same plan (the runtime says so through
``restate``); the task then finds the reference in the table's history and writes nothing again.
Concurrent commits by other tasks to the same table are retried (both formats commit optimistically).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from sluice.connectors.api import Delivery, SinkConnector, SinkTask
from sluice.connectors.config import ConfigDef, ConfigError, FieldError
from sluice.connectors.converters import KEY_SCHEMA_HEADER, VALUE_SCHEMA_HEADER
from sluice.connectors.errors import ConnectorDataError
from sluice.connectors.lake import config as cfg
from sluice.connectors.lake.rows import RowRules, TableRows, table_rows
from sluice.connectors.lake.tables import DeltaTable, IcebergTable, LakeTable
from sluice.connectors.records import position

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

    from sluice.connectors.model import BatchPlan

log = logging.getLogger(__name__)

#: Commits tried when other writers keep committing to the same table first.
COMMIT_ATTEMPTS = 5
#: Markers of a commit that lost a race with another writer (Delta's Concurrent*Exception,
#: Iceberg's CommitFailedException or a conflicting-files validation): retried.
_CONFLICTS = ("Concurrent", "CommitFailedException", "conflicting files", "DELTA_CONCURRENT")
#: Markers of rows the table cannot take (a type it cannot hold): a data error, the task FAILED.
_INCOMPATIBLE = ("DELTA_FAILED_TO_MERGE_FIELDS", "INCOMPATIBLE_DATA", "CANNOT_UP_CAST", "DATATYPE_MISMATCH",
                 "Cannot safely cast", "DELTA_MERGE_INCOMPATIBLE", "Cannot write incompatible")  # fmt: skip


class LakeSinkError(RuntimeError):
    """A table write failed for a reason a retry may fix; names connector and table."""


def batch_ref(plan: BatchPlan) -> str:
    """What marks a batch's commit: connector, task, batch id and a digest of its exact ranges (a
    connector deleted and created again under its name restarts its batch ids)."""
    ranges = repr([(r.topic, r.partition, str(r.start), str(r.end)) for r in plan.ranges])
    digest = hashlib.sha1(ranges.encode()).hexdigest()[:12]
    return f"sluice:{plan.connector}:{plan.task_id}:{plan.batch_id}:{digest}"


class LakeSinkTask(SinkTask):
    """The lifecycle both lake sinks share; a subclass names its tables and sets up its session."""

    delivery: ClassVar[Delivery] = Delivery.EXACTLY_ONCE
    config_def: ClassVar[ConfigDef]

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        super().__init__(config, task_id)
        problems = self.config_errors(self.config, f"connector {self.name!r}")
        if problems:
            raise ConfigError(problems)
        self.rules = RowRules(
            mode=str(self.config.get("insert.mode") or cfg.APPEND),
            pk_fields=tuple(cfg.list_of(self.config.get("pk.fields"))),
            deletes=bool(self.config.get("delete.enabled", True)),
            owner=f"connector {self.name!r}",
        )
        self.partition_by = cfg.list_of(self.config.get("partition.fields"))
        self._session: SparkSession | None = None
        #: batch ids the runtime re-runs (``restate``): only they can have been committed already
        self._reruns: set[int] = set()
        #: tables this task created or wrote: one of them gone was deleted under the sink
        self._written: set[str] = set()

    @staticmethod
    def config_errors(config: Mapping[str, Any], owner: str) -> list[FieldError]:
        return []

    def _table(self, session: SparkSession, name: str) -> LakeTable:
        raise NotImplementedError

    def _configure(self, session: SparkSession) -> None:
        """Settings of the task's own session (an Iceberg catalog)."""

    def _fixed_table(self) -> str | None:
        """The one table every record goes to, if the config names one."""
        return cfg.table_name(self.config, "") if cfg.names_one_table(self.config) else None

    # ---- the runtime's hooks -------------------------------------------------------------------

    def restate(self, plan: BatchPlan) -> dict[str, str] | None:
        self._reruns.add(plan.batch_id)
        return None  # nothing of the stored plan changes

    def write(self, records: pa.Table, plan: BatchPlan) -> None:
        """A collected batch (the runtime hands frames, ``write_frame``; kept for the contract)."""
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:
            raise LakeSinkError(f"connector {self.name!r}: no Spark session to write the batch with")
        self.write_frame(spark.createDataFrame(records), plan)

    def write_frame(self, records: DataFrame, plan: BatchPlan) -> None:
        session = self._task_session(records.sparkSession)
        view = f"sluice_batch_{hashlib.sha1(plan.connector.encode()).hexdigest()[:10]}_{self.task_id}"
        records.createOrReplaceGlobalTempView(view)
        try:
            for name, part in self._by_table(session.table(f"global_temp.{view}"), plan):
                self._write_table(self._table(session, name), part, plan)
        finally:
            session.catalog.dropGlobalTempView(view)
            self._reruns.discard(plan.batch_id)

    def close(self) -> None:
        self._session = None  # shares the worker's SparkContext: nothing of its own to stop

    # ---- one batch -----------------------------------------------------------------------------

    def _task_session(self, spark: SparkSession) -> SparkSession:
        if self._session is None:
            self._session = spark.newSession()
            self._configure(self._session)
        return self._session

    def _by_table(self, frame: DataFrame, plan: BatchPlan) -> Iterator[tuple[str, DataFrame]]:
        """The batch's records per target table. Without a fixed table and with transforms (a
        RegexRouter may rename topics), the batch's topics are looked up: the records are cached
        so that lookup and the writes read the broker once."""
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        fixed = self._fixed_table()
        if fixed is not None:
            yield fixed, frame
            return
        topics = sorted({r.topic for r in plan.ranges if not r.is_empty and r.topic})
        if len(topics) == 1 and not self.config.get("transforms"):
            yield cfg.table_name(self.config, topics[0]), frame
            return
        frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            own = [F.col("headers")[h].alias(h) for h in (VALUE_SCHEMA_HEADER, KEY_SCHEMA_HEADER)]
            seen = frame.select("topic", *own).distinct().collect()
            for topic in sorted({r[0] for r in seen if r[0] is not None}):
                part = frame.where(F.col("topic") == topic)
                schemas = [r for r in seen if r[0] == topic]
                for column, header in (("value", VALUE_SCHEMA_HEADER), ("key", KEY_SCHEMA_HEADER)):
                    own_json = next((r[header] for r in schemas if r[header]), None)
                    if own_json:
                        part = narrowed(part, column, own_json)
                yield cfg.table_name(self.config, topic), part
        finally:
            frame.unpersist()

    def _write_table(self, table: LakeTable, records: DataFrame, plan: BatchPlan) -> None:
        ref = batch_ref(plan)
        where = f"connector {self.name!r} batch {plan.batch_id} table {table.shown}"
        if plan.batch_id in self._reruns and table.exists() and table.committed(ref):
            log.info("%s: committed before the crash that re-runs it (%s): not written again", where, ref)
            self._written.add(table.shown)
            return
        shaped = table_rows(records, self.rules)
        self._ready(table, shaped, where)
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            try:
                table.write(shaped, ref)
                break
            except Exception as exc:
                text = str(exc)
                if any(m in text for m in _INCOMPATIBLE):
                    problem = f"{where}: the rows do not fit the table: {_line(text)}"
                    raise ConnectorDataError(problem) from None
                if attempt == COMMIT_ATTEMPTS or not any(m in text for m in _CONFLICTS):
                    raise LakeSinkError(f"{where}: the write failed: {_line(text)}") from None
                log.info("%s: another writer committed first; writing again (%d)", where, attempt)
                time.sleep(0.2 * attempt)
        self._written.add(table.shown)

    def _ready(self, table: LakeTable, shaped: TableRows, where: str) -> None:
        """Create the table or add the rows' new columns, as the config allows."""
        if not table.exists():
            if table.shown in self._written:
                raise ConnectorDataError(
                    f"{where}: the table this task wrote is gone (deleted under the sink); not "
                    "created again, which would silently lose what it held: restore it, or reset "
                    "the connector's offsets to write it from the topics again"
                )
            if not self.config.get("auto.create", True):
                raise ConfigError([FieldError("auto.create", f"{where}: the table does not exist and "
                                              "auto.create is false")])  # fmt: skip
            table.create(shaped.rows, self.partition_by)
            log.info("%s: created", where)
            return
        have = {f.name.lower() for f in table.schema().fields}
        wanted = set(shaped.columns)
        new = [f for f in shaped.rows.schema.fields if f.name in wanted and f.name.lower() not in have]
        if not new:
            return
        if not self.config.get("auto.evolve", True):
            names = ", ".join(f.name for f in new)
            raise ConnectorDataError(f"{where}: the records have fields the table lacks ({names}) and "
                                     "auto.evolve is false")  # fmt: skip
        table.add_columns(new)
        log.info("%s: added columns %s", where, ", ".join(f.name for f in new))


def narrowed(records: DataFrame, column: str, own_json: str) -> DataFrame:
    """``value`` or ``key`` narrowed to its topic's own fields and types: when a batch's topics
    carry different schemas the json converter merges them into one struct and names each record's
    own in a header (``VALUE_SCHEMA_HEADER``), so each table gets its own columns, not every
    topic's (jdbc-sink's ``own_struct``, in Spark)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    own = StructType.fromJson(json.loads(own_json))
    have = {f.name for f in records.schema[column].dataType.fields}  # type: ignore[attr-defined]
    fields = [
        (F.col(f"{column}.`{f.name}`") if f.name in have else F.lit(None)).cast(f.dataType).alias(f.name)
        for f in own.fields
    ]
    kept = F.when(F.col(column).isNotNull(), F.struct(*fields))
    return records.withColumn(column, kept)


def _line(text: str) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), text)
    return first[:500]


class DeltaSinkTask(LakeSinkTask):
    @staticmethod
    def config_errors(config: Mapping[str, Any], owner: str) -> list[FieldError]:
        return cfg.delta_errors(config, owner)

    def _fixed_table(self) -> str | None:
        path = str(self.config.get("tablePath") or "").strip()
        return path or super()._fixed_table()

    def _table(self, session: SparkSession, name: str) -> LakeTable:
        if name == str(self.config.get("tablePath") or "").strip():
            return DeltaTable(session, name)
        location = str(self.config.get("delta.lake.tables.location") or "").rstrip("/")
        return DeltaTable(session, f"{location}/{name}")


class IcebergSinkTask(LakeSinkTask):
    @staticmethod
    def config_errors(config: Mapping[str, Any], owner: str) -> list[FieldError]:
        return cfg.iceberg_errors(config, owner)

    def _configure(self, session: SparkSession) -> None:
        catalog = cfg.spark_catalog_name(self.config)
        session.conf.set(f"spark.sql.catalog.{catalog}", "org.apache.iceberg.spark.SparkCatalog")
        # Uncached, unless the config says otherwise: a table changed under the sink (a column
        # dropped, the table deleted) must be seen by the next batch, not an hour later.
        session.conf.set(f"spark.sql.catalog.{catalog}.cache-enabled", "false")
        for key, value in cfg.catalog_properties(self.config).items():
            session.conf.set(f"spark.sql.catalog.{catalog}.{key}", value)

    def _fixed_table(self) -> str | None:
        if cfg.route_field(self.config):
            return None
        tables = cfg.list_of(self.config.get("iceberg.tables"))
        return tables[0] if tables else super()._fixed_table()

    def _by_table(self, frame: DataFrame, plan: BatchPlan) -> Iterator[tuple[str, DataFrame]]:
        """By ``iceberg.tables.route-field`` when one routes (cfg.routed_tables), else by topic.
        The route values are found in one job over the cached records, which the writes reuse. A
        record no table takes fails the batch naming its value and position: Iceberg's own sink
        would drop it, and Sluice loses nothing silently."""
        field = cfg.route_field(self.config)
        if not field:
            yield from super()._by_table(frame, plan)
            return
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        where = f"connector {self.name!r} batch {plan.batch_id}"
        if not _has_field(frame.schema["value"].dataType, field):
            raise ConfigError([FieldError("iceberg.tables.route-field", (
                f"{where}: the records' value has no field {field!r} to route by"))])  # fmt: skip
        value = F.col(f"value.{field}").cast("string")
        frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            # A tombstone has no value to route by: it is left out, and counted (a delete that is to
            # reach a routed table must carry its row: ExtractNewRecordState's rewrite mode).
            rows = frame.groupBy(F.col("value").isNull().alias("tombstone"), value.alias("route")).count()
            found = rows.collect()
            values = [r["route"] for r in found if not r["tombstone"]]
            tombstones = sum(r["count"] for r in found if r["tombstone"])
            if tombstones:
                log.info(
                    "%s: %d tombstone(s) left out: nothing to route them by (%s)", where, tombstones, field
                )
            tables, unrouted = cfg.routed_tables(self.config, values)
            if unrouted:
                lost = unrouted[0]
                routed_value = value.isNull() if lost is None else value == lost
                first = frame.where(F.col("value").isNotNull() & routed_value).first()
                at = (
                    f" (record at {position(first['topic'], first['partition'], first['offset'])})"
                    if first
                    else ""
                )
                raise ConnectorDataError(
                    f"{where}: no table takes route value {lost!r} of field {field!r}{at}; "
                    f"{len(unrouted)} value(s) unrouted: set iceberg.table.<table>.route-regex to take them"
                )
            for table, taken in sorted(tables.items()):
                yield table, frame.where(F.col("value").isNotNull() & value.isin(taken))
        finally:
            frame.unpersist()

    def _table(self, session: SparkSession, name: str) -> LakeTable:
        namespace, _, table = name.rpartition(".")
        namespace = namespace or str(self.config.get("iceberg.namespace") or "default")
        shown = f"{self.config.get('iceberg.catalog') or 'iceberg'}.{namespace}.{table}"
        return IcebergTable(session, (cfg.spark_catalog_name(self.config), namespace, table), shown)


def _has_field(data_type: DataType, path: str) -> bool:
    """Whether a struct has the (dotted) field ``path``."""
    from pyspark.sql.types import StructType

    for name in path.split("."):
        if not isinstance(data_type, StructType) or name not in data_type.fieldNames():
            return False
        data_type = data_type[name].dataType
    return True


class _LakeSinkConnector(SinkConnector):
    task_class: ClassVar[type[SinkTask]]

    def validate(self, raw_config: Mapping[str, Any]) -> list[FieldError]:
        errors = super().validate(raw_config)
        if not errors:
            name = str(raw_config.get("name") or self.plugin_name)
            task = self.task_class
            assert issubclass(task, LakeSinkTask)
            errors.extend(task.config_errors(self.parse(raw_config), f"connector {name!r}"))
        return errors

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        """``tasks.max`` tasks of one config; the runtime shares the topics' queues out by task id,
        and a key lives in one queue, so each key's rows are merged by one task, in order."""
        return [dict(config) for _ in range(max_tasks)]


class DeltaSinkConnector(_LakeSinkConnector):
    """Copies RocketMQ topics into Delta Lake tables: appends or MERGE upserts, exactly once."""

    plugin_name: ClassVar[str] = "delta-sink"
    config_def: ClassVar[ConfigDef] = cfg.DELTA_FIELDS
    task_class: ClassVar[type[SinkTask]] = DeltaSinkTask


class IcebergSinkConnector(_LakeSinkConnector):
    """Copies RocketMQ topics into Apache Iceberg tables: appends or MERGE upserts, exactly once."""

    plugin_name: ClassVar[str] = "iceberg-sink"
    config_def: ClassVar[ConfigDef] = cfg.ICEBERG_FIELDS
    task_class: ClassVar[type[SinkTask]] = IcebergSinkTask
