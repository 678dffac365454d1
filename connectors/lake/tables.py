"""Delta Lake and Iceberg tables as the lake sinks use them: exists, create, add columns, append,
merge, and "was this batch committed already".

Every operation runs in the sink task's own Spark session (``SparkSession.newSession``: the
worker's SparkContext, its own SQL settings), because the batch reference travels in session
settings — Delta's commit ``userMetadata``, an Iceberg snapshot property — which a MERGE cannot
take as a write option, and tasks share the worker's session. The reference marks the table
commit; a re-run batch looks for it in the table's history and writes nothing when found.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from sluice.connectors.lake.rows import DELETE_COLUMN, TableRows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

#: Commits searched for a re-run batch's reference: a re-run follows its crash within minutes,
#: and tasks sharing the table commit a few times a second at most.
HISTORY_SEARCHED = 1000
#: The Iceberg snapshot summary key of the batch reference.
BATCH_PROPERTY = "sluice.batch"


def quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class LakeTable(ABC):
    """One target table, in the task's session."""

    def __init__(self, session: SparkSession, shown: str) -> None:
        self.session = session
        #: how messages name the table (a path, or catalog.namespace.name)
        self.shown = shown

    @property
    @abstractmethod
    def sql_name(self) -> str: ...

    @abstractmethod
    def exists(self) -> bool: ...

    @abstractmethod
    def create(self, schema_of: DataFrame, partition_by: list[str]) -> None: ...

    @abstractmethod
    def committed(self, ref: str) -> bool:
        """Whether a commit of this table carries the batch reference ``ref``."""

    @abstractmethod
    def _marking(self, ref: str | None) -> None:
        """Set (or, with None, clear) the session setting that marks commits with ``ref``."""

    @abstractmethod
    def _append(self, rows: DataFrame) -> None: ...

    def schema(self) -> StructType:
        return self.session.table(self.sql_name).schema

    def add_columns(self, fields: list[Any]) -> None:
        columns = ", ".join(f"{quoted(f.name)} {f.dataType.simpleString()}" for f in fields)
        self.session.sql(f"ALTER TABLE {self.sql_name} ADD COLUMNS ({columns})")

    def write(self, shaped: TableRows, ref: str) -> None:
        """Append the rows, or MERGE them on their keys; one commit marked with ``ref``."""
        self._marking(ref)
        try:
            if shaped.keys:
                self._merge(shaped)
            else:
                self._append(shaped.rows)
        finally:
            self._marking(None)

    def _merge(self, shaped: TableRows) -> None:
        view = f"sluice_rows_{id(shaped)}"
        shaped.rows.createOrReplaceTempView(view)
        try:
            on = " AND ".join(f"t.{quoted(k)} <=> s.{quoted(k)}" for k in shaped.keys)
            columns = [quoted(c) for c in shaped.columns]
            updates = ", ".join(f"t.{c} = s.{c}" for c in columns)
            names, values = ", ".join(columns), ", ".join(f"s.{c}" for c in columns)
            self.session.sql(
                f"MERGE INTO {self.sql_name} t USING {view} s ON {on} "
                f"WHEN MATCHED AND s.{DELETE_COLUMN} THEN DELETE "
                f"WHEN MATCHED THEN UPDATE SET {updates} "
                f"WHEN NOT MATCHED AND NOT s.{DELETE_COLUMN} THEN INSERT ({names}) VALUES ({values})"
            )
        finally:
            self.session.catalog.dropTempView(view)


class DeltaTable(LakeTable):
    """A Delta table by path (``delta.`<path>```): any Hadoop path, no metastore needed."""

    USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"

    def __init__(self, session: SparkSession, path: str) -> None:
        super().__init__(session, path)
        self.path = path

    @property
    def sql_name(self) -> str:
        return f"delta.{quoted(self.path)}"

    def exists(self) -> bool:
        jvm = self.session._jvm
        assert jvm is not None  # a classic session: the lake sinks need the JVM's jars
        return bool(jvm.io.delta.tables.DeltaTable.isDeltaTable(self.session._jsparkSession, self.path))

    def create(self, schema_of: DataFrame, partition_by: list[str]) -> None:
        empty = schema_of.limit(0).drop(DELETE_COLUMN)
        empty.write.format("delta").partitionBy(*partition_by).mode("append").save(self.path)

    def committed(self, ref: str) -> bool:
        from pyspark.sql import functions as F

        history = self.session.sql(f"DESCRIBE HISTORY {self.sql_name} LIMIT {HISTORY_SEARCHED}")
        return bool(history.where(F.col("userMetadata") == ref).limit(1).count())

    def _marking(self, ref: str | None) -> None:
        if ref is None:
            self.session.conf.unset(self.USER_METADATA)
        else:
            self.session.conf.set(self.USER_METADATA, ref)

    def _append(self, rows: DataFrame) -> None:
        rows.write.format("delta").mode("append").save(self.path)


class IcebergTable(LakeTable):
    """An Iceberg table of a catalog the task registered in its session."""

    SNAPSHOT_PROPERTY = f"spark.sql.iceberg.snapshot-property.{BATCH_PROPERTY}"

    def __init__(self, session: SparkSession, parts: tuple[str, str, str], shown: str) -> None:
        super().__init__(session, shown)
        self.parts = parts

    @property
    def sql_name(self) -> str:
        return ".".join(quoted(p) for p in self.parts)

    def exists(self) -> bool:
        return bool(self.session.catalog.tableExists(self.sql_name))

    def create(self, schema_of: DataFrame, partition_by: list[str]) -> None:
        from pyspark.sql import functions as F

        catalog, namespace, _ = self.parts
        self.session.sql(f"CREATE NAMESPACE IF NOT EXISTS {quoted(catalog)}.{quoted(namespace)}")
        writer = schema_of.limit(0).drop(DELETE_COLUMN).writeTo(self.sql_name).using("iceberg")
        if partition_by:
            writer = writer.partitionedBy(*[F.col(quoted(c)) for c in partition_by])
        writer.create()

    def _merge(self, shaped: TableRows) -> None:
        """Iceberg's MERGE reads its source twice and refuses a non-deterministic one (the batch's
        checks raise errors, its parse barrier reads the partition id): the rows are materialised
        once on the executors (``localCheckpoint``) and merged from there."""
        super()._merge(TableRows(shaped.rows.localCheckpoint(), shaped.keys))

    def committed(self, ref: str) -> bool:
        from pyspark.sql import functions as F

        snapshots = self.session.table(f"{self.sql_name}.snapshots")
        return bool(snapshots.where(F.col("summary")[BATCH_PROPERTY] == ref).limit(1).count())

    def _marking(self, ref: str | None) -> None:
        if ref is None:
            self.session.conf.unset(self.SNAPSHOT_PROPERTY)
        else:
            self.session.conf.set(self.SNAPSHOT_PROPERTY, ref)

    def _append(self, rows: DataFrame) -> None:
        rows.writeTo(self.sql_name).append()
