"""The connector contract: what a source or sink plugin implements and the runtime calls.

Kafka Connect's shape (Connector splits work into task configs; tasks move data), reworked for
micro-batches: a source task does not ``poll`` — it reports positions and reads an exact, half-open
range as Arrow record batches (``SourceRead``: no PySpark in a source), so a recorded plan can be
replayed identically. A sink task writes one planned batch, an Arrow table (no PySpark in a sink
either), and must give the same result when the same plan is re-run.

Source batch lifecycle (driven by the runtime, one task; ``sluice.connectors.planner`` plans every batch):
  1. The task is built from its parsed, secret-resolved config; ``partitions()`` names what it reads.
  2. Per batch: ``earliest_positions()`` and ``latest_positions(committed)`` (exclusive ends; a
     source whose partitions can be replaced puts an ``id`` in the positions' meta, and the planner
     treats a changed id as data loss), ``backlog`` to share the batch limit fairly, and
     ``batch_end(partition, start, latest, budget)`` to decide where at most ``budget`` units
     (``position_unit``: records or bytes) from ``start`` end — ``WHERE key > start ORDER BY key
     LIMIT n`` semantics, so limits hold for keys with gaps and for composite positions.
  3. The plan is recorded; ``read(ranges)`` returns exactly those records, in Arrow; transforms,
     converter and the RocketMQ writer follow; positions commit; then a task that is a
     :class:`CommitListener` hears ``committed(plan)`` (a CDC source releases the log it no longer
     needs: advances its replication slot).
  4. ``close()`` when the task ends, on every exit path (stop, failure, cancellation, worker
     shutdown), from a ``finally``.

Sink batch lifecycle:
  1. The runtime plans queue ranges and calls ``prepare(plan)``; the returned state is recorded
     with the plan *before* anything is written.
  2. ``write(records, plan)`` with ``plan.sink_state`` set to that state: the batch's records in
     Arrow, made by the sink's stages (read, decode, transforms, checks: connectors.sink_stages) in
     the worker's process or in the tasks of the batch's Spark job, so no sink imports PySpark; a
     :class:`StagesOnExecutors` sink has a Spark batch's records staged by those tasks and merged
     by ``write_staged`` instead. Re-run with the same plan after a crash it must leave the target
     as one successful run would (``Delivery``).
  3. Positions commit — by the runtime after ``write``, or, for a :class:`TransactionalSink`, by the
     sink itself inside its data transaction through the :class:`PositionCommitter` it was handed.
  4. ``close()`` when the task ends, on every exit path.

Connector lifecycle (validation and task splitting, in the validate activity): ``validate(raw)``;
then ``start(config)``, ``task_configs(config, max_tasks)``, ``stop()`` (in a ``finally``).

No module-level pyspark import: config validation (the CLI, the REST API) imports the connector classes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from sluice.connectors.config import (
    COMMON_SINK_FIELDS,
    COMMON_SOURCE_FIELDS,
    ConfigDef,
    FieldError,
)
from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.positions import Position, offset_backlog, offset_batch_end
from sluice.connectors.records import RecordError
from sluice.connectors.source_reads import SourceRead

if TYPE_CHECKING:
    import pyarrow as pa

    from sluice.connectors.backfills import Backfill


class Delivery(StrEnum):
    """What a sink guarantees when a plan is re-run after a crash."""

    EXACTLY_ONCE = "exactly_once"  # re-running a plan leaves the target as one run would
    IDEMPOTENT = "idempotent"  # writes keyed by record position: duplicates overwrite themselves
    AT_LEAST_ONCE = "at_least_once"  # a re-run may duplicate records


class Connector(ABC):  # noqa: B024 - every hook has a default; subclasses declare config
    """Common base of source and sink connectors: declared config and work splitting.

    Lifecycle: 1. ``validate(raw)`` (REST/CLI, before anything runs); 2. ``start(config)``;
    3. ``task_configs(config, max_tasks)``; 4. ``stop()``. Connector objects are cheap and short-lived
    (built inside activities); tasks hold the resources.
    """

    config_def: ClassVar[ConfigDef] = ConfigDef(())
    common_fields: ClassVar[ConfigDef] = ConfigDef(())
    #: short plugin name, used in error messages ("file-source")
    plugin_name: ClassVar[str] = ""

    @classmethod
    def full_config_def(cls, name: str = "") -> ConfigDef:
        """The connector's fields plus the common runtime fields, owned by ``connector '<name>'``."""
        owner = f"connector {(name or cls.plugin_name or cls.__name__)!r}"
        return cls.common_fields.extend(cls.config_def, owner=owner)

    def validate(self, raw_config: Mapping[str, Any]) -> list[FieldError]:
        """Every problem of ``raw_config``: declared fields, common fields and the transform chain."""
        name = str(raw_config.get("name") or "")
        errors = self.full_config_def(name).validate(raw_config)
        if raw_config.get("transforms"):  # the transforms are Arrow stages: only then load pyarrow
            from sluice.connectors.transforms import chain_errors

            errors.extend(chain_errors(raw_config, owner=f"connector {(name or self.plugin_name)!r}"))
        return errors

    def parse(self, raw_config: Mapping[str, Any]) -> dict[str, Any]:
        """Typed config (defaults applied, dynamic keys kept); raises ConfigError listing every problem."""
        return self.full_config_def(str(raw_config.get("name") or "")).parse(raw_config)

    def start(self, config: Mapping[str, Any]) -> None:  # noqa: B027 - optional hook
        """Optional: connect to the source system to discover partitions etc."""

    def stop(self) -> None:  # noqa: B027 - optional hook
        """Optional: release what ``start`` acquired."""

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        """Split work into at most ``max_tasks`` raw task configs (default: one task, same config)."""
        return [dict(config)]


class SourceTask(ABC):
    """Reads exact position ranges of the partitions it owns; see the module docstring lifecycle.

    ``config`` is parsed (typed) and secret-resolved. Positions (connectors.positions) are "next
    position to read": ``latest_positions()`` is exclusive. ``read`` must be a pure function of the
    ranges. The defaults suit single-integer offsets (records or bytes); a source with composite
    positions overrides ``backlog`` and ``batch_end``.
    """

    position_unit: ClassVar[str] = "records"  # or "bytes": which unit batch limits count
    #: whether a re-read of a range gives the same records (a file, a table, a queue): a re-run
    #: after a crash then leaves out what an earlier attempt sent, for exactly once. False for a
    #: source that is handed its records again (an MQTT session's unacknowledged messages): a
    #: re-run sends all it reads, at least once.
    replays_exactly: ClassVar[bool] = True
    #: whether reading it leaves its system as it was (``sluice connector preview`` reads a new
    #: config's first batch and must change nothing): False where a read creates state there, such
    #: as a replication slot or a persistent session
    previewable: ClassVar[bool] = True

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        self.config = dict(config)
        self.task_id = task_id

    @property
    def name(self) -> str:
        return str(self.config.get("name") or self.config.get("connector.class") or type(self).__name__)

    @abstractmethod
    def partitions(self) -> list[str]:
        """The opaque source-partition keys this task owns."""

    @abstractmethod
    def latest_positions(self, committed: Mapping[str, Position]) -> dict[str, Position]:
        """Exclusive end available now per partition; a vanished partition is left out."""

    def earliest_positions(self) -> dict[str, Position]:
        """The first position still retained per partition (data-loss detection)."""
        return {p: Position((0,)) for p in self.partitions()}

    def backlog(self, partition: str, start: Position, latest: Position) -> int | None:
        """Units between ``start`` and ``latest``; None when unknown without reading."""
        return offset_backlog(start, latest)

    def batch_end(self, partition: str, start: Position, latest: Position, budget: int | None) -> Position:
        """Where a batch of at most ``budget`` units from ``start`` ends (on a record boundary)."""
        return offset_batch_end(start, latest, budget)

    @abstractmethod
    def read(self, ranges: Sequence[PartitionRange]) -> SourceRead:
        """The records of exactly ``ranges`` in Arrow, in the record columns (connectors.records):
        tables built here, or splits the runtime reads in Spark tasks (connectors.source_reads)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release files, connections."""


class SinkTask(ABC):
    """Writes one planned batch of records, in Arrow; see the module docstring lifecycle.

    A sink whose target is Spark's own (a Delta or Iceberg table) takes the batch's DataFrame
    instead of a collected table: it declares that as an optional ability (``WritesFrames``), and
    no other sink sees Spark.
    """

    delivery: ClassVar[Delivery] = Delivery.AT_LEAST_ONCE

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        self.config = dict(config)
        self.task_id = task_id

    @property
    def name(self) -> str:
        return str(self.config.get("name") or self.config.get("connector.class") or type(self).__name__)

    def prepare(self, plan: BatchPlan) -> dict[str, str]:
        """State recorded with the plan before writing (e.g. a file's length); JSON strings only."""
        return {}

    @abstractmethod
    def write(self, records: pa.Table, plan: BatchPlan) -> None:
        """Write ``records``: the plan's records after converter and transforms, in the record
        columns (connectors.records) in the order read; repeatable per plan."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release files, connections."""


class SourceConnector(Connector):
    common_fields: ClassVar[ConfigDef] = ConfigDef(COMMON_SOURCE_FIELDS)
    task_class: ClassVar[type[SourceTask]]


class SinkConnector(Connector):
    common_fields: ClassVar[ConfigDef] = ConfigDef(COMMON_SINK_FIELDS)
    task_class: ClassVar[type[SinkTask]]

    def validate(self, raw_config: Mapping[str, Any]) -> list[FieldError]:
        """Fields, then: exactly one of ``topics`` and ``topics.regex`` (Kafka Connect's rule)."""
        errors = super().validate(raw_config)
        if not any(e.field in ("topics", "topics.regex") for e in errors):
            name = str(raw_config.get("name") or self.plugin_name)
            errors.extend(topics_errors(self.full_config_def(name).canonical(raw_config), name))
        return errors


def topics_errors(raw: Mapping[str, Any], name: str) -> list[FieldError]:
    given = [k for k in ("topics", "topics.regex") if str(raw.get(k) or "").strip()]
    if len(given) == 1:
        return []
    what = "both are set" if given else "neither is set"
    return [
        FieldError("topics", f"connector {name!r}: set exactly one of 'topics' and 'topics.regex' ({what})")
    ]


class PositionCommitter(Protocol):
    """What the runtime hands a :class:`TransactionalSink`: Sluice's positions, committable on the
    sink's own database connection. The sink never sees the offset store itself."""

    def same_database(self, database_url: str) -> bool:
        """Whether positions live in the database ``database_url`` names (exactly-once needs it)."""
        ...

    def commit(self, plan: BatchPlan, connection: Any | None) -> None:
        """Commit ``plan``'s positions inside the caller's open transaction on ``connection``.

        With ``connection=None`` the positions commit in the store's own transaction: for a sink
        whose target is another database, called right after its data transaction committed. Such
        a sink keeps its own ledger of applied batches in the target (written in the data
        transaction) so that the re-run of a plan that crashed between the two commits writes no
        row again and only commits the positions (connectors.jdbc.ledger).
        """
        ...


@dataclass(frozen=True)
class Rejected:
    """One record the sink's target refused: its position and the target's reason."""

    topic: str | None
    partition: str
    offset: int
    reason: str


class RejectedRecordsError(RecordError):
    """A sink's target refused some records of a batch (a constraint, a value that does not fit);
    nothing of the batch was committed. The runtime fails the task naming them or, with
    ``errors.tolerance=all``, sends them to the dead-letter topic and writes the rest."""

    def __init__(self, message: str, rejected: Sequence[Rejected]) -> None:
        super().__init__(message)
        self.rejected = tuple(rejected)


@runtime_checkable
class TransactionalSink(Protocol):
    """Optional ability of a sink task: data and positions commit in one transaction (exactly once).

    The runtime calls ``bind_positions`` once after building the task and then does not commit
    the sink's plans itself; ``write`` must call ``committer.commit(plan, connection)`` as the
    last statement of its data transaction.
    """

    def bind_positions(self, committer: PositionCommitter) -> None: ...


class SendOrder(Enum):
    """What a source task's read guarantees about order, so the runtime keeps each key's order in
    its queue at the least cost (``KnowsSendOrder``)."""

    #: nothing: the runtime sends from one Spark task, sorted by source position
    SORTED = "sorted"
    #: the read's Spark partitions, taken in order, are in source order: one task, no sort
    AS_READ = "as-read"
    #: a key appears at most once in a read (a table read by primary key): every Spark task sends
    #: its own rows, in parallel, and no key's order can be broken
    ANY = "any"


@runtime_checkable
class KnowsSendOrder(Protocol):
    """Optional ability of a source task: say how ordered a read of ``ranges`` is (``SendOrder``).

    The runtime trusts it only when the connector has no transforms (a transform may re-key
    records or reorder them); otherwise it sorts, as for any other source."""

    def send_order(self, ranges: Sequence[PartitionRange]) -> SendOrder:
        """How the records ``read(ranges)`` returns may be sent."""
        ...


@runtime_checkable
class OrdersBarriers(Protocol):
    """Optional ability of a sink task: it takes every copy of a barrier (connectors.barriers).

    A source sends a record ordered against all keys of its table (a truncate event) to every
    queue of its topic. Other sinks get only copy ``0/n``, so they see the record once; a sink with
    this ability gets each copy, in its queue's order, and orders its writes across queues with
    ``connectors.barriers.cut_at_barriers``. The copies carry the headers ``sluice.barrier``
    (``<i>/<n>``) and ``sluice.barrier.queues`` (the queues sent to), and their source position
    (``sluice.partition``, ``sluice.offset``).
    """

    def orders_barriers(self) -> bool:
        """Whether this task acts on barriers (e.g. only with ``truncate.enabled``)."""
        ...


@runtime_checkable
class WritesFrames(Protocol):
    """Optional ability of a sink task whose target Spark writes itself (Delta Lake, Iceberg).

    The runtime hands such a task the batch's checked records as a Spark DataFrame instead of
    collecting them into an Arrow table on the driver (``SinkTask.write``): the task's write is
    the batch's one Spark job, run by the executors, and the table format's commit is the write's
    end. The records are those ``write`` would get (``sluice.connectors.records`` columns, error
    columns dropped); bad ones already failed the job or went to the dead-letter topic. The runtime
    commits the batch's positions after ``write_frame`` returns, so a task makes a re-run of a
    committed batch write nothing (``RestatesPlans`` tells it which plans are re-runs).
    """

    def write_frame(self, records: Any, plan: BatchPlan) -> None:
        """Write ``records`` (a ``pyspark.sql.DataFrame``) for ``plan``."""
        ...


@runtime_checkable
class StagesOnExecutors(Protocol):
    """Optional ability of a sink task: a batch run as a Spark job is staged by the job's tasks.

    Each Spark task hands its share of the checked records (what ``write`` would get, one Arrow
    table per partition) to the stager, wherever the cluster runs it; the stager loads it into the
    target's staging area and returns a small, picklable description of what it staged. Only those
    descriptions reach the driver, where ``write_staged`` merges the staged rows into the target
    and commits the batch's positions with them, in one transaction (a ``TransactionalSink``).
    A batch in the worker's own process is written by ``write`` as before: the same records.
    """

    def stager(self, plan: BatchPlan) -> Callable[[pa.Table, int], Any] | None:
        """The function a Spark task runs on its partition's records (``(records, partition)``:
        ``partition`` numbers the job's partitions), or None when this batch is written from the
        driver (``write``)."""
        ...

    def write_staged(self, shares: Sequence[Any], plan: BatchPlan) -> None:
        """Merge what the stager staged (every partition's result, in partition order) and commit
        ``plan``; raises ``StagedRowsRefused`` when the target refuses rows of the batch."""
        ...


class StagingTask(Protocol):
    """A sink task that stages a share of a batch where a Spark task runs (``TaskStager``)."""

    def stage(self, records: pa.Table, plan: BatchPlan, partition: int) -> Any: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class TaskStager:
    """A ``StagesOnExecutors.stager`` made of the sink task's own class and config: the Spark task
    rebuilds the sink task where it runs, calls its ``stage(records, plan, partition)`` and closes
    it. It travels pickled in the job's plan, as every ``mapInArrow`` function does."""

    task_class: Callable[[Mapping[str, Any], int], StagingTask]
    config: Mapping[str, Any]
    task_id: int
    plan: BatchPlan

    def __call__(self, records: pa.Table, partition: int) -> Any:
        task = self.task_class(self.config, self.task_id)
        try:
            return task.stage(records, self.plan, partition)
        finally:
            task.close()


class StagedRowsRefused(RecordError):
    """The target refused rows of a staged batch (a constraint, a value that does not convert);
    nothing was committed. The runtime writes the batch's records from the driver (``write``),
    which names each refused record (``RejectedRecordsError``)."""


@runtime_checkable
class RestatesPlans(Protocol):
    """Optional ability of a sink task whose ``prepare`` state belongs to its configuration (a file
    sink's length of *its* file): a plan recorded before a reconfigure is re-run with the new config.

    The runtime asks before re-running a recorded plan; a new state replaces the stored one in the
    same store row (so a crash during that re-run still undoes its partial write exactly)."""

    def restate(self, plan: BatchPlan) -> dict[str, str] | None:
        """The state this task would record for ``plan`` now, or None when the stored one still holds."""
        ...


@runtime_checkable
class ReportsWaiting(Protocol):
    """Optional ability of a source task: say what it waits for when it cannot read (a file that does
    not exist yet), or a state worth showing (an MQTT session: its broker and subscriptions); the
    runtime shows it per task in status and the Temporal UI, reported when it changes."""

    def waiting_for(self) -> str:
        """A short text naming what is missing, or "" when nothing is."""
        ...


@runtime_checkable
class CommitListener(Protocol):
    """Optional ability of a source task: told after each batch's positions are committed.

    Why: a source whose log is kept for it until it says so (a PostgreSQL replication slot) may let
    go of a range only once the range's positions are durable in the store — never before, or a
    crash between the two would lose the range. The call comes after the store's commit, so it can
    be missed (a crash right after the commit): the task must also catch up from the committed
    positions it is handed at the next planning (``latest_positions``). A failure here is logged,
    not raised: the batch is committed.
    """

    def committed(self, plan: BatchPlan) -> None: ...


@runtime_checkable
class KnowsEmptyRanges(Protocol):
    """Optional ability of a source task: tell, without Spark, that a planned range holds no records.

    Why: a change-capture batch moves every captured table to the same log point, so most of its
    ranges are usually empty, and the runtime would otherwise run a whole read-convert-send job
    for each of them (seconds on a busy 2-core machine). ``False`` must be certain; ``True`` may
    be a guess (the range is then read as usual). Called after planning, before ``read``."""

    def holds_records(self, r: PartitionRange) -> bool: ...


@runtime_checkable
class TakesBackfills(Protocol):
    """Optional ability of a source task: ranges of its tables read again while it streams
    (``sluice connector backfill``; connectors.backfills says how a request is applied once).

    ``take_backfills`` is called with the connector's requests before every planning; the task
    opens, reads and ends each table's re-read in its snapshot partition ``snapshot:<table>``
    (connectors.key_chunks). The other three serve the request before it is stored, against the
    source: which tables the task reads, the condition ``--from/--to`` make (on ``column``, or with
    "" the table's timestamp, incrementing or one-column primary key; ValueError when it has none),
    and what is wrong with a request (the table has no primary key, the condition is not valid SQL
    there; None when nothing)."""

    def take_backfills(self, requests: Sequence[Backfill]) -> None: ...

    def backfill_tables(self) -> list[str]: ...

    def backfill_range(self, table: str, column: str, low: str | None, high: str | None) -> str: ...

    def backfill_problem(self, table: str, condition: str) -> str | None: ...


@dataclass(frozen=True)
class PlannedWrite:
    """What a sink would do with a batch's records in one target (``sluice connector preview``):
    the DDL it would run first, then its writes, said in words, without doing either."""

    target: str
    ddl: tuple[str, ...]
    writes: str


@runtime_checkable
class DescribesWrites(Protocol):
    """Optional ability of a sink task: the writes a batch's records would make (``PlannedWrite``),
    read from its target without changing it; raises ConfigError where the write would fail for
    its config (a table missing without auto.create)."""

    def planned_writes(self, records: pa.Table) -> list[PlannedWrite]: ...


@runtime_checkable
class RoutesTopics(Protocol):
    """Optional ability of a source task: each partition's records go to a topic of their own (a
    JDBC source's table to ``topic.prefix`` + table). The runtime reads, converts and sends one
    partition at a time to its topic (records of different partitions may differ in shape), and
    creates each topic when ``topic.auto.create`` is on."""

    def topic_of(self, partition: str) -> str: ...

    def topics(self) -> list[str]: ...


@dataclass(frozen=True)
class TargetCluster:
    """A RocketMQ cluster other than the worker's own (a replicator's source or target): its name
    servers, the keys that sign every request to it, the cluster new topics are created on, and
    how errors and the Replicator's properties name it."""

    namesrv: str
    access_key: str = field(default="", repr=False)
    secret_key: str = field(default="", repr=False)
    #: the cluster whose masters new topics are created on ("": every master the name server knows)
    cluster: str = ""
    #: ``cloud_cluster_region`` (the Replicator's REPLICATOR-BORN-SOURCE entries)
    label: str = ""
    #: how errors name it ("target cluster DR (127.0.0.1:29876)")
    name: str = ""
    #: the config keys that hold its access key, or that would turn signing on ("dest.access.key")
    keys_named: str = ""

    def client_options(self) -> dict[str, str]:
        """Keyword arguments of a RocketMQ client of this cluster: its keys, when it has them, and
        how a refusal names the cluster and the key."""
        signed = {"access_key": self.access_key, "secret_key": self.secret_key} if self.access_key else {}
        return {**signed, "label": f"{self.name} ({self.keys_named}):"} if self.name else signed


@dataclass(frozen=True)
class TopicShape:
    """How a topic a source writes is created: its queue count and permission (RocketMQ's perm
    bits: 2 write, 4 read)."""

    queues: int
    perm: int = 6


@runtime_checkable
class SendsToCluster(Protocol):
    """Optional ability of a source task: its messages go to another RocketMQ cluster than the
    worker's (a replicator's target), with the same exactly-once send."""

    def target_cluster(self) -> TargetCluster: ...


@runtime_checkable
class ShapesTopics(Protocol):
    """Optional ability of a source task: the topics it writes are created with a shape of its own
    (a replicator's: the source topic's), and grow when that shape grows (checked now and then)."""

    def topic_shape(self, topic: str) -> TopicShape: ...


@runtime_checkable
class PinsQueues(Protocol):
    """Optional ability of a source task: partitions whose records all go to one queue of their
    topic (a replicator's source queue i to target queue i), by index into the topic's queues in
    natural order, for a topic of ``queue_count`` queues; other partitions' records are sharded
    by key."""

    def pinned_queues(self, topic: str, queue_count: int) -> Mapping[str, int]: ...


@runtime_checkable
class ReportsLagSeconds(Protocol):
    """Optional ability of a source task: how many seconds each partition is behind, given the
    committed offsets (a replicator's queue: since its oldest message not copied yet was stored);
    status, the CLI, the REST API and the metrics show it."""

    def lag_seconds(self, committed: Mapping[str, Position]) -> dict[str, float]: ...


def delivery_of(task: SinkTask) -> Delivery:
    """The guarantee a sink task gives, checked against what it can do: a task declaring exactly
    once must either be transactional or undo a partial write from its ``prepare`` state."""
    if isinstance(task, TransactionalSink):
        return Delivery.EXACTLY_ONCE
    undoes = type(task).prepare is not SinkTask.prepare
    # a frame writer that is told of re-runs finds a batch's commit in its table's history
    finds_commits = isinstance(task, WritesFrames) and isinstance(task, RestatesPlans)
    if task.delivery is Delivery.EXACTLY_ONCE and not (undoes or finds_commits):
        raise TypeError(
            f"{type(task).__name__} declares exactly-once delivery but is neither a TransactionalSink "
            "nor overrides prepare() to undo a partial write, nor finds a re-run batch's commit "
            "(WritesFrames and RestatesPlans)"
        )
    return task.delivery


def open_source_task(
    connector: type[SourceConnector], raw_task_config: Mapping[str, Any], task_id: int
) -> SourceTask:
    """Parse a (secret-resolved) raw task config with the connector's fields and build its task."""
    return connector.task_class(connector().parse(raw_task_config), task_id)


def open_sink_task(
    connector: type[SinkConnector], raw_task_config: Mapping[str, Any], task_id: int
) -> SinkTask:
    """Parse a (secret-resolved) raw task config with the connector's fields and build its task."""
    return connector.task_class(connector().parse(raw_task_config), task_id)


def split_round_robin(items: Sequence[str], max_tasks: int) -> list[list[str]]:
    """Items dealt to at most ``max_tasks`` groups, none empty, order kept inside each group."""
    count = max(1, min(max_tasks, len(items)))
    groups: list[list[str]] = [[] for _ in range(count)]
    for i, item in enumerate(items):
        groups[i % count].append(item)
    return groups
