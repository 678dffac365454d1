"""`make bench-scale`: what many connectors cost one worker, and how fast they come back after it dies.

Against the local stack, with one real ``sluice worker`` process (its own task queue and store
schema), measured in one run (a benchmark: nothing is asserted):
1. the empty worker's CPU over ``IDLE_S`` (the baseline);
2. ``CONNECTORS`` dummy sources created (``records.per.partition`` records each, so each runs one
   small batch and then idles): seconds until every one has committed its records;
3. the same worker idle with every connector running: CPU (the whole machine, quiet otherwise, and
   the worker's Python process alone), resident memory, workflow history events, offset-store
   reads and writes per second, over ``IDLE_S``;
4. SIGKILL of the worker and a new one started at once: seconds until every task runs again on
   the new worker (the default 10 s heartbeat timeout is part of it).

Usage: ``python -m bench.scale_bench [CONNECTORS]`` (default 100; ``BENCH_CONNECTORS``);
``BENCH_POLL_IDLE_MAX_MS`` sets the connectors' idle back-off, ``BENCH_CONFIG`` any other key
(``task.heartbeat.timeout.s=30,poll.interval.ms=5000``). The last line is the summary; every
figure names its unit.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from sqlalchemy import create_engine, text
from temporalio.client import WorkflowExecutionStatus

from sluice.worker.client import SluiceClient
from sluice.worker.errors import ConnectorError
from sluice.worker.settings import Settings, settings_or_exit
from sluice.workflows.types import RUN_TASK_ACTIVITY

CONNECTORS = 100
RECORDS = 10
IDLE_S = float(os.environ.get("BENCH_IDLE_S", "60"))
CREATE_AT_ONCE = 10
#: The connectors' ``poll.idle.max.ms`` (``BENCH_POLL_IDLE_MAX_MS``; unset: the dummy source's default).
POLL_IDLE_MAX_MS = os.environ.get("BENCH_POLL_IDLE_MAX_MS", "")
#: More connector config, ``key=value`` pairs split by commas (``BENCH_CONFIG``), for experiments.
EXTRA_CONFIG = dict(
    pair.split("=", 1) for pair in os.environ.get("BENCH_CONFIG", "").split(",") if "=" in pair
)
T = TypeVar("T")


@dataclass
class Worker:
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def identity(self) -> str:
        """The Temporal identity the SDK gives it: ``<pid>@<host>``."""
        return f"{self.proc.pid}@"

    def rss_mb(self) -> float:
        """Resident memory of the worker and every process under it (its JVM, Python workers)."""
        total = 0
        for pid in _tree(self.proc.pid):
            try:
                with open(f"/proc/{pid}/statm") as f:
                    total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            except OSError:
                continue
        return total / 2**20


def machine_busy_seconds() -> float:
    """CPU-seconds the whole machine spent busy (``/proc/stat``: all but idle and iowait).

    The idle cost of connectors is measured machine-wide, on a quiet machine: it is the worker's
    planning and heartbeats and what they cost PostgreSQL and Temporal. A process-tree reading
    loses the CPU of processes that end unreaped (Spark's Python workers are forked by a daemon
    that ignores SIGCHLD), which made it go backwards here."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:]]
    idle = ticks[3] + ticks[4]
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds(pid: int) -> float:
    """User+system CPU-seconds of the one process ``pid`` (the worker's Python process)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tree(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    found, todo = [], [root]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(child for child, parent in parents.items() if parent == current)
    return found


def start_worker(env: dict[str, str], log: Path) -> Worker:
    out = log.open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "sluice.worker.cli", "worker"], stdout=out, stderr=subprocess.STDOUT,
        env=env, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 180
    while b"sluice worker ready" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(
                f"bench-scale: the worker did not start:\n{log.read_text(errors='replace')[-3000:]}"
            )
        time.sleep(0.3)
    return Worker(proc, log)


async def wait_until(check: Callable[[], Awaitable[bool]], timeout_s: float, what: str) -> float:
    """Seconds until ``check`` holds (polled every 0.5 s)."""
    start = time.monotonic()
    while not await check():
        if time.monotonic() - start > timeout_s:
            raise SystemExit(f"bench-scale: timed out after {timeout_s:.0f} s waiting for {what}")
        await asyncio.sleep(0.5)
    return time.monotonic() - start


async def _gathered(calls: list[Awaitable[T]], at_once: int = CREATE_AT_ONCE) -> list[T]:
    gate = asyncio.Semaphore(at_once)

    async def one(call: Awaitable[T]) -> T:
        async with gate:
            return await call

    return list(await asyncio.gather(*(one(c) for c in calls)))


async def _task_workers(client: SluiceClient, names: list[str]) -> list[str]:
    """The identity running each connector's task activity ('' while none runs it)."""

    async def one(name: str) -> str:
        described = await client.handle(name).describe()
        running = [a.last_worker_identity for a in described.raw_description.pending_activities
                   if a.activity_type.name == RUN_TASK_ACTIVITY]  # fmt: skip
        return running[0] if running else ""

    return await _gathered([one(n) for n in names], at_once=20)


async def _settle(window_s: float = 5.0, quiet_cores: float = 0.3, limit_s: float = 90) -> None:
    """Wait until the machine's CPU use over ``window_s`` falls below ``quiet_cores`` (the worker's
    start-up and Spark warm-up are over), for at most ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        before = machine_busy_seconds()
        await asyncio.sleep(window_s)
        if (machine_busy_seconds() - before) / window_s < quiet_cores:
            return


async def _history_events(client: SluiceClient, names: list[str]) -> int:
    async def one(name: str) -> int:
        return int(
            (await client.handle(name).describe()).raw_description.workflow_execution_info.history_length
        )

    return sum(await _gathered([one(n) for n in names], at_once=20))


def _store_counters(settings: Settings, schema: str) -> tuple[int, int]:
    """(rows read by scans, rows written) of the store schema's tables so far."""
    engine = create_engine(settings.database_url)
    try:
        with engine.connect() as conn:
            reads, writes = conn.execute(
                text(
                    "SELECT coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)), 0), "
                    "coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) "
                    "FROM pg_stat_user_tables WHERE schemaname = :schema"
                ),
                {"schema": schema},
            ).one()
    finally:
        engine.dispose()
    return int(reads), int(writes)


async def run(count: int) -> str:
    settings = settings_or_exit()
    run_id = uuid.uuid4().hex[:8]
    queue, schema, topic = f"bench-scale-{run_id}", f"bench_scale_{run_id}", f"bench-scale-{run_id}"
    env = {**os.environ, "SLUICE_TASK_QUEUE": queue, "SLUICE_STORE_SCHEMA": schema,
           "SLUICE_MAX_TASKS": str(count + 4), "SLUICE_METRICS_PORT": "0"}  # fmt: skip
    workdir = Path(tempfile.mkdtemp(prefix="sluice-bench-scale-"))
    worker = start_worker(env, workdir / "worker-1.log")
    client = await SluiceClient.connect(settings.temporal_address, task_queue=queue)
    names = [f"scale-{run_id}-{i:03d}" for i in range(count)]
    try:
        print(f"worker up; the empty worker idles {IDLE_S:.0f} s (baseline)", flush=True)
        await _settle()  # its Spark warm-up jobs end
        cpu0, own0 = machine_busy_seconds(), _own_cpu_seconds(worker.proc.pid)
        await asyncio.sleep(IDLE_S)
        empty_cores = (machine_busy_seconds() - cpu0) / IDLE_S
        empty_own = (_own_cpu_seconds(worker.proc.pid) - own0) / IDLE_S
        empty_rss = worker.rss_mb()

        idle_max = {"poll.idle.max.ms": POLL_IDLE_MAX_MS} if POLL_IDLE_MAX_MS else {}
        config = {"connector.class": "dummy-source", "topic": topic, "records.per.partition": str(RECORDS),
                  **idle_max, **EXTRA_CONFIG}  # fmt: skip
        _, writes_before = _store_counters(settings, schema)
        started = time.monotonic()
        await _gathered([client.create(n, config) for n in names])

        async def all_committed() -> bool:
            try:
                statuses = await _gathered([client.status(n) for n in names], at_once=20)
            except ConnectorError as exc:  # a busy worker answers late, or overruns the 2 s deadlock check
                print(f"bench-scale: a status query failed, asking again: {exc}", flush=True)
                return False
            return all(
                bool(s.tasks) and s.tasks[0].metrics is not None and s.tasks[0].metrics.records >= RECORDS
                for s in statuses
            )

        await wait_until(all_committed, 900, f"{count} connectors to commit their records")
        start_all_s = time.monotonic() - started
        print(
            f"{count} connectors created and their first batches committed in {start_all_s:.1f} s", flush=True
        )

        await _settle(quiet_cores=1.0, limit_s=30)  # the last reports and idle polls settle
        history0 = await _history_events(client, names)
        reads0, writes0 = _store_counters(settings, schema)
        # Each connector ran one batch (its records fit the first, ramped-up one); the rest of the
        # writes are registering the connector.
        writes_per_connector = (writes0 - writes_before) / count
        cpu0, own0 = machine_busy_seconds(), _own_cpu_seconds(worker.proc.pid)
        await asyncio.sleep(IDLE_S)
        idle_cores = (machine_busy_seconds() - cpu0) / IDLE_S
        idle_own = (_own_cpu_seconds(worker.proc.pid) - own0) / IDLE_S
        reads1, writes1 = _store_counters(settings, schema)
        history1 = await _history_events(client, names)
        idle_rss = worker.rss_mb()
        history_per_hour = (history1 - history0) / count * 3600 / IDLE_S
        print(f"idle: machine {idle_cores:.3f} cores ({empty_cores:.3f} with the empty worker), worker's "
              f"Python {idle_own:.3f} ({empty_own:.3f}), {idle_rss:.0f} MB RSS "
              f"({empty_rss:.0f} empty), {history_per_hour:.1f} history events/connector/hour",
              flush=True)  # fmt: skip

        # One connector kept busy (batch after batch): the history a working task adds per hour.
        busy = f"scale-{run_id}-busy"
        names.append(busy)
        endless = {"records.per.partition": "100000000", "batch.max.records": "1000"}
        await client.create(busy, {**config, **endless})

        async def busy_committed() -> bool:
            try:
                tasks = (await client.status(busy)).tasks
            except ConnectorError as exc:
                print(f"bench-scale: a status query failed, asking again: {exc}", flush=True)
                return False
            return bool(tasks) and tasks[0].metrics is not None and tasks[0].metrics.records > 0

        await wait_until(busy_committed, 300, "the busy connector's first batch")
        busy0 = await _history_events(client, [busy])
        await asyncio.sleep(IDLE_S)
        busy_per_hour = (await _history_events(client, [busy]) - busy0) * 3600 / IDLE_S
        print(f"busy: {busy_per_hour:.0f} history events/hour", flush=True)

        worker.proc.send_signal(signal.SIGKILL)
        worker.proc.wait(timeout=30)
        killed = time.monotonic()
        worker = start_worker(env, workdir / "worker-2.log")
        ready_s = time.monotonic() - killed
        new = worker.identity

        resumed_s: dict[str, float] = {}  # when the first task, and half of them, ran on it

        async def all_on_new() -> bool:
            moved = sum(w.startswith(new) for w in await _task_workers(client, names))
            for what, reached in (("first", moved > 0), ("half", moved * 2 >= len(names))):
                if reached:
                    resumed_s.setdefault(what, time.monotonic() - killed)
            return moved == len(names)

        await wait_until(all_on_new, 600, f"{len(names)} tasks running on the new worker")
        resume_s = time.monotonic() - killed
        print(f"all {len(names)} tasks running on the new worker {resume_s:.1f} s after the SIGKILL",
              flush=True)  # fmt: skip
    finally:
        # Not raising: an error here must not hide the one that ended the run.
        deleted = await asyncio.gather(*(client.delete(n) for n in names), return_exceptions=True)
        if failed := [r for r in deleted if isinstance(r, BaseException)]:
            print(f"bench-scale: {len(failed)} deletes failed, the first: {failed[0]}", flush=True)
        try:
            await _ended(client, names)
        except Exception as exc:  # noqa: BLE001 - the run's own error matters more
            print(f"bench-scale: ending the connectors' workflows failed: {exc}", flush=True)
        worker.proc.send_signal(signal.SIGTERM)
        worker.proc.wait(timeout=60)
        _drop_schema(settings, schema)
    per_100 = (idle_cores - empty_cores) / count * 100
    return (
        f"bench scale: connectors={count} poll_idle_max_ms={POLL_IDLE_MAX_MS or 'default'} "
        f"start_all_s={start_all_s:.1f} "
        f"machine_cpu_cores_idle={idle_cores:.3f} machine_cpu_cores_empty_worker={empty_cores:.3f} "
        f"worker_python_cpu_cores_idle={idle_own:.3f} worker_python_cpu_cores_empty={empty_own:.3f} "
        f"idle_cpu_pct_core_per_100_connectors={per_100 * 100:.1f} "
        f"worker_python_idle_pct_core_per_100_connectors={(idle_own - empty_own) / count * 100 * 100:.1f} "
        f"idle_ratio_to_empty_worker={idle_cores / empty_cores if empty_cores else float('nan'):.1f} "
        f"rss_mb={idle_rss:.0f} empty_rss_mb={empty_rss:.0f} "
        f"history_events_per_connector_hour={history_per_hour:.1f} "
        f"history_events_per_connector_started={history0 / count:.0f} "
        f"busy_history_events_per_hour={busy_per_hour:.0f} "
        f"store_rows_written_per_connector_started={writes_per_connector:.1f} "
        f"store_rows_read_per_s={(reads1 - reads0) / IDLE_S:.0f} "
        f"store_rows_written_per_s={(writes1 - writes0) / IDLE_S:.1f} "
        f"new_worker_ready_s={ready_s:.1f} first_task_resumed_s={resumed_s['first']:.1f} "
        f"half_resumed_s={resumed_s['half']:.1f} resume_after_sigkill_s={resume_s:.1f}"
    )


async def _ended(client: SluiceClient, names: list[str], wait_s: float = 30) -> None:
    """Each deleted connector's workflow ends before the worker stops; one still running after
    ``wait_s`` is terminated, so that runs do not pile up on the dev server."""

    async def one(name: str) -> None:
        handle = client.handle(name)
        deadline = time.monotonic() + wait_s
        while (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
            if time.monotonic() > deadline:
                await handle.terminate("bench-scale: still running after its delete")
                return
            await asyncio.sleep(1)

    await _gathered([one(n) for n in names], at_once=20)


def _drop_schema(settings: Settings, schema: str) -> None:
    if not re.fullmatch(r"bench_scale_[0-9a-f]{8}", schema):
        return
    engine = create_engine(settings.database_url)
    try:
        with engine.begin() as conn:
            conn.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
    finally:
        engine.dispose()


def main() -> None:
    arg = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("BENCH_CONNECTORS", "")
    print(asyncio.run(run(int(arg) if arg else CONNECTORS)), flush=True)


if __name__ == "__main__":
    main()
