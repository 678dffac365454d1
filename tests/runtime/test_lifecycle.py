"""Pause, resume, stop, restart, reconfigure and delete through the client, with status after each."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from temporalio.service import RPCError

from sluice.activities.store import OffsetStore
from sluice.worker.client import ConnectorConfigError
from sluice.workflows.types import ConnectorState, TaskState
from tests.runtime.helpers import wait_for
from tests.runtime.test_file_pipeline import _lines, _pipeline_configs, _read


async def test_lifecycle_operations_keep_offsets_and_report_state(
    tmp_path: Path, start_worker, sluice, topic_name, runtime_env, stack_config
) -> None:
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text(_lines(0, 1000))
    start_worker()
    name = uuid.uuid4().hex[:8]
    source_cfg, sink_cfg = _pipeline_configs(src, dst, topic_name, 32 * 1024)
    source, sink = f"src-{name}", f"dst-{name}"
    await sluice.create(source, source_cfg)
    await sluice.create(sink, sink_cfg)
    await wait_for(lambda: _read(dst) == _read(src), 180, "initial copy")

    paused = await sluice.pause(sink)
    assert paused.state == ConnectorState.PAUSED
    await wait_for(lambda: _all_tasks(sluice, sink, TaskState.PAUSED), 30, "sink tasks paused")
    with src.open("a") as f:
        f.write(_lines(1000, 200))
    await asyncio.sleep(4)
    assert _read(dst) == _lines(0, 1000), "a paused sink must not write"
    assert (await sluice.resume(sink)).state == ConnectorState.RUNNING
    await wait_for(lambda: _read(dst) == _lines(0, 1200), 60, "resumed sink catching up")

    assert (await sluice.stop(source)).state == ConnectorState.STOPPED
    await wait_for(lambda: _all_tasks(sluice, source, TaskState.STOPPED), 30, "source tasks stopped")
    with src.open("a") as f:
        f.write(_lines(1200, 100))
    await asyncio.sleep(3)
    assert _read(dst) == _lines(0, 1200)
    assert (await sluice.resume(source)).state == ConnectorState.RUNNING
    await wait_for(lambda: _read(dst) == _lines(0, 1300), 60, "source resumed from its offsets")

    restarted = await sluice.restart(sink)
    assert restarted.state == ConnectorState.RUNNING and restarted.generation == 1

    # A file sink writes one file, so it always has one task; reconfigure its batch size instead.
    new_sink_cfg = {**sink_cfg, "batch.max.records": "50"}
    reconfigured = await sluice.reconfigure(sink, new_sink_cfg)
    assert reconfigured.config["batch.max.records"] == "50" and reconfigured.generation == 2
    assert reconfigured.task_configs[0]["batch.max.records"] == "50"
    with src.open("a") as f:
        f.write(_lines(1300, 300))
    await wait_for(lambda: _read(dst) == _lines(0, 1600), 90, "reconfigured sink continuing from its offsets")
    with pytest.raises(ConnectorConfigError, match="batch.max.records"):
        await sluice.reconfigure(sink, {**sink_cfg, "batch.max.records": "-1"})

    store = OffsetStore(stack_config.database_url, schema=runtime_env.store_schema)
    assert store.committed_positions(source)
    await sluice.delete(source)
    await sluice.delete(sink, delete_offsets=True)
    assert store.committed_positions(source) == {} and store.committed_positions(sink) == {}
    store.dispose()


async def _all_tasks(sluice, name: str, state: TaskState) -> bool:
    status = await sluice.status(name)
    return all(t.state == state for t in status.tasks)


async def test_invalid_config_is_rejected_before_anything_starts(sluice, tmp_path: Path) -> None:
    name = f"bad-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ConnectorConfigError) as err:
        await sluice.create(name, {"connector.class": "file-source", "tasks.max": "zero"})
    text = str(err.value)
    assert "tasks.max" in text and "file" in text and "topic" in text and name in text
    with pytest.raises(RPCError):
        await sluice.handle(name).describe()
    with pytest.raises(ConnectorConfigError, match="no-such-connector"):
        await sluice.create(name, {"connector.class": "no-such-connector"})
