"""End to end on the real stack: file -> RocketMQ -> file, with appends, failover and a stack restart."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from sluice.workflows.types import ConnectorState
from tests.runtime.helpers import wait_for


def _lines(start: int, count: int) -> str:
    return "".join(
        f"line {i:07d} {uuid.uuid5(uuid.NAMESPACE_OID, str(i)).hex}\n" for i in range(start, start + count)
    )


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def _pipeline_configs(
    src: Path, dst: Path, topic: str, max_bytes: int
) -> tuple[dict[str, str], dict[str, str]]:
    source = {
        "connector.class": "file-source",
        "file": str(src),
        "topic": topic,
        "batch.max.bytes": str(max_bytes),
        "poll.interval.ms": "200",
        "task.heartbeat.timeout.s": "5",
    }
    sink = {
        "connector.class": "file-sink",
        "file": str(dst),
        "topics": topic,
        "batch.max.records": "5000",
        "poll.interval.ms": "200",
        "task.heartbeat.timeout.s": "5",
    }
    return source, sink


async def test_file_to_rocketmq_to_file_including_appended_lines(
    tmp_path, start_worker, sluice, topic_name
) -> None:
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text(_lines(0, 3000))
    start_worker()
    name = uuid.uuid4().hex[:8]
    source_cfg, sink_cfg = _pipeline_configs(src, dst, topic_name, 64 * 1024)
    await sluice.create(f"src-{name}", source_cfg)
    await sluice.create(f"dst-{name}", sink_cfg)

    await wait_for(lambda: _read(dst) == _read(src), 180, "sink file to equal the source file")
    with src.open("a") as f:
        f.write(_lines(3000, 500))
        f.write("an unterminated line is not read until its newline arrives")
    await wait_for(lambda: _read(dst) == _lines(0, 3500), 120, "appended lines to arrive")
    with src.open("a") as f:
        f.write("\n")
    await wait_for(lambda: _read(dst) == _read(src), 60, "the completed last line to arrive")

    status = await sluice.status(f"src-{name}")
    assert status.state == ConnectorState.RUNNING and status.kind == "source"
    await sluice.delete(f"src-{name}")
    await sluice.delete(f"dst-{name}")


async def test_an_idle_sink_wakes_when_its_source_commits_not_at_its_next_poll(
    tmp_path, start_worker, sluice, topic_name
) -> None:
    """The sink polls every hour, and still gets each source batch within seconds: the source's
    commit rings its doorbell (activities.doorbells), before its first batch and after a quiet
    spell alike. (An hour: an idle wait ends on a multiple of itself, so it may be shorter than the
    interval, but never below 2 % of it, 72 s, longer than this test waits.)"""
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text(_lines(0, 10))
    start_worker()
    name = uuid.uuid4().hex[:8]
    source_cfg, sink_cfg = _pipeline_configs(src, dst, topic_name, 64 * 1024)
    sink_cfg |= {"poll.interval.ms": "3600000", "poll.idle.max.ms": "3600000"}
    await sluice.create(f"dst-{name}", sink_cfg)  # first: it polls an empty topic, then waits
    await sluice.wait_for(f"dst-{name}", ConnectorState.RUNNING)
    await sluice.create(f"src-{name}", source_cfg)
    await wait_for(lambda: _read(dst) == _read(src), 60, "the first lines, well before the sink's next poll")
    await asyncio.sleep(2)  # the sink has polled again, found nothing, and waits
    with src.open("a") as f:
        f.write(_lines(10, 50))
    await wait_for(lambda: _read(dst) == _lines(0, 60), 60, "appended lines, before the sink's next poll")
    await sluice.delete(f"src-{name}")
    await sluice.delete(f"dst-{name}")


async def _keep_appending(path: Path, start: int, stop: asyncio.Event) -> int:
    """Append 100 lines every 0.2 s (well below the pipeline's rate, so it keeps up and stays busy)
    until ``stop``; return how many lines the file then holds."""
    end = start
    while not stop.is_set():
        with path.open("a") as f:
            f.write(_lines(end, 100))
        end += 100
        await asyncio.sleep(0.2)
    return end


@pytest.mark.fault
@pytest.mark.private_worker  # SIGKILLs its worker
async def test_sigkill_mid_batch_then_another_worker_resumes_exactly_once(
    tmp_path, start_worker, sluice, topic_name
) -> None:
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text(_lines(0, 8000))  # ~440 KB in 32 KiB batches, then a file that keeps growing
    first = start_worker()
    name = uuid.uuid4().hex[:8]
    source_cfg, sink_cfg = _pipeline_configs(src, dst, topic_name, 32 * 1024)
    await sluice.create(f"src-{name}", source_cfg)
    await sluice.create(f"dst-{name}", sink_cfg)
    await wait_for(lambda: len(_read(dst)) > 0, 180, "the first sink batch")
    # Lines keep arriving, before and after the kill, so it lands mid-stream on any machine.
    stop = asyncio.Event()
    appender = asyncio.create_task(_keep_appending(src, 8000, stop))
    await asyncio.sleep(0.5)
    first.kill()
    await asyncio.sleep(0.3)  # lines the appender writes now wait for the next worker
    assert len(_read(dst)) < len(_read(src)), "the pipeline finished before the kill; the test proves nothing"
    await asyncio.to_thread(start_worker)  # lines written while no worker runs the tasks
    stop.set()
    total = await appender

    await wait_for(lambda: len(_read(dst)) >= len(_read(src)), 300, "the sink to catch up after failover")
    await wait_for(lambda: _read(dst) == _read(src), 30, "exact equality")
    out = _read(dst).splitlines()
    assert len(out) == len(set(out)) == total and _read(src) == _lines(0, total)
    await sluice.delete(f"src-{name}")
    await sluice.delete(f"dst-{name}")
