"""`sluice worker`: a Temporal worker running connector workflows and task activities.

Several workers on one task queue share the work; if one dies, another fails its task attempts
once its lease is not renewed (activities.leases), and the tasks start again on a live worker,
resuming from the offset store.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from sluice.activities.connector_activities import ConnectorActivities
from sluice.activities.context import RuntimeContext
from sluice.activities.leases import WorkerLease, fail_lost_attempts
from sluice.activities.nudges import NUDGES, NudgeListener
from sluice.activities.offsets import OffsetActivities
from sluice.activities.processes import this_process
from sluice.activities.reports import TaskReporter
from sluice.activities.spark import SparkMasterError, is_local_master
from sluice.activities.warm_up import start_warm_up
from sluice.worker.metrics_server import MetricsPortError, MetricsServer, free_loopback_address
from sluice.worker.settings import Settings, settings
from sluice.worker.temporal_client import connect
from sluice.workflows import search_attributes
from sluice.workflows.checks import SecretFieldsWorkflow, ValidateConfigWorkflow
from sluice.workflows.connector import ConnectorWorkflow
from sluice.workflows.types import TaskOptions

log = logging.getLogger("sluice.worker")


class MissingSearchAttributesError(RuntimeError):
    """The namespace lacks search attributes the workflow upserts (every workflow task would fail)."""


async def check_search_attributes(client: Client, namespace: str) -> None:
    """Refuse to start unless every search attribute the workflow writes is registered as Keyword."""
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    keyword = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
    registered = {name for name, kind in listed.custom_attributes.items() if kind == keyword}
    registered |= {name for name, kind in listed.system_attributes.items() if kind == keyword}
    missing = [name for name in search_attributes.REGISTRATION if name not in registered]
    if missing:
        raise MissingSearchAttributesError(search_attributes.missing_message(missing, namespace))


async def connectors_running(client: Client, settings: Settings) -> bool:
    """Whether connector workflows run on the worker's task queue (its Temporal visibility)."""
    query = f"TaskQueue='{settings.task_queue}' AND ExecutionStatus='Running'"
    return (await client.count_workflows(query)).count > 0


HEARTBEAT_THROTTLE = timedelta(seconds=1)
#: Workflow tasks one worker runs at once. They are CPU-bound Python under one GIL, so running more
#: at once only makes each slower: a worker taking over a killed one's hundred connectors, their
#: workflow tasks arriving together (failed at once by the lease), ran the SDK's default 100 side by
#: side, each took over the 10 s workflow task timeout, and their retries made the takeover take a
#: minute; 8 at once took 28.7 s, 32 took 23.9 s (``make bench-scale``). The rest wait on the
#: server, where waiting costs no timeout.
WORKFLOW_TASKS_AT_ONCE = 32


def build_worker(
    client: object, settings: Settings, ctx: RuntimeContext, executor: ThreadPoolExecutor
) -> Worker:
    acts = ConnectorActivities(ctx)
    return Worker(
        client,  # type: ignore[arg-type]
        task_queue=settings.task_queue,
        # The check workflows answer light clients (sluice.Client) that hold no plugin code.
        workflows=[ConnectorWorkflow, ValidateConfigWorkflow, SecretFieldsWorkflow],
        activities=[
            acts.validate,
            acts.secret_fields,
            acts.run_task,
            acts.nudge_tasks,
            acts.delete_offsets,
            *OffsetActivities(ctx).all(),
        ],
        activity_executor=executor,
        max_concurrent_activities=settings.max_concurrent_tasks + 4,
        max_concurrent_workflow_tasks=WORKFLOW_TASKS_AT_ONCE,
        # A SIGKILLed worker leaves its sticky queue behind; fall back to the shared queue fast.
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=2),
        # Temporal delivers a cancel (pause, stop, delete, reconfigure, continue-as-new) only in the
        # answer to a heartbeat the SDK actually sends, and by default it sends one at most every
        # 0.8 x the heartbeat timeout (8 s at the default 10 s). The task heartbeats every second
        # (activities.heartbeat), so throttle at that interval: a cancel lands within about a second,
        # for one heartbeat call per task per second.
        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        default_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        graceful_shutdown_timeout=timedelta(seconds=20),
        workflow_runner=workflow_runner(settings.workflow_sandbox),
    )


def workflow_runner(sandboxed: bool) -> WorkflowRunner:
    """Temporal's sandbox only when asked (``SLUICE_WORKFLOW_SANDBOX``): the workflow tests run in
    it, so a call it forbids is caught there, and in the worker it doubled each replay's CPU
    (72 -> 30 ms for a 64-event connector history), which is most of a takeover (docs/scaling.md)."""
    return SandboxedWorkflowRunner() if sandboxed else UnsandboxedWorkflowRunner()


def sdk_metrics_runtime(address: str) -> Runtime:
    """A Temporal runtime exporting the SDK's metrics on ``address`` (folded into /metrics)."""
    prometheus = PrometheusConfig(bind_address=address, counters_total_suffix=True, durations_as_seconds=True)
    return Runtime(telemetry=TelemetryConfig(metrics=prometheus))


def store_listener(ctx: RuntimeContext) -> NudgeListener:
    """The worker's LISTEN connection on the offset store, started: stops reach its idle tasks
    within a second (activities.nudges) and a source's commit wakes its idle sinks
    (activities.doorbells). Every process that runs task activities starts one; ``close()`` it."""
    return NudgeListener(ctx.store.engine).start()


async def run_worker(settings: Settings) -> None:
    # First, before anything connects: a taken port stops the worker with nothing half-started.
    sdk_address = free_loopback_address()
    metrics = MetricsServer(settings.metrics_host, settings.metrics_port, sdk_address)
    client = await connect(
        settings.temporal_address, settings.temporal_namespace, sdk_metrics_runtime(sdk_address)
    )
    await check_search_attributes(client, settings.temporal_namespace)
    ctx = RuntimeContext(settings.runtime)
    loop = asyncio.get_running_loop()
    ctx.reporter = TaskReporter(client, loop)
    ctx.store  # migrate the schema before taking work  # noqa: B018
    listener = store_listener(ctx)
    # Liveness for this worker's tasks, and the lost tasks of other workers failed (activities.leases);
    # its process recorded, so that a worker restarted on this machine takes its tasks at once.
    lease = WorkerLease(ctx.store.engine, ctx.store.schema, client.identity,
                        fail_lost_attempts(client, loop), process=this_process())  # fmt: skip
    ctx.lease = lease.start()
    ctx.secret_providers()  # and import cryptography on this thread (RuntimeContext.secret_providers)
    if not is_local_master(settings.runtime.spark_master):
        ctx.spark  # a cluster that cannot be reached stops the worker before it polls  # noqa: B018
    # The session's start-up (a local one's, ~6 s) and first jobs, beside the first polls (a task
    # needs Spark only for its first batch); later where connectors already run on this queue,
    # since this worker may be taking over a killed one's tasks (activities.warm_up).
    takeover_s = TaskOptions().heartbeat_timeout_s if await connectors_running(client, settings) else 0.0
    start_warm_up(lambda: ctx.spark, not_before_s=takeover_s)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    with ThreadPoolExecutor(max_workers=settings.max_concurrent_tasks + 4) as executor:
        worker = build_worker(client, settings, ctx, executor)
        async with worker:
            log.info(
                "sluice worker polling task queue %s at %s", settings.task_queue, settings.temporal_address
            )
            print(
                f"sluice worker ready on task queue {settings.task_queue}, "
                f"metrics on http://{settings.metrics_host}:{metrics.port}/metrics",
                flush=True,
            )
            await stop.wait()
            log.info("shutting down: current batches finish, then the worker stops")
            await shut_down(worker)
    lease.close()
    listener.close()
    ctx.close()
    metrics.close()


#: While shutting down, how often the worker wakes its tasks' heartbeat threads.
SHUTDOWN_WAKE_S = 0.5


async def shut_down(worker: Worker) -> None:
    """Shut the SDK's worker down, hurrying every task meanwhile (activities.nudges: its heartbeat
    thread beats and looks every second): an idle one looks for a worker shutdown only when woken
    (activities.heartbeat.IDLE_CHECK_S is a backstop), and the SDK flags the shutdown to activities
    on its own schedule, so they are hurried until it is done.
    Each idle task then ends its attempt at once (WorkerShutdown, run again on another worker)."""
    done = asyncio.ensure_future(worker.shutdown())
    while not done.done():
        NUDGES.nudge_all()
        await asyncio.wait([done], timeout=SHUTDOWN_WAKE_S)
    await done


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(run_worker(settings()))
    except (MissingSearchAttributesError, MetricsPortError, SparkMasterError) as exc:
        print(f"sluice worker: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
