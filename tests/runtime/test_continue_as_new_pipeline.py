"""Continue-as-new on the real stack: a file pipeline keeps moving through several runs.

A dedicated Temporal dev server suggests continue-as-new after a few dozen history events
(``limit.historyCount.suggestContinueAsNew``, checked to work on the bundled server), a real
`sluice worker` runs the connectors against the shared PostgreSQL and RocketMQ, and lines are
appended before, across and after several runs, with pause/resume and reconfigure in between. The
sink file must equal the source byte for byte: nothing lost, nothing doubled.
"""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sluice.deploy.local.temporal import temporal_binary
from sluice.worker.client import SluiceClient
from sluice.workflows import search_attributes
from sluice.workflows.types import ConnectorState, TaskState
from tests.runtime.helpers import wait_for
from tests.runtime.test_file_pipeline import _lines, _pipeline_configs, _read
from tests.runtime.workers import RuntimeEnv, WorkerProcess

SUGGEST_AFTER_EVENTS = 30


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def temporal_address(tmp_path: Path) -> Iterator[str]:
    """A private dev server that suggests continue-as-new early; stopped after the test."""
    port = _free_port()
    argv = [
        str(temporal_binary()),
        "server",
        "start-dev",
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--http-port",
        str(_free_port()),
        "--metrics-port",
        str(_free_port()),
        "--headless",
        "--db-filename",
        str(tmp_path / "temporal.db"),
        "--log-level",
        "warn",
        "--dynamic-config-value",
        f"limit.historyCount.suggestContinueAsNew={SUGGEST_AFTER_EVENTS}",
    ]
    for name, kind in search_attributes.REGISTRATION.items():
        argv += ["--search-attribute", f"{name}={kind}"]
    log = (tmp_path / "temporal.log").open("wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while subprocess.run(
        [str(temporal_binary()), "operator", "cluster", "health", "--address", address],
        capture_output=True,
        text=True,
    ).returncode:
        assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "temporal.log").read_text()
        time.sleep(0.5)
    yield address
    proc.terminate()
    proc.wait(timeout=30)


async def _runs(sluice: SluiceClient, name: str) -> int:
    """How many runs the connector's workflow has had (1 + continue-as-new count)."""
    query = f"WorkflowId = 'sluice-connector-{name}'"
    return len([wf async for wf in sluice.client.list_workflows(query)])


async def _running(sluice: SluiceClient, name: str) -> bool:
    status = await sluice.status(name)
    return status.state == ConnectorState.RUNNING and all(t.state == TaskState.RUNNING for t in status.tasks)


@pytest.mark.private_worker  # stops or kills its worker, or sets its environment
@pytest.mark.slow
async def test_file_pipeline_is_exact_across_several_continue_as_new_runs(
    tmp_path: Path,
    temporal_address: str,
    runtime_env: RuntimeEnv,
    start_worker: Callable[[], WorkerProcess],
    topic_name: str,
) -> None:
    runtime_env.env["SLUICE_TEMPORAL_ADDRESS"] = temporal_address
    start_worker()
    sluice = await SluiceClient.connect(temporal_address, task_queue=runtime_env.task_queue)
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text(_lines(0, 2000))
    name = uuid.uuid4().hex[:8]
    source, sink = f"src-{name}", f"dst-{name}"
    source_cfg, sink_cfg = _pipeline_configs(src, dst, topic_name, 16 * 1024)
    await sluice.create(source, source_cfg)
    await sluice.create(sink, sink_cfg)
    await wait_for(lambda: _read(dst) == _lines(0, 2000), 180, "the first lines to arrive")

    written = 2000
    for round_ in range(8):  # until both have continued as new at least twice
        with src.open("a") as f:  # appended while the next control requests cross runs
            f.write(_lines(written, 1500))
        written += 1500
        await sluice.pause(source)
        await wait_for(lambda: _all_tasks(sluice, source, TaskState.PAUSED), 60, "the source paused")
        with src.open("a") as f:
            f.write(_lines(written, 500))
        written += 500
        await sluice.resume(source)
        if round_ == 1:
            reconfigured = {**sink_cfg, "batch.max.records": "700"}
            assert (await sluice.reconfigure(sink, reconfigured)).config["batch.max.records"] == "700"
        else:
            await sluice.pause(sink)
            await sluice.resume(sink)
        await wait_for(lambda: _running(sluice, source), 60, "the source running again")
        await wait_for(lambda: _running(sluice, sink), 60, "the sink running again")
        if round_ >= 1 and await _runs(sluice, source) >= 3 and await _runs(sluice, sink) >= 3:
            break

    assert await _runs(sluice, source) >= 3, "the source never continued as new twice"
    assert await _runs(sluice, sink) >= 3, "the sink never continued as new twice"
    with src.open("a") as f:  # after the last continue-as-new, nothing is asked of the workflows
        f.write(_lines(written, 3000))
    written += 3000
    await wait_for(lambda: _read(dst) == _read(src), 240, "the sink to equal the source")
    assert _read(dst) == _lines(0, written)
    assert await _running(sluice, source) and await _running(sluice, sink)
    await sluice.delete(source)
    await sluice.delete(sink, delete_offsets=True)


async def _all_tasks(sluice: SluiceClient, name: str, state: TaskState) -> bool:
    return all(t.state == state for t in (await sluice.status(name)).tasks)
