"""The whole stack goes down and comes back: running connectors resume from their offsets."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from sluice.deploy.local import stack
from tests.runtime.helpers import FAST_RETRY, wait_for
from tests.runtime.test_file_pipeline import _lines, _pipeline_configs, _read


@pytest.mark.fault
async def test_stack_down_and_up_resumes_running_connectors_exactly_once(
    tmp_path: Path, start_worker, sluice, topic_name, stack_config
) -> None:
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text(_lines(0, 2000))
    start_worker()
    name = uuid.uuid4().hex[:8]
    source_cfg, sink_cfg = ({**c, **FAST_RETRY} for c in _pipeline_configs(src, dst, topic_name, 32 * 1024))
    await sluice.create(f"src-{name}", source_cfg)
    await sluice.create(f"dst-{name}", sink_cfg)
    await wait_for(lambda: _read(dst) == _read(src), 180, "the first copy")

    stack.down(stack_config)
    with src.open("a") as f:  # written while every service is down
        f.write(_lines(2000, 1000))
    assert all(s.healthy for s in stack.up(stack_config))

    await wait_for(lambda: _read(dst) == _lines(0, 3000), 300, "the pipeline to resume after the restart")
    status = await sluice.status(f"dst-{name}")
    assert status.state == "RUNNING"
    await sluice.delete(f"src-{name}")
    await sluice.delete(f"dst-{name}")
