"""Replaced, rewritten, rotated and missing files, planned by the real planner over the real file task.

Committing is simulated by carrying each plan's end positions forward (the store does exactly that),
so these run without services; tests/runtime/test_file_rotation.py runs the same cases end to end.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sluice.connectors.api import open_source_task
from sluice.connectors.data_loss import DataLossError
from sluice.connectors.file.source import FileSourceConnector, FileSourceTask
from sluice.connectors.model import BatchPlan, DataLossPolicy
from sluice.connectors.planner import PlanRequest, plan_next, view_of
from sluice.connectors.positions import PartitionKey, Position


def task_for(tmp: Path, **extra: str) -> FileSourceTask:
    raw = {"connector.class": "file-source", "name": "logs", "topic": "t", **extra}
    task = open_source_task(FileSourceConnector, raw, 0)
    assert isinstance(task, FileSourceTask)
    return task


class Runner:
    """Plans batches like the runtime and 'commits' them into an in-memory position map."""

    def __init__(self, task: FileSourceTask, policy: DataLossPolicy = DataLossPolicy.FAIL) -> None:
        self.task, self.policy = task, policy
        self.committed: dict[PartitionKey, Position] = {}
        self.batch = 0

    def step(self) -> BatchPlan | None:
        decision = plan_next(
            PlanRequest("logs", 0, self.batch, self.committed, data_loss=self.policy, max_units=1 << 20),
            view_of(self.task),
        )
        self.committed.update(decision.moved)
        if decision.plan is not None:
            self.committed.update(decision.plan.end_positions())
            self.batch += 1
        return decision.plan

    def spans(self, plan: BatchPlan | None) -> list[tuple[str, int, int]]:
        assert plan is not None
        return [(Path(r.partition).name, r.start.offset, r.end.offset) for r in plan.ranges]


def lines(prefix: str, count: int) -> str:
    return "".join(f"{prefix}-{i:07d}\n" for i in range(count))


def test_appends_keep_the_identity(tmp_path: Path) -> None:
    f = tmp_path / "app.log"
    f.write_text(lines("a", 10))
    run = Runner(task_for(tmp_path, file=str(f)))
    assert run.spans(run.step()) == [("app.log", 0, 100)]
    with f.open("a") as fh:
        fh.write(lines("b", 5))
    assert run.spans(run.step()) == [("app.log", 100, 150)]
    assert run.step() is None


@pytest.mark.parametrize("how", ["rm-and-create", "rewrite-in-place"])
def test_replaced_file_is_data_loss_naming_the_file(tmp_path: Path, how: str) -> None:
    """The issue's probe: 1,000 lines (12,000 bytes) committed, then the file replaced by 2,000."""
    f = tmp_path / "in.txt"
    f.write_text(lines("old", 1000)[: 12 * 1000])
    run = Runner(task_for(tmp_path, file=str(f)))
    run.step()
    if how == "rm-and-create":
        f.unlink()
    f.write_text("".join(f"new-{i:07d}\n" for i in range(1, 2001)))
    with pytest.raises(DataLossError, match=rf"connector 'logs' partition '{f}'.*another object now"):
        run.step()


def test_replaced_file_with_restart_policy_is_read_from_its_start(tmp_path: Path) -> None:
    f = tmp_path / "in.txt"
    f.write_text(lines("old", 100))
    run = Runner(task_for(tmp_path, file=str(f), **{"file.replaced": "restart"}))
    run.step()
    f.unlink()
    f.write_text(lines("new", 200))
    assert run.spans(run.step()) == [("in.txt", 0, 200 * 12)]


def test_replaced_file_with_data_loss_skip_is_read_from_its_start(tmp_path: Path) -> None:
    f = tmp_path / "in.txt"
    f.write_text(lines("old", 100))
    run = Runner(task_for(tmp_path, file=str(f)), DataLossPolicy.SKIP)
    run.step()
    os.truncate(f, 0)
    f.write_text(lines("new", 150))  # same inode, other content: rewritten in place
    assert run.spans(run.step()) == [("in.txt", 0, 150 * 12)]


def test_rotation_reads_the_rest_of_the_renamed_file_before_the_new_one(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text(lines("one", 50))
    run = Runner(task_for(tmp_path, files=str(tmp_path / "app.log*")))
    assert run.spans(run.step()) == [("app.log", 0, 600)]
    with log.open("a") as fh:
        fh.write(lines("two", 10))  # written, not yet read, when the log rotates
    log.rename(tmp_path / "app.log.1")
    log.write_text(lines("three", 20))
    assert run.spans(run.step()) == [("app.log.1", 600, 720)]  # the new app.log waits
    assert run.spans(run.step()) == [("app.log", 0, 20 * 14)]
    assert run.step() is None
    # A second rotation: app.log.1 -> app.log.2, app.log -> app.log.1, a new app.log.
    (tmp_path / "app.log.1").rename(tmp_path / "app.log.2")
    log.rename(tmp_path / "app.log.1")
    log.write_text(lines("four", 3))
    assert run.spans(run.step()) == [("app.log", 0, 3 * 13)]
    assert run.step() is None


def test_missing_file_waits_and_is_reported(tmp_path: Path) -> None:
    f = tmp_path / "later.txt"
    task = task_for(tmp_path, file=str(f))
    run = Runner(task)
    assert run.step() is None
    assert task.waiting_for() == f"waiting for file {f} (does not exist)"
    f.write_text(lines("x", 3))
    assert run.spans(run.step()) == [("later.txt", 0, 30)]
    assert task.waiting_for() == ""
