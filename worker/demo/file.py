"""`make demo-file`: a real pipeline on the local stack — file -> RocketMQ -> file — with live progress.

1. starts a `sluice worker` process (Temporal worker + SparkSession);
2. writes 20,000 lines to a source file and creates a file-source and a file-sink connector;
3. prints progress until the sink file equals the source, appends more lines while it runs;
4. pauses and resumes the sink to show the lifecycle, checks the copy again, then deletes both
   connectors (their workflow histories stay visible in the Temporal UI) and stops the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from urllib.parse import quote

from sluice.deploy.local import stack
from sluice.deploy.local.config import StackConfig
from sluice.worker.client import SluiceClient
from sluice.worker.settings import settings_or_exit
from sluice.workflows.types import workflow_id_for


def _lines(start: int, count: int) -> str:
    return "".join(
        f"{i:06d} the quick brown fox jumps over the lazy dog #{i * 7919 % 100003}\n"
        for i in range(start, start + count)
    )


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


async def _wait_copy(src: Path, dst: Path, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, total = _size(dst), _size(src)
        print(f"  copied {done:>9,} / {total:,} bytes ({done * 100 // max(total, 1)}%)", flush=True)
        if done >= total:
            if dst.read_bytes() != src.read_bytes():
                raise SystemExit(f"demo: FAILED — {dst} has all the bytes but differs from {src}")
            return
        await asyncio.sleep(2)
    raise SystemExit(f"demo: the sink did not catch up within {timeout_s:.0f}s")


def _ready_line(log: Path) -> str | None:
    """The worker's ready line (task queue and metrics address), once its log has it."""
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("sluice worker ready"):
            return line
    return None


@contextlib.asynccontextmanager
async def started_worker(
    cfg: StackConfig, log_name: str, env: Mapping[str, str]
) -> AsyncIterator[subprocess.Popen[bytes]]:
    """A `sluice worker` process with ``env`` added, ready (its log says so), stopped on exit.

    Its metrics are served on any free port unless ``SLUICE_METRICS_PORT`` is set: a demo must
    start beside a worker (or another demo) that has the default 9464. The ready line says where.
    """
    log = cfg.log_dir / f"{log_name}.log"
    print(f"starting a sluice worker (log: {log})", flush=True)
    worker = subprocess.Popen(
        [sys.executable, "-m", "sluice.worker.cli", "worker"],
        env={"SLUICE_METRICS_PORT": "0", **os.environ, **env},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        while (ready := _ready_line(log)) is None:
            if worker.poll() is not None:
                raise SystemExit(f"demo: the worker exited; see {log}")
            await asyncio.sleep(0.5)
        print(ready, flush=True)
        yield worker
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


async def run_demo(cfg: StackConfig) -> None:
    work = cfg.state_dir / "demo"
    work.mkdir(parents=True, exist_ok=True)
    run_id = time.strftime("%Y%m%d-%H%M%S")
    src, dst = work / f"in-{run_id}.txt", work / f"out-{run_id}.txt"
    topic = f"demo-lines-{run_id}"
    queue = f"sluice-demo-{run_id}"
    src.write_text(_lines(0, 20000))

    async with started_worker(cfg, f"demo-worker-{run_id}", {"SLUICE_TASK_QUEUE": queue}):
        client = await SluiceClient.connect(cfg.temporal_address, cfg.temporal_namespace, queue)
        source, sink = f"demo-source-{run_id}", f"demo-sink-{run_id}"
        await client.create(
            source,
            {
                "connector.class": "file-source",
                "file": str(src),
                "topic": topic,
                "batch.max.bytes": str(256 * 1024),
                "poll.interval.ms": "500",
            },
        )
        await client.create(
            sink,
            {"connector.class": "file-sink", "file": str(dst), "topics": topic, "poll.interval.ms": "500"},
        )
        for name in (source, sink):
            workflow_path = f"namespaces/{cfg.temporal_namespace}/workflows/{quote(workflow_id_for(name))}"
            url = f"{cfg.temporal_ui_url}/{workflow_path}"
            print(f"connector {name}: {url}", flush=True)
        print(f"copying {src} -> RocketMQ topic {topic} -> {dst}", flush=True)
        await _wait_copy(src, dst)

        print("appending 5,000 lines while the pipeline runs", flush=True)
        with src.open("a") as f:
            f.write(_lines(20000, 5000))
        await _wait_copy(src, dst)

        print("pausing the sink, appending 1,000 lines, resuming", flush=True)
        print(f"  sink state: {(await client.pause(sink)).state}", flush=True)
        with src.open("a") as f:
            f.write(_lines(25000, 1000))
        await asyncio.sleep(3)
        print(f"  sink state: {(await client.resume(sink)).state}", flush=True)
        await _wait_copy(src, dst)
        status = await client.status(source)
        print(f"source {status.state}, tasks: {[(t.task_id, str(t.state)) for t in status.tasks]}")
        print(f"OK: {dst} is identical to {src} ({_size(src):,} bytes, 26,000 lines)", flush=True)
        for name in (source, sink):
            await client.delete(name)
        print(f'Temporal UI: {cfg.temporal_ui_url} (search: ConnectorName STARTS_WITH "demo-")')


def stack_is_healthy(cfg: StackConfig) -> bool:
    """Print the local stack's services; False (with what to do) unless every one is up."""
    statuses = stack.status(cfg)
    for s in statuses:
        print(f"{s.name:<18} {'up' if s.healthy else 'DOWN':<5} {s.address}")
    if not all(s.healthy for s in statuses):
        print("demo: the local stack is not healthy; run `make up`", file=sys.stderr)
        return False
    return True


def main() -> int:
    cfg = settings_or_exit().stack
    if not stack_is_healthy(cfg):
        return 1
    asyncio.run(run_demo(cfg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
