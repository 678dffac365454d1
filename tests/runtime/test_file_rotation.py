"""Replaced and rotated source files on the real stack (issue: replacing a file lost data silently).

file-source -> RocketMQ -> file-sink with real `sluice worker` processes: a file replaced under its
name fails the task naming the file (or, with file.replaced=restart, is read anew), and a rotated log
(app.log renamed to app.log.1, a new app.log) loses nothing and doubles nothing.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from sluice.workflows.types import TaskState
from tests.runtime.helpers import wait_for


def _lines(prefix: str, start: int, count: int) -> str:
    return "".join(f"{prefix}-{i:07d}\n" for i in range(start, start + count))


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


async def _pipeline(sluice, src_config: dict[str, str], dst: Path, topic: str) -> tuple[str, str]:
    name = uuid.uuid4().hex[:8]
    source, sink = f"src-{name}", f"dst-{name}"
    common = {"poll.interval.ms": "200", "task.heartbeat.timeout.s": "5"}
    await sluice.create(
        source, {"connector.class": "file-source", "topic": topic, **common, **src_config}
    )
    await sluice.create(sink, {"connector.class": "file-sink", "file": str(dst), "topics": topic, **common})
    return source, sink


async def test_replaced_file_fails_naming_it_and_restart_policy_reads_it_anew(
    tmp_path: Path, start_worker, sluice, topic_name
) -> None:
    start_worker()
    # 1. The default: the replaced file is data loss; the task fails naming the file, nothing stale
    #    is read (the probe: new-0000001... must not be skipped silently).
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text(_lines("old", 0, 1000))
    source, sink = await _pipeline(sluice, {"file": str(src)}, dst, topic_name)
    await wait_for(lambda: _read(dst) == _read(src), 180, "the first file copied")
    src.unlink()
    src.write_text("".join(f"new-{i:07d}\n" for i in range(1, 2001)))

    async def source_failed() -> bool:
        status = await sluice.status(source)
        return bool(status.tasks) and status.tasks[0].state == TaskState.FAILED

    await wait_for(source_failed, 120, "the source task to fail on the replaced file")
    error = (await sluice.status(source)).tasks[0].error
    assert str(src) in error and "data loss" in error and "another object" in error, error
    assert _read(dst) == _lines("old", 0, 1000)  # nothing of the new file at a stale offset
    # restart --failed does not resume at the stale offset either: it fails again.
    await sluice.restart(source, only_failed=True)
    await wait_for(source_failed, 120, "the restarted task to fail again")
    await sluice.delete(source)
    await sluice.delete(sink)

    # 2. file.replaced=restart: the new file is read from its start.
    src2, dst2 = tmp_path / "in2.txt", tmp_path / "out2.txt"
    src2.write_text(_lines("old", 0, 500))
    topic2 = f"T_{uuid.uuid4().hex[:12]}"
    source, sink = await _pipeline(sluice, {"file": str(src2), "file.replaced": "restart"}, dst2, topic2)
    await wait_for(lambda: _read(dst2) == _read(src2), 180, "the first file copied")
    src2.unlink()
    src2.write_text(_lines("new", 0, 700))
    expected = _lines("old", 0, 500) + _lines("new", 0, 700)
    await wait_for(lambda: _read(dst2) == expected, 180, "the replacing file copied from its start")
    assert (await sluice.status(source)).tasks[0].state == TaskState.RUNNING
    await sluice.delete(source)
    await sluice.delete(sink)


async def test_rotated_log_loses_nothing_and_doubles_nothing(
    tmp_path: Path, start_worker, sluice, topic_name
) -> None:
    start_worker()
    log, dst = tmp_path / "app.log", tmp_path / "out.txt"
    log.write_text(_lines("a", 0, 2000))
    source, sink = await _pipeline(sluice, {"files": f"{tmp_path}/app.log*"}, dst, topic_name)
    await wait_for(lambda: _read(dst) == _read(log), 180, "the log copied")
    with log.open("a") as fh:  # written just before the rotation: must not be lost
        fh.write(_lines("b", 0, 300))
    log.rename(tmp_path / "app.log.1")
    log.write_text(_lines("c", 0, 400))
    expected = _lines("a", 0, 2000) + _lines("b", 0, 300) + _lines("c", 0, 400)

    def copied() -> bool:
        return sorted(_read(dst).splitlines()) == sorted(expected.splitlines())

    await wait_for(copied, 180, "every line of both files exactly once")
    out = _read(dst).splitlines()
    assert len(out) == len(set(out)) == 2700
    # Within each file the order is kept.
    for prefix in "abc":
        mine = [line for line in out if line.startswith(prefix + "-")]
        assert mine == sorted(mine)
    await sluice.delete(source)
    await sluice.delete(sink)


async def test_missing_file_is_shown_in_status_and_read_once_it_appears(
    tmp_path: Path, start_worker, sluice, topic_name
) -> None:
    start_worker()
    src, dst = tmp_path / "later.txt", tmp_path / "out.txt"
    source, sink = await _pipeline(sluice, {"file": str(src)}, dst, topic_name)

    async def detail() -> str:
        status = await sluice.status(source)
        return status.tasks[0].detail if status.tasks else ""

    async def waiting() -> bool:
        return await detail() == f"waiting for file {src} (does not exist)"

    await wait_for(waiting, 120, "status to show the missing file")
    assert (await sluice.status(source)).tasks[0].state == TaskState.RUNNING
    src.write_text(_lines("x", 0, 100))
    await wait_for(lambda: _read(dst) == _read(src), 120, "the file copied once it exists")

    async def cleared() -> bool:
        return await detail() == ""

    await wait_for(cleared, 30, "the waiting note to clear")
    await sluice.delete(source)
    await sluice.delete(sink)
