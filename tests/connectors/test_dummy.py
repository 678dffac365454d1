"""Dummy source/sink: deterministic records and the fault settings tests of the runtime rely on."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from sluice.connectors.api import open_sink_task, open_source_task
from sluice.connectors.dummy import DummySinkConnector, DummySourceConnector
from sluice.connectors.dummy.faults import InjectedFault
from sluice.connectors.model import BatchPlan, PartitionRange
from sluice.connectors.records import Record
from sluice.connectors.source_reads import records_table
from tests.store.helpers import offsets


def test_source_records_are_deterministic() -> None:
    raw = {"connector.class": "dummy-source", "topic": "t", "partitions": "3", "records.per.partition": "5"}
    configs = DummySourceConnector().task_configs(raw, 2)
    tasks = [open_source_task(DummySourceConnector, c, i) for i, c in enumerate(configs)]
    assert [t.partitions() for t in tasks] == [["dummy-0", "dummy-2"], ["dummy-1"]]
    assert offsets(tasks[0].latest_positions({})) == {"dummy-0": 5, "dummy-2": 5}
    table = tasks[0].read([PartitionRange("dummy-2", 3, 5)]).to_table()
    assert table.to_pylist() == [
        {
            "topic": "t",
            "partition": "dummy-2",
            "offset": i,
            "key": f"key-2-{i}",
            "value": f"value-2-{i}",
            "headers": [("dummy.partition", "2")],
            "timestamp": datetime(2024, 1, 1, 0, 0, 0, i * 1000, tzinfo=UTC),
        }
        for i in (3, 4)
    ]


def test_source_faults(tmp_path: Path) -> None:
    marker = tmp_path / "failed-once"
    raw = {
        "connector.class": "dummy-source",
        "name": "d",
        "topic": "t",
        "fail.at.offset": "7",
        "fail.once.marker": str(marker),
    }
    task = open_source_task(DummySourceConnector, raw, 0)
    with pytest.raises(
        InjectedFault, match="connector 'd': injected failure at partition 'dummy-0' offset 7"
    ):
        task.read([PartitionRange("dummy-0", 5, 10)])
    with pytest.raises(InjectedFault, match=r"one-time failure \(fail.once.marker\)"):
        task.read([PartitionRange("dummy-0", 0, 3)])
    assert marker.exists()
    values = task.read([PartitionRange("dummy-0", 0, 3)]).to_table().column("value").to_pylist()
    assert values == ["value-0-0", "value-0-1", "value-0-2"]


@pytest.mark.parametrize("fault", ["fail.at.offset", "fail.once.marker"])
def test_sink_fails_mid_write_and_rerun_repairs(tmp_path: Path, fault: str) -> None:
    out = tmp_path / "out.txt"
    setting = "2" if fault == "fail.at.offset" else str(tmp_path / "marker")
    raw = {"connector.class": "dummy-sink", "name": "d", "topics": "t", "file": str(out), fault: setting}
    task = open_sink_task(DummySinkConnector, raw, 0)
    records = records_table([Record("broker-a:0", i, f"v{i}", topic="t") for i in range(4)])
    bare = BatchPlan("d", 0, 1, (PartitionRange("broker-a:0", 0, 4, "t"),))
    plan = BatchPlan("d", 0, 1, bare.ranges, task.prepare(bare))
    with pytest.raises(
        InjectedFault, match="connector 'd': injected failure writing partition 'broker-a:0' offset 2"
    ):
        task.write(records, plan)
    assert out.read_text() == "v0\nv1\n"  # the partial write a crash leaves
    if fault == "fail.at.offset":
        task = open_sink_task(DummySinkConnector, {**raw, "fail.at.offset": "-1"}, 0)
    task.write(records, plan)
    assert out.read_text() == "v0\nv1\nv2\nv3\n"
