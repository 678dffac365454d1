"""Prometheus metrics of the task activities: Kafka Connect's task metrics, under Sluice names.

Kafka Connect operators watch ``source-record-write-total``, ``poll-batch-avg-time-ms``,
``sink-record-read-total``, ``sink-record-lag-max``, ``offset-commit-success-percentage`` and
``total-record-errors``; the same figures are here as Prometheus series, so a monitoring system
can scrape, graph and alert on them (deploy/prometheus holds the alert rules, deploy/grafana a
dashboard). They live in the process's default registry, which the worker serves on
``/metrics`` (worker.metrics_server) beside the Temporal SDK's own metrics.

Cardinality is bounded: every series is labelled by connector and task id (a task keeps its id
across restarts and reconfigurations), plus a bounded kind where a series needs one: the outcome
of a commit, a task's state, the unit of a source's lag, a sink's queue (its topics' queues).
Gauges of a task are removed when the task ends on this worker, so a deleted connector leaves
only its counters, until the worker restarts.

These figures are for people and alerts; the offset store stays the truth of what was moved.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from enum import StrEnum

from prometheus_client import Counter, Gauge, Histogram

TASK_LABELS = ("connector", "task")
#: Batch durations, from a one-row batch's fixed cost (~0.5 s here) to a large first snapshot.
BATCH_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

SOURCE_RECORDS = Counter(
    "sluice_source_records",
    "Records a source task sent to RocketMQ in committed batches (source-record-write-total).",
    TASK_LABELS,
)
SOURCE_BATCH_SECONDS = Histogram(
    "sluice_source_poll_batch_seconds",
    "Time a source batch took from read to committed positions (poll-batch-avg-time-ms).",
    TASK_LABELS,
    buckets=BATCH_BUCKETS,
)
SOURCE_LAG = Gauge(
    "sluice_source_lag",
    "Units (records, bytes, change events) the source task is behind, as last planned.",
    (*TASK_LABELS, "unit"),
)
PARTITION_LAG_SECONDS = Gauge(
    "sluice_partition_lag_seconds",
    "Seconds a source partition is behind, for tasks that tell (a replicator's source queue: since "
    "its oldest message not copied yet was stored; a heartbeat task: end to end).",
    (*TASK_LABELS, "partition"),
)
PARTITION_LAG = Gauge(
    "sluice_partition_lag_records",
    "Records a source partition is behind, for tasks that tell their lag in time (a replicator's queue).",
    (*TASK_LABELS, "partition"),
)
SINK_RECORDS = Counter(
    "sluice_sink_records",
    "Messages a sink task read from RocketMQ and wrote in committed batches (sink-record-read-total).",
    TASK_LABELS,
)
SINK_BATCH_SECONDS = Histogram(
    "sluice_sink_put_batch_seconds",
    "Time a sink batch took from pull to committed offsets (put-batch-avg-time-ms).",
    TASK_LABELS,
    buckets=BATCH_BUCKETS,
)
SINK_LAG = Gauge(
    "sluice_sink_lag_records",
    "Messages in a queue the sink task has not committed yet, as last planned (sink-record-lag-max).",
    (*TASK_LABELS, "queue"),
)
PLAN_SECONDS = Histogram(
    "sluice_batch_plan_seconds",
    "Time planning a batch took (positions read, ranges chosen, the plan recorded).",
    TASK_LABELS,
    buckets=BATCH_BUCKETS,
)
OFFSET_COMMITS = Counter(
    "sluice_offset_commits",
    "Batches whose positions were committed (success) or whose run failed before its commit "
    "(failure): offset-commit-success/failure.",
    (*TASK_LABELS, "outcome"),
)
LAST_COMMIT = Gauge(
    "sluice_last_commit_timestamp_seconds",
    "Unix time of the task's last committed batch on this worker.",
    TASK_LABELS,
)
RECORD_ERRORS = Counter(
    "sluice_record_errors",
    "Bad records met (total-record-errors): tolerated ones, and the one that failed a strict batch.",
    TASK_LABELS,
)
DEAD_LETTERS = Counter(
    "sluice_dead_letter_records",
    "Bad records sent to the dead-letter topic (deadletterqueue-produce-requests).",
    TASK_LABELS,
)
TASK_RETRIES = Counter(
    "sluice_task_retries",
    "Task activities started on this worker as a retry of a failed or lost attempt.",
    TASK_LABELS,
)


class TaskPhase(StrEnum):
    """What a task is doing on this worker (``sluice_task_state``; the connector-level states,
    FAILED among them, are the REST server's ``sluice_task_status``)."""

    RUNNING = "running"  # a batch is running
    IDLE = "idle"  # nothing to read; the task waits for its next poll


TASK_STATE = Gauge(
    "sluice_task_state",
    "1 for the phase a task running on this worker is in (running a batch, or idle).",
    (*TASK_LABELS, "state"),
)


class TaskMeters:
    """One task's series: what the task loop calls as batches plan, commit and fail."""

    def __init__(self, connector: str, task_id: int, kind: str, lag_unit: str = "records") -> None:
        self.labels = (connector, str(task_id))
        self.is_sink = kind == "sink"
        self.lag_unit = lag_unit
        self._queues: set[str] = set()
        self._phase: TaskPhase | None = None
        records, batch = (
            (SINK_RECORDS, SINK_BATCH_SECONDS) if self.is_sink else (SOURCE_RECORDS, SOURCE_BATCH_SECONDS)
        )
        self._records = records.labels(*self.labels)
        self._batch = batch.labels(*self.labels)

    def started(self, retry: bool) -> None:
        """The task activity started here; ``retry``: it runs again after a failed or lost attempt."""
        # The series exist from the start, so rate() starts at 0 and "no commit for N minutes"
        # can fire for a task that never commits.
        self._records.inc(0)
        OFFSET_COMMITS.labels(*self.labels, "success").inc(0)
        for counter in (RECORD_ERRORS, DEAD_LETTERS, TASK_RETRIES):
            counter.labels(*self.labels).inc(0)
        if retry:
            TASK_RETRIES.labels(*self.labels).inc()

    def phase(self, phase: TaskPhase) -> None:
        if phase is self._phase:
            return
        for each in TaskPhase:
            TASK_STATE.labels(*self.labels, each.value).set(1 if each is phase else 0)
        self._phase = phase

    def planned(self, seconds: float) -> None:
        PLAN_SECONDS.labels(*self.labels).observe(seconds)

    def committed(self, records: int, seconds: float, lag: Mapping[str, int] | None) -> None:
        """A batch committed: its records, duration, and each partition's lag after it."""
        self._records.inc(records)
        self._batch.observe(seconds)
        OFFSET_COMMITS.labels(*self.labels, "success").inc()
        LAST_COMMIT.labels(*self.labels).set(time.time())
        self.lag(lag)

    def partition_lag(self, records: Mapping[str, int], seconds: Mapping[str, float]) -> None:
        """Per partition, for a task that tells its lag in time (api.ReportsLagSeconds)."""
        for partition, units in records.items():
            PARTITION_LAG.labels(*self.labels, partition).set(units)
        for partition, behind in seconds.items():
            PARTITION_LAG_SECONDS.labels(*self.labels, partition).set(behind)

    def failed(self) -> None:
        """A batch raised before its commit (the task fails or retries it)."""
        OFFSET_COMMITS.labels(*self.labels, "failure").inc()

    def lag(self, lag: Mapping[str, int] | None) -> None:
        """Per queue for a sink; the total in the task's unit for a source (its partitions, files or
        tables, are not bounded). None: unknown, the series keep their last value."""
        if lag is None:
            return
        if not self.is_sink:
            SOURCE_LAG.labels(*self.labels, self.lag_unit).set(sum(lag.values()))
            return
        for queue, units in lag.items():
            SINK_LAG.labels(*self.labels, queue).set(units)
        self._queues |= set(lag)

    def record_errors(self, count: int) -> None:
        RECORD_ERRORS.labels(*self.labels).inc(count)

    def dead_letters(self, count: int) -> None:
        DEAD_LETTERS.labels(*self.labels).inc(count)

    def ended(self) -> None:
        """The task stopped on this worker: its gauges go (they would show a stale state or lag)."""
        for state in TaskPhase:
            _remove(TASK_STATE, *self.labels, state.value)
        for queue in self._queues:
            _remove(SINK_LAG, *self.labels, queue)
        _remove(SOURCE_LAG, *self.labels, self.lag_unit)
        _remove(LAST_COMMIT, *self.labels)
        self._phase = None


def _remove(gauge: Gauge, *labels: str) -> None:
    with contextlib.suppress(KeyError):  # never set
        gauge.remove(*labels)
