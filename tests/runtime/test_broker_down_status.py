"""Status tells the truth while a service is down (issue: retries were invisible, status said
RUNNING with no error): with the real broker stopped, a task shows its attempt, the last error with
its time, and that it is being retried; with the broker back the copy is exact."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from sluice.deploy.local.stack import services
from sluice.workflows.types import ConnectorState, TaskState
from tests.runtime.helpers import FAST_RETRY, wait_for
from tests.runtime.test_file_pipeline import _lines, _pipeline_configs, _read


@pytest.mark.fault
async def test_a_task_whose_broker_is_down_shows_attempt_and_last_error(
    tmp_path: Path, start_worker, sluice, topic_name, stack_config
) -> None:
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text(_lines(0, 1000))
    start_worker()
    name = uuid.uuid4().hex[:8]
    source_cfg, sink_cfg = ({**c, **FAST_RETRY} for c in _pipeline_configs(src, dst, topic_name, 32 * 1024))
    source, sink = f"src-{name}", f"dst-{name}"
    await sluice.create(source, source_cfg)
    await sluice.create(sink, sink_cfg)
    await wait_for(lambda: _read(dst) == _read(src), 180, "the first copy")

    broker = services(stack_config)["rocketmq-broker"]
    broker.stop()
    try:
        with src.open("a") as f:  # the source must now reach the broker, which is down
            f.write(_lines(1000, 500))

        async def retrying_visibly() -> bool:
            task = (await sluice.status(source)).tasks[0]
            return task.retrying and task.attempt >= 2 and bool(task.last_error and task.last_error_time)

        await wait_for(retrying_visibly, 180, "status to show the retries")
        status = await sluice.status(source)
        task = status.tasks[0]
        assert status.state == ConnectorState.RUNNING and task.state == TaskState.RUNNING
        assert f"connector {source}" in task.last_error and task.error == ""
        assert task.failing_since
    finally:
        broker.start()

    await wait_for(lambda: _read(dst) == _lines(0, 1500), 300, "the copy to resume, exactly")
    assert (await sluice.status(source)).tasks[0].state == TaskState.RUNNING
    await sluice.delete(source)
    await sluice.delete(sink)
