"""The activities of the connector lifecycle: validate and split, run a task, delete offsets.

Methods of one class (samples-python's pattern for activities with dependencies) sharing the
process's store, RocketMQ client and SparkSession. Task activities are synchronous — PySpark calls
block — and run in the worker's thread pool, heartbeating from a side thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError, CancelledError

from sluice.activities.context import RuntimeContext
from sluice.activities.direct_runner import DirectRunner
from sluice.activities.doorbells import DOORBELLS, HearsDoorbells
from sluice.activities.errors import config_error, task_failure
from sluice.activities.heartbeat import Heartbeater
from sluice.activities.metrics import TaskMeters, TaskPhase
from sluice.activities.nudges import NUDGES, nudge_key
from sluice.activities.runner import BatchRunner, TaskSetup, aligned_wait_s
from sluice.activities.sink_runner import SinkRunner
from sluice.activities.source_runner import SourceRunner
from sluice.activities.spark import label_jobs, started_spark
from sluice.activities.store.leases import TaskAttempt
from sluice.activities.task_metrics import BatchMeter, partition_lag
from sluice.activities.validation import secret_fields, validate_config
from sluice.activities.warm_up import task_started
from sluice.connectors.api import (
    ReportsLagSeconds,
    SinkConnector,
    SourceConnector,
    TransactionalSink,
    delivery_of,
    open_sink_task,
    open_source_task,
)
from sluice.connectors.config import ConfigError
from sluice.connectors.converters import converter_for
from sluice.connectors.direct import direct_chain, direct_sides, is_direct
from sluice.connectors.plugins import load_connector_class
from sluice.connectors.rocketmq.client import retry_topic
from sluice.connectors.rocketmq.errors import RocketMQError
from sluice.connectors.rocketmq.offsets import consumer_group
from sluice.connectors.secrets import SecretResolutionError, resolve_secrets
from sluice.connectors.transforms import build_chain
from sluice.workflows.types import (
    DELETE_OFFSETS_ACTIVITY,
    NUDGE_TASKS_ACTIVITY,
    RUN_TASK_ACTIVITY,
    SECRET_FIELDS_ACTIVITY,
    VALIDATE_ACTIVITY,
    ConnectorSpec,
    TaskInput,
    TaskMetrics,
    TaskOutcome,
    TaskReport,
    ValidationResult,
)

# The ledger keeps the newest batches of each task for inspection; older committed rows go.
LEDGER_PRUNE_EVERY = 100
LEDGER_KEEP = 1000

#: How long deleting a connector waits for the broker, well inside the delete activity's 2-minute
#: start-to-close timeout: a broker that is down or hangs must cost a warning, never a delete that
#: times out and is retried forever.
BROKER_CLEANUP_TIMEOUT_S = 45.0

#: Per-batch timings at DEBUG (the worker logs INFO): for benchmarks and profiling.
timing = logging.getLogger("sluice.timing")

__all__ = ["ConnectorActivities", "validate_config"]  # validate_config: clients import it from here


class ConnectorActivities:
    def __init__(self, ctx: RuntimeContext) -> None:
        self.ctx = ctx

    @activity.defn(name=VALIDATE_ACTIVITY)
    def validate(self, spec: ConnectorSpec) -> ValidationResult:
        return validate_config(spec.name, spec.config, self.ctx.secret_providers())

    @activity.defn(name=SECRET_FIELDS_ACTIVITY)
    def secret_fields(self, connector_class: str) -> list[str]:
        """Secret field names (aliases too) of a connector class, for clients that seal without
        plugin code (workflows/checks.py); no config value is needed or seen."""
        return sorted(secret_fields({"connector.class": connector_class}))

    @activity.defn(name=DELETE_OFFSETS_ACTIVITY)
    def delete_offsets(self, connector: str) -> None:
        """Forget the connector's positions: its rows in the offset store, then the broker's copy.

        Run only when the user did not keep offsets. The broker's copy is consumer group
        ``sluice-<connector>`` (a sink's mirrored offsets) and its ``%RETRY%`` topic, which Sluice
        created for RocketMQ's tools and nothing else uses; topics a source wrote are data and stay.
        """
        self.ctx.store.delete_connector(connector)
        self._delete_broker_group(connector)

    def _delete_broker_group(self, connector: str) -> None:
        """Best-effort: the store is the truth and is already cleared, so a broker that is down or
        refuses leaves the group and topic behind with a warning naming them (for ``mqadmin``), not
        a failed delete. Deleting what does not exist (a source's name) is a no-op on the broker."""
        group = consumer_group(connector)
        left = [f"consumer group {group!r}", f"topic {retry_topic(group)!r}"]
        deadline = time.monotonic() + BROKER_CLEANUP_TIMEOUT_S
        client = self.ctx.rocketmq
        try:
            client.delete_group(group, timeout_s=BROKER_CLEANUP_TIMEOUT_S)
            left.pop(0)
            client.delete_topic(retry_topic(group), timeout_s=max(1.0, deadline - time.monotonic()))
            left.pop(0)
        except RocketMQError as exc:
            activity.logger.warning(
                "connector %s: offsets deleted, but %s may be left on the broker "
                "(remove with mqadmin deleteSubGroup / deleteTopic): %s",
                connector,
                " and ".join(left),
                exc,
            )

    @activity.defn(name=NUDGE_TASKS_ACTIVITY)
    async def nudge_tasks(self, connector: str) -> None:
        """Hurry the connector's task heartbeats on every worker before its workflow waits for the
        tasks to stop (a local activity; activities.nudges). Async, off the task threads, which a
        worker full of running tasks may all hold."""
        await asyncio.to_thread(self.ctx.store.nudge, connector)

    # no_thread_cancel_exception: cancellation is read between batches (Heartbeater.should_stop).
    # The SDK's default raises it asynchronously in this thread, wherever it is, which once left a
    # pooled PostgreSQL connection mid-command ("another command is already in progress").
    @activity.defn(name=RUN_TASK_ACTIVITY, no_thread_cancel_exception=True)
    def run_task(self, inp: TaskInput) -> TaskOutcome:
        """Loop micro-batches until cancelled; resume from the offset store on every (re)start."""
        task_started()
        # Beating and leased from the start: building the runner opens the connector's task (a
        # database, a log), and an attempt whose lease or heartbeat lapses meanwhile is run again
        # while it still runs, two attempts sending one batch.
        nudges = nudge_key(self.ctx.store.schema, inp.connector)
        with Heartbeater() as hb, NUDGES.registered(nudges, hb.hurry), self._leased(inp):
            with self._classified(inp):
                runner = self._runner(inp)
            runner.setup.meters.started(retry=inp.attempt > 1)
            try:
                with self._doorbell(runner, hb):
                    outcome = self._loop(inp, runner, hb)
            finally:
                runner.setup.meters.ended()
                self._close(inp, runner)
        return outcome

    def _doorbell(self, runner: BatchRunner, hb: Heartbeater) -> contextlib.AbstractContextManager[None]:
        """A sink's idle wait ends when a source of this store commits to a topic it reads
        (activities.doorbells), so it can back off to ``poll.idle.max.ms`` at no cost in latency."""
        if not isinstance(runner, HearsDoorbells):
            return contextlib.nullcontext()
        return DOORBELLS.registered(self.ctx.store.schema, runner.hears, hb.ring)

    def _leased(self, inp: TaskInput) -> contextlib.AbstractContextManager[None]:
        """The attempt's lease on this worker (activities.leases), held from its start like the
        heartbeat: once the worker stops renewing it, another worker fails the attempt."""
        lease = self.ctx.lease
        if lease is None or inp.lease_timeout_s <= 0:
            return contextlib.nullcontext()
        info = activity.info()
        attempt = TaskAttempt(
            info.task_token, inp.connector, inp.task_id, info.workflow_id or "", info.workflow_run_id or ""
        )
        return lease.holding(attempt, inp.lease_timeout_s)

    def _loop(self, inp: TaskInput, runner: BatchRunner, hb: Heartbeater) -> TaskOutcome:
        meters = runner.setup.meters
        group = f"sluice/{inp.connector}/{inp.task_id}"
        with self._classified(inp):
            hb.progress.phase = "running"
            runner.ensure_topic()
            empty_polls = 0
            reported = ""  # the workflow cleared the task's detail as it started this attempt
            meter = BatchMeter(meters.lag_unit)
            while not hb.should_stop():
                t_plan = time.perf_counter()
                plan, rerun = runner.next_plan()
                waiting = runner.waiting_for()
                if waiting != reported:
                    self._report(inp, waiting)
                    reported = waiting
                if plan is None:
                    self._report_metrics(inp, meter.idle(runner.setup.backlog), runner)
                    meters.lag(partition_lag(runner.setup.backlog, None))
                    meters.phase(TaskPhase.IDLE)
                    hb.progress.phase = "idle"
                    empty_polls += 1
                    hb.sleep(aligned_wait_s(runner.setup.idle_wait_s(empty_polls), time.monotonic()))
                    continue
                empty_polls = 0
                hb.progress.phase = f"batch {plan.batch_id}" + (" (re-run)" if rerun else "")
                meters.phase(TaskPhase.RUNNING)
                # Spark only for a batch that runs on it: an idle task, a batch run in the worker's
                # process (local_batch_max_records), or one started while a new worker's session is
                # still starting (worker.main) plans, runs and heartbeats without waiting for it.
                # A batch that starts the session itself runs its first jobs unlabelled.
                session = started_spark() if runner.runs_on_spark else None
                if session is not None:
                    label_jobs(session, group, f"{inp.connector} task {inp.task_id} batch {plan.batch_id}")
                t0 = time.perf_counter()
                meters.planned(t0 - t_plan)
                try:
                    records = runner.run(plan, rerun)
                except BaseException:
                    meters.failed()
                    raise
                ran, planned = time.perf_counter() - t0, t0 - t_plan
                timing.debug("%s task %s batch %s: %s records in %.2f s (planned in %.2f s)",
                             inp.connector, inp.task_id, plan.batch_id, records, ran, planned)  # fmt: skip
                if plan.batch_id % LEDGER_PRUNE_EVERY == 0:
                    self.ctx.store.prune_ledger(inp.connector, keep_last=LEDGER_KEEP)
                hb.progress.last_committed_batch = plan.batch_id
                hb.progress.batches += 1
                hb.progress.records += records
                lag = partition_lag(runner.setup.backlog, plan)
                hb.progress.lag = lag or {}
                hb.beat()
                meters.committed(records, ran, lag)
                self._report_metrics(inp, meter.committed(plan, records, runner.setup.backlog), runner)
            outcome = TaskOutcome(inp.task_id, hb.progress.batches, hb.progress.records)
        if activity.is_cancelled():
            raise CancelledError("task stopped between batches")
        if activity.is_worker_shutdown():
            # Not a stop: fail this attempt so Temporal runs the task again on another worker,
            # which resumes after the batch committed here.
            raise ApplicationError(
                f"connector {inp.connector} task {inp.task_id}: worker shutting down after batch "
                f"{hb.progress.last_committed_batch}",
                type="WorkerShutdown",
            )
        return outcome

    def _report(self, inp: TaskInput, detail: str) -> None:
        """Tell the workflow what the task waits for ("" clears it): shown per task in status."""
        reporter = self.ctx.reporter
        if reporter is not None:
            info = activity.info()
            reporter.send(info.workflow_id or "", TaskReport(inp.task_id, inp.generation, detail))

    def _report_metrics(self, inp: TaskInput, metrics: TaskMetrics | None, runner: BatchRunner) -> None:
        """Last batch, records/s and lag for status and the Temporal UI (when a report is due),
        each partition's lag in records and seconds for a task that tells it (ReportsLagSeconds)."""
        reporter = self.ctx.reporter
        task = getattr(runner, "task", None)
        if metrics is not None and isinstance(task, ReportsLagSeconds):
            setup = runner.setup
            seconds = task.lag_seconds({str(k): p for k, p in setup.positions.committed.items()})
            records = partition_lag(setup.backlog, None) or {}
            setup.meters.partition_lag(records, seconds)
            metrics = replace(metrics, partition_lag=records, lag_seconds=seconds)
        if reporter is not None and metrics is not None:
            info = activity.info()
            reporter.send(info.workflow_id or "", TaskReport(inp.task_id, inp.generation, metrics=metrics))

    @staticmethod
    def _close(inp: TaskInput, runner: BatchRunner) -> None:
        """``close()`` the task on every exit path; a failing close is logged, never hides the
        task's own outcome (it names connector and task)."""
        try:
            runner.close()
        except Exception:  # noqa: BLE001 - the task's own result or error matters more
            activity.logger.warning(
                "connector %s task %d: close() failed", inp.connector, inp.task_id, exc_info=True
            )

    def _runner(self, inp: TaskInput) -> BatchRunner:
        try:
            # The connector's name with its config, so a task's messages name it (SinkTask.name).
            raw = {**resolve_secrets(inp.config, self.ctx.secret_providers()), "name": inp.connector}
            if is_direct(raw):
                return self._direct_runner(inp, raw)
            connector_cls = load_connector_class(inp.config["connector.class"])
            parsed = connector_cls().parse(raw)
            if issubclass(connector_cls, SourceConnector):
                task = open_source_task(connector_cls, raw, inp.task_id)
                meters = TaskMeters(inp.connector, inp.task_id, "source", task.position_unit)
                return SourceRunner(self._setup(inp, parsed, meters), task)
            if issubclass(connector_cls, SinkConnector):
                sink = open_sink_task(connector_cls, raw, inp.task_id)
                setup = self._setup(inp, parsed, TaskMeters(inp.connector, inp.task_id, "sink"))
                if isinstance(sink, TransactionalSink):
                    sink.bind_positions(self.ctx.store.committer())
                activity.logger.info(
                    "connector %s task %d: delivery %s", inp.connector, inp.task_id, delivery_of(sink)
                )
                return SinkRunner(setup, sink, inp.task_count)
        except (ConfigError, SecretResolutionError, KeyError) as exc:
            raise config_error(inp.connector, str(exc)) from exc
        raise config_error(
            inp.connector, f"{inp.config.get('connector.class')} is neither a source nor a sink"
        )

    def _direct_runner(self, inp: TaskInput, raw: dict[str, Any]) -> DirectRunner:
        """A direct pipeline's task (connectors.direct): its source side's task and settings (batch
        size, transforms), and its sink side's task, bound to the store when transactional."""
        sides = direct_sides(raw)
        source_cls = load_connector_class(sides.source["connector.class"])
        sink_cls = load_connector_class(sides.sink["connector.class"])
        if not (issubclass(source_cls, SourceConnector) and issubclass(sink_cls, SinkConnector)):
            raise config_error(
                inp.connector, "a direct pipeline needs a source task class and a sink task class"
            )
        parsed = source_cls().parse(sides.source)
        chain = direct_chain(sides)  # before the tasks open: a bad chain leaves nothing open
        source = open_source_task(source_cls, sides.source, inp.task_id)
        try:
            sink = open_sink_task(sink_cls, sides.sink, inp.task_id)
        except BaseException:
            source.close()
            raise
        if isinstance(sink, TransactionalSink):
            sink.bind_positions(self.ctx.store.committer())
        activity.logger.info("connector %s task %d: direct, delivery %s", inp.connector, inp.task_id,
                             delivery_of(sink))  # fmt: skip
        meters = TaskMeters(inp.connector, inp.task_id, "source", source.position_unit)
        setup = TaskSetup(self.ctx, inp.connector, parsed, converter_for(parsed), chain, meters=meters)
        return DirectRunner(setup, source, sink)

    def _setup(self, inp: TaskInput, parsed: dict[str, Any], meters: TaskMeters) -> TaskSetup:
        return TaskSetup(
            self.ctx, inp.connector, parsed, converter_for(parsed), build_chain(parsed), meters=meters
        )

    @staticmethod
    @contextlib.contextmanager
    def _classified(inp: TaskInput) -> Iterator[None]:
        """Every error of the task loop — topic set-up, planning, the batch — leaves as one short,
        classified ApplicationError (connectors.errors); the original is logged, not chained (a
        Spark error's JVM trace would otherwise travel into Temporal)."""
        try:
            yield
        except ApplicationError:
            raise
        except Exception as exc:
            raise task_failure(inp.connector, inp.task_id, exc, inp.attempt) from None
