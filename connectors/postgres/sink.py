"""PostgreSQL sink: writes each micro-batch and commits its positions in one transaction.

Exactly once, not merely idempotent: a ``TransactionalSink`` (connectors.api). The batch's rows
are COPY'd and the plan is committed through the ``PositionCommitter`` the runtime handed over, on
the *same* connection, inside one ``engine.begin()``. If the worker dies anywhere before that
transaction commits, PostgreSQL rolls back rows and positions together; the runtime then finds the
plan pending and re-runs it with the same ranges. Hence Sluice's positions must live in the
database named by ``connection.url`` (checked when the committer is bound).

Lifecycle (as the runtime drives it):

1. Build the task (``open_sink_task``); the runtime calls ``bind_positions(committer)``.
2. ``prepare(plan)`` returns ``{}``: nothing needs undoing, a failed attempt left nothing behind.
3. ``write(spark, records, plan)`` writes *and commits*; the runtime does not commit this task's
   plans itself.
4. ``close()`` disposes the task's connection pool.

Row shape: a struct ``value`` gives one column per field. Any other value (a string, JSON text,
bytes) is written with the record's coordinates: ``topic, partition, offset, key, value, timestamp``
— with ``pk.fields=topic,partition,offset`` that table is also idempotent for other writers.

The driver collects each batch as Arrow (``toArrow``) and streams it in chunks as CSV into COPY:
batches are bounded by the admission limits, and a single connection is what makes the commit
atomic. Memory on the driver is about one batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from sqlalchemy import Connection, Engine, create_engine, func, select, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError

from connectors.api import Delivery, SinkConnector, SinkTask
from connectors.config import ConfigDef, ConfigError, ConfigField, FieldError, non_empty
from connectors.model import BatchPlan
from connectors.postgres.ddl import copy_ready_columns, create_table_sql, qualified
from connectors.postgres.load import ORD_COLUMN, insert_rows, table_columns, upsert_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from connectors.api import PositionCommitter

RECORD_FIELDS = ("topic", "partition", "offset", "key", "value", "timestamp")


class PostgresSinkError(RuntimeError):
    """Writing a batch failed; names connector, task, batch and table (never the URL)."""


def sqlalchemy_url(raw: str) -> URL:
    """The SQLAlchemy URL for ``connection.url``: psycopg 3 driver; a ``jdbc:`` prefix is accepted.

    Raises ValueError without echoing the URL (it may contain a password).
    """
    text_url = raw.strip().removeprefix("jdbc:")
    try:
        url = make_url(text_url)
    except ArgumentError:
        raise ValueError("not a database URL (expected postgresql://user@host:port/db)") from None
    if url.get_backend_name() not in ("postgresql", "postgres"):
        raise ValueError(f"not a PostgreSQL URL (backend {url.get_backend_name()!r})")
    return url.set(drivername="postgresql+psycopg")


def _url_problem(value: Any) -> str | None:
    try:
        sqlalchemy_url(str(value))
    except ValueError as exc:
        return str(exc)
    return None


FIELDS = ConfigDef(
    (
        ConfigField(
            "connection.url",
            str,
            doc="PostgreSQL URL (postgresql://user:pw@host:port/db)",
            secret=True,
            validator=_url_problem,
        ),
        ConfigField("table", str, doc="target table", validator=non_empty),
        ConfigField("schema", str, "public", doc="target table's schema", validator=non_empty),
        ConfigField(
            "insert.mode",
            str,
            "insert",
            doc="insert appends; upsert updates by pk.fields",
            choices=("insert", "upsert"),
        ),
        ConfigField("pk.fields", list[str], [], doc="key columns for upsert and auto.create"),
        ConfigField("auto.create", bool, False, doc="create the table from the records' fields"),
    )
)


def _cross_field_errors(config: Mapping[str, Any], owner: str) -> list[FieldError]:
    mode = str(config.get("insert.mode") or "insert")
    pk = config.get("pk.fields") or []
    if mode == "upsert" and not pk:
        return [FieldError("pk.fields", f"{owner}: field 'pk.fields' is required when insert.mode=upsert")]
    return []


class PostgresSinkTask(SinkTask):
    """Writes a batch with COPY and commits its plan in the same PostgreSQL transaction."""

    delivery: ClassVar[Delivery] = Delivery.EXACTLY_ONCE

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        super().__init__(config, task_id)
        owner = f"connector {self.name!r}"
        errors = _cross_field_errors(self.config, owner)
        if errors:
            raise ConfigError(errors)
        self._url = sqlalchemy_url(str(self.config["connection.url"]))
        self._committer: PositionCommitter | None = None
        self._table = str(self.config["table"])
        self._schema = str(self.config.get("schema") or "public")
        self._mode = str(self.config.get("insert.mode") or "insert")
        self._pk = [str(k) for k in self.config.get("pk.fields") or []]
        self._auto_create = bool(self.config.get("auto.create", False))
        self._engine: Engine | None = None

    def bind_positions(self, committer: PositionCommitter) -> None:
        """Called by the runtime; refused (as a config error) when positions live in another database."""
        if not committer.same_database(self._url.render_as_string(hide_password=False)):
            message = (
                f"connector {self.name!r}: field 'connection.url' names another database than the offset "
                "store; exactly-once needs the store's schema in the target database"
            )
            raise ConfigError([FieldError("connection.url", message)])
        self._committer = committer

    @property
    def target(self) -> str:
        return f"{self._schema}.{self._table}"

    def _where(self, plan: BatchPlan) -> str:
        return f"connector {self.name!r} task {self.task_id} batch {plan.batch_id} table {self.target!r}"

    def _positions(self) -> PositionCommitter:
        committer = self._committer
        if committer is None:
            raise PostgresSinkError(
                f"connector {self.name!r} task {self.task_id}: no position committer bound "
                "(the runtime calls bind_positions before the first write)"
            )
        return committer

    def _get_engine(self) -> Engine:
        if self._engine is None:
            self._engine = create_engine(self._url, pool_pre_ping=True, pool_size=1, max_overflow=1)
        return self._engine

    def prepare(self, plan: BatchPlan) -> dict[str, str]:
        return {}

    def rows(self, records: DataFrame) -> tuple[DataFrame, StructType]:
        """The records as table rows, and the Spark fields the table columns are typed from.

        A struct value gives its fields; any other value gives the record coordinates. Nested
        and binary fields are turned into text COPY can carry (see ``copy_ready_columns``).
        """
        from pyspark.sql.types import StructType

        # Record order decides which of several records with one key wins an upsert.
        ordered = records.orderBy("topic", "partition", "offset") if self._mode == "upsert" else records
        value_type = records.schema["value"].dataType
        if isinstance(value_type, StructType):
            frame, fields = ordered.select("value.*"), value_type
        else:
            cols = [f"`{c}`" if c != "value" else "CAST(value AS STRING) AS value" for c in RECORD_FIELDS]
            frame = ordered.selectExpr(*cols)
            fields = frame.schema
        exprs = [f"{expr} AS `{name.replace('`', '``')}`" for name, expr in copy_ready_columns(fields)]
        return frame.selectExpr(*exprs), fields

    def write(self, spark: SparkSession, records: DataFrame, plan: BatchPlan) -> None:
        """Write the batch's rows and commit ``plan``, atomically (see the module docstring)."""
        import pyarrow as pa

        committer = self._positions()
        frame, fields = self.rows(records)
        arrow = frame.toArrow()
        columns = list(frame.columns)
        try:
            with self._get_engine().begin() as conn:
                self._ensure_table(conn, fields, columns, plan)
                if self._mode == "upsert":
                    ordinals = pa.array(range(arrow.num_rows), type=pa.int64())
                    upsert_rows(
                        conn,
                        self._schema,
                        self._table,
                        columns,
                        self._pk,
                        arrow.append_column(ORD_COLUMN, ordinals),
                    )
                else:
                    insert_rows(conn, self._schema, self._table, columns, arrow)
                committer.commit(plan, conn)
        except DBAPIError as exc:
            raise PostgresSinkError(f"{self._where(plan)}: {type(exc.orig).__name__}: {exc.orig}") from exc

    def _ensure_table(
        self, conn: Connection, fields: StructType, columns: list[str], plan: BatchPlan
    ) -> None:
        existing = table_columns(conn, self._schema, self._table)
        if existing is None:
            if not self._auto_create:
                raise PostgresSinkError(f"{self._where(plan)}: table does not exist (set auto.create=true)")
            # Two tasks creating the same table at once would race in the catalog: serialise.
            conn.execute(
                select(func.pg_advisory_xact_lock(func.hashtext(qualified(self._schema, self._table))))
            )
            ddl = create_table_sql(self._schema, self._table, fields, self._pk, f"connector {self.name!r}")
            conn.execute(text(ddl))
            existing = table_columns(conn, self._schema, self._table) or []
        missing = [c for c in columns if c not in existing]
        if missing:
            raise PostgresSinkError(
                f"{self._where(plan)}: the table has no column(s) {missing} (has {existing})"
            )

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


class PostgresSinkConnector(SinkConnector):
    """Copies RocketMQ topics into a PostgreSQL table, exactly once."""

    plugin_name: ClassVar[str] = "postgres-sink"
    config_def: ClassVar[ConfigDef] = FIELDS
    task_class: ClassVar[type[SinkTask]] = PostgresSinkTask

    def validate(self, raw_config: Mapping[str, Any]) -> list[FieldError]:
        errors = super().validate(raw_config)
        if not errors:
            name = str(raw_config.get("name") or self.plugin_name)
            errors.extend(_cross_field_errors(self.parse(raw_config), f"connector {name!r}"))
        return errors
