"""The activities of the connector lifecycle: validate and split, run a task, delete offsets.

Methods of one class (samples-python's pattern for activities with dependencies) sharing the
process's store, RocketMQ client and SparkSession. Task activities are synchronous — PySpark calls
block — and run in the worker's thread pool, heartbeating from a side thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError, CancelledError

from activities.context import RuntimeContext
from activities.errors import config_error
from activities.heartbeat import Heartbeater
from activities.runner import BatchRunner, TaskSetup
from workflows.types import (
    DELETE_OFFSETS_ACTIVITY,
    RUN_TASK_ACTIVITY,
    VALIDATE_ACTIVITY,
    ConnectorSpec,
    TaskInput,
    TaskOutcome,
    ValidationResult,
)


def _format_errors(errors: list[Any]) -> list[str]:
    return [f"{e.field}: {e.message}" if hasattr(e, "field") else str(e) for e in errors]


def validate_config(name: str, config: Mapping[str, str]) -> ValidationResult:
    """Validate a connector config and split it into task configs (also used by clients up front)."""
    from connectors.api import SinkConnector
    from connectors.plugins import PluginNotFoundError, load_connector_class

    class_name = config.get("connector.class", "")
    if not class_name:
        return ValidationResult("", "", [f"connector {name}: connector.class: is required"])
    try:
        connector_cls = load_connector_class(class_name)
    except PluginNotFoundError as exc:
        return ValidationResult(class_name, "", [f"connector {name}: connector.class: {exc}"])
    connector = connector_cls()
    errors = _format_errors(connector.validate(config))
    kind = "sink" if isinstance(connector, SinkConnector) else "source"
    if errors:
        return ValidationResult(class_name, kind, [f"connector {name}: {e}" for e in errors])
    max_tasks = int(config.get("tasks.max", "1"))
    task_configs = [dict(c) for c in connector.task_configs(config, max_tasks)]
    if not task_configs:
        return ValidationResult(class_name, kind, [f"connector {name}: produced no task configs"])
    return ValidationResult(class_name, kind, [], task_configs)


class ConnectorActivities:
    def __init__(self, ctx: RuntimeContext) -> None:
        self.ctx = ctx

    @activity.defn(name=VALIDATE_ACTIVITY)
    def validate(self, spec: ConnectorSpec) -> ValidationResult:
        return validate_config(spec.name, spec.config)

    @activity.defn(name=DELETE_OFFSETS_ACTIVITY)
    def delete_offsets(self, connector: str) -> None:
        self.ctx.store.delete_connector(connector)

    # no_thread_cancel_exception: cancellation is read between batches (Heartbeater.should_stop).
    # The SDK's default raises it asynchronously in this thread, wherever it is, which once left a
    # pooled PostgreSQL connection mid-command ("another command is already in progress").
    @activity.defn(name=RUN_TASK_ACTIVITY, no_thread_cancel_exception=True)
    def run_task(self, inp: TaskInput) -> TaskOutcome:
        """Loop micro-batches until cancelled; resume from the offset store on every (re)start."""
        runner = self._runner(inp)
        spark = self.ctx.spark
        group = f"sluice/{inp.connector}/{inp.task_id}"
        with Heartbeater() as hb:
            hb.progress.phase = "running"
            runner.ensure_topic()
            idle_s = runner.setup.poll_interval_s
            while not hb.should_stop():
                plan, rerun = runner.next_plan()
                if plan is None:
                    hb.progress.phase = "idle"
                    hb.sleep(idle_s)
                    continue
                hb.progress.phase = f"batch {plan.batch_id}" + (" (re-run)" if rerun else "")
                spark.sparkContext.setJobGroup(
                    group, f"{inp.connector} task {inp.task_id} batch {plan.batch_id}"
                )
                try:
                    records = runner.run(plan, rerun)
                except ApplicationError:
                    raise
                except Exception as exc:
                    classified = self._classify(inp, exc)
                    if classified is exc:
                        raise
                    raise classified from exc
                hb.progress.last_committed_batch = plan.batch_id
                hb.progress.batches += 1
                hb.progress.records += records
                hb.beat()
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

    def _runner(self, inp: TaskInput) -> BatchRunner:
        from activities.sink_runner import SinkRunner
        from activities.source_runner import SourceRunner
        from connectors.api import SinkConnector, SourceConnector, open_sink_task, open_source_task
        from connectors.config import ConfigError
        from connectors.converters import converter_for
        from connectors.plugins import load_connector_class
        from connectors.secrets import SecretResolutionError, resolve_secrets
        from connectors.transforms import build_chain

        try:
            raw = resolve_secrets(inp.config)
            connector_cls = load_connector_class(inp.config["connector.class"])
            parsed = connector_cls().parse(raw)
            setup = TaskSetup(self.ctx, inp.connector, parsed, converter_for(parsed), build_chain(parsed))
            if issubclass(connector_cls, SourceConnector):
                return SourceRunner(setup, open_source_task(connector_cls, raw, inp.task_id))
            if issubclass(connector_cls, SinkConnector):
                sink = open_sink_task(connector_cls, raw, inp.task_id)
                if hasattr(sink, "offset_store"):
                    sink.offset_store = self.ctx.store
                return SinkRunner(setup, sink, inp.task_count)
        except (ConfigError, SecretResolutionError, KeyError) as exc:
            raise config_error(inp.connector, str(exc)) from exc
        raise config_error(
            inp.connector, f"{inp.config.get('connector.class')} is neither a source nor a sink"
        )

    def _classify(self, inp: TaskInput, exc: Exception) -> Exception:
        """One classification for every error (connectors.errors): ApplicationError, short."""
        from activities.errors import task_failure

        return task_failure(inp.connector, inp.task_id, exc, activity.info().attempt)
