"""The figures behind the Temporal UI's current details: lag after a batch (table-driven), the
throttled metrics reports, the Markdown text and the start-input problems — pure functions."""

from __future__ import annotations

import pytest

from sluice.activities.task_metrics import REPORT_EVERY_S, BatchMeter, lag_after, partition_lag
from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.positions import Position
from sluice.workflows import start_input
from sluice.workflows.status_text import details, summary
from sluice.workflows.types import ConnectorState, ConnectorStatus, TaskMetrics, TaskState, TaskStatus


def _plan(*ranges: PartitionRange, batch_id: int = 3) -> BatchPlan:
    return BatchPlan("c", 0, batch_id, tuple(ranges))


@pytest.mark.parametrize(
    ("backlog", "plan", "expected"),
    [
        (
            {"a": 100, "b": 5},
            _plan(PartitionRange.offsets("a", 0, 40), PartitionRange.offsets("b", 7, 12)),
            60,
        ),
        ({"a": 10}, _plan(PartitionRange.offsets("a", 0, 10)), 0),
        ({"a": 10}, None, 10),  # idle: what the planner saw
        ({}, None, -1),  # a re-run: no fresh backlog
        ({"a": None}, None, -1),  # the source cannot count
        ({"a": 10}, _plan(PartitionRange("a", Position(("f", 1)), Position(("f", 9)))), -1),  # composite
        ({"q/b:0": 8, "q/b:1": 2}, _plan(PartitionRange.offsets("b:0", 0, 8, topic="q")), 2),  # queues
    ],
)
def test_lag_after_a_batch(backlog: dict[str, int | None], plan: BatchPlan | None, expected: int) -> None:
    assert lag_after(backlog, plan) == expected


def test_partition_lag_names_each_partition() -> None:
    lag = partition_lag({"a": 100, "b": 5}, _plan(PartitionRange.offsets("a", 0, 40)))
    assert lag == {"a": 60, "b": 5}


def test_meter_reports_the_first_batch_then_throttles_and_falls_to_zero_when_idle() -> None:
    now = [0.0]
    meter = BatchMeter("bytes", clock=lambda: now[0])
    now[0] = 2.0
    first = meter.committed(_plan(PartitionRange.offsets("a", 0, 10), batch_id=0), 100, {"a": 30})
    assert first is not None
    assert (first.last_batch, first.last_batch_records, first.records, first.lag) == (0, 100, 100, 20)
    assert (first.records_per_s, first.lag_unit) == (50.0, "bytes")
    now[0] = 3.0  # within the throttle: nothing sent
    assert meter.committed(_plan(PartitionRange.offsets("a", 10, 30), batch_id=1), 200, {"a": 20}) is None
    now[0] = 2.0 + REPORT_EVERY_S + 1  # the next report covers both batches since the last one
    later = meter.committed(_plan(PartitionRange.offsets("a", 30, 35), batch_id=2), 50, {"a": 5})
    assert later is not None
    assert (later.last_batch, later.records, later.lag) == (2, 350, 0)
    assert later.records_per_s == round(250 / (REPORT_EVERY_S + 1), 1)
    now[0] += REPORT_EVERY_S + 1
    idle = meter.idle({"a": 0})
    assert idle is not None and idle.records_per_s == 0.0 and idle.last_batch == 2
    now[0] += REPORT_EVERY_S + 1
    assert meter.idle({"a": 0}) is None  # nothing changed: no signal, no history event


def test_details_show_state_per_task_and_the_figures_as_markdown() -> None:
    metrics = TaskMetrics(3, 500, "2026-01-01T00:00:00+00:00", 1500, 250.0, 42, "records")
    status = ConnectorStatus(
        name="orders",
        config={},
        state=ConnectorState.RUNNING,
        connector_class="file-sink",
        kind="sink",
        tasks=[
            TaskStatus(0, TaskState.RUNNING, metrics=metrics),
            TaskStatus(1, TaskState.FAILED, error="connector orders task 1: disk full"),
        ],
    )
    text = details(status)
    assert text.startswith("**orders** (sink: file-sink) — **RUNNING**\n\n250.0 records/s, 1,500 records")
    assert "- task 0: **RUNNING**\n  - last batch 3: 500 records at 2026-01-01T00:00:00+00:00; " in text
    assert "250.0 records/s; lag 42 records" in text
    assert "- task 1: **FAILED**\n  - error: connector orders task 1: disk full" in text
    assert summary("orders", "sink", "file-sink") == "sink connector orders (file-sink)"


def test_details_of_a_stopped_task_keep_its_last_batch_but_no_rate() -> None:
    stopped = TaskStatus(0, TaskState.STOPPED, metrics=TaskMetrics(9, 1, "t", 1, 3.0, -1))
    text = details(ConnectorStatus("x", {}, ConnectorState.STOPPED, "file-source", "source", tasks=[stopped]))
    assert "last batch 9: 1 records at t; lag unknown" in text
    assert "records/s" not in text


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, ["connector n: the workflow has no input"]),
        ([1], ["connector n: the workflow input must be a JSON object", "got an array"]),
        ({"name": "n"}, ["connector n: field 'config': required"]),
        ({"config": {}}, ["connector n: field 'name': required"]),
        ({"name": "n", "config": "x"}, ["field 'config': expected an object of string values, got a string"]),
        ({"name": "n", "config": {}, "tasks": 1}, ["field 'tasks': internal workflow state"]),
    ],
)
def test_start_input_problems_name_connector_and_field(raw: object, expected: list[str]) -> None:
    state = start_input.failed_state(raw, "sluice-connector-n")
    assert state.name == "n" and state.state == ConnectorState.FAILED
    for text in expected:
        assert text in state.error
