"""Prometheus metrics, scraped for real: a pipeline on a real worker, a real Prometheus server
(Debian's package) scraping it, and the counters compared with what the pipeline moved; the
alert rules checked and unit-tested by promtool; the dashboard's queries run on that server."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from pathlib import Path

import httpx

from sluice.worker.rest.app import create_app
from sluice.worker.rest.deps import RestSettings
from sluice.worker.rest.metrics import state_families
from sluice.workflows.types import ConnectorState, ConnectorStatus, TaskMetrics, TaskState, TaskStatus
from tests.runtime.helpers import wait_for
from tests.surfaces.prometheus_server import ensure_prometheus, prometheus_server

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "deploy" / "prometheus" / "alerts.yml"
ALERT_TESTS = REPO / "deploy" / "prometheus" / "alerts_test.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "sluice-dashboard.json"
LINES = 3000


def _lines(count: int) -> str:
    return "".join(f"line {i:06d} {uuid.uuid5(uuid.NAMESPACE_OID, str(i)).hex}\n" for i in range(count))


def _metrics_port(log: Path) -> int:
    """The port the worker serves metrics on (the last start's, the log is appended to)."""
    found = re.findall(rb"metrics on http://[\d.]+:(\d+)/metrics", log.read_bytes())
    assert found, "the worker's ready line names no metrics address"
    return int(found[-1])


def _dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_alert_rules_are_valid_and_fire_as_their_unit_tests_say() -> None:
    _, promtool = ensure_prometheus()
    for args in (["check", "rules", str(ALERTS)], ["test", "rules", str(ALERT_TESTS)]):
        done = subprocess.run([promtool, *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"promtool {' '.join(args)}:\n{done.stdout}\n{done.stderr}"


def test_state_families_give_one_sample_per_connector_and_task_state() -> None:
    statuses = [
        ConnectorStatus(
            name="orders",
            config={},
            state=ConnectorState.RUNNING,
            tasks=[
                TaskStatus(0, TaskState.RUNNING, metrics=TaskMetrics(records_per_s=12.5, lag=40)),
                TaskStatus(1, TaskState.FAILED, error="boom"),
                TaskStatus(2, TaskState.RUNNING, metrics=TaskMetrics(lag=-1, lag_unit="bytes")),
            ],
        ),
        ConnectorStatus(name="audit", config={}, state=ConnectorState.PAUSED),
    ]
    samples = {
        (s.name, tuple(sorted(s.labels.items())), s.value)
        for family in state_families(statuses)
        for s in family.samples
    }
    assert samples == {
        ("sluice_connector_state", (("connector", "orders"), ("state", "RUNNING")), 1),
        ("sluice_connector_state", (("connector", "audit"), ("state", "PAUSED")), 1),
        ("sluice_task_status", (("connector", "orders"), ("state", "RUNNING"), ("task", "0")), 1),
        ("sluice_task_status", (("connector", "orders"), ("state", "FAILED"), ("task", "1")), 1),
        ("sluice_task_status", (("connector", "orders"), ("state", "RUNNING"), ("task", "2")), 1),
        ("sluice_task_records_per_second", (("connector", "orders"), ("task", "0")), 12.5),
        ("sluice_task_records_per_second", (("connector", "orders"), ("task", "2")), 0.0),
        ("sluice_task_reported_lag", (("connector", "orders"), ("task", "0"), ("unit", "records")), 40),
    }


async def test_prometheus_scrapes_a_pipeline_and_its_counters_equal_the_records_moved(
    tmp_path, start_worker, sluice, topic_name
) -> None:
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text(_lines(LINES))
    worker = start_worker()
    port = _metrics_port(worker.log)
    name = uuid.uuid4().hex[:8]
    source, sink = f"src-{name}", f"dst-{name}"
    prom_dir = tmp_path / "prometheus"
    prom_dir.mkdir()
    with prometheus_server([f"127.0.0.1:{port}"], prom_dir) as prom:
        common = {"poll.interval.ms": "200", "task.heartbeat.timeout.s": "5"}
        # 32 KiB source batches: the 3,000 lines (~140 KiB) take several batches a side.
        await sluice.create(source, {"connector.class": "file-source", "file": str(src), "topic": topic_name,
                                     "batch.max.bytes": str(32 * 1024), **common})  # fmt: skip
        await sluice.create(sink, {"connector.class": "file-sink", "file": str(dst), "topics": topic_name,
                                   "batch.max.records": "1000", **common})  # fmt: skip
        await wait_for(lambda: dst.exists() and dst.read_text() == src.read_text(), 180, "the sink file")

        def scraped(expr: str, want: float) -> bool:
            return prom.value(expr) == want

        sent = f'sum(sluice_source_records_total{{connector="{source}"}})'
        written = f'sum(sluice_sink_records_total{{connector="{sink}"}})'
        await wait_for(lambda: scraped(sent, LINES), 30, f"{sent} == {LINES}")
        await wait_for(lambda: scraped(written, LINES), 30, f"{written} == {LINES}")
        lag = f'sum(sluice_sink_lag_records{{connector="{sink}"}})'
        await wait_for(lambda: scraped(lag, 0), 30, f"{lag} == 0")

        for connector, histogram in ((source, "sluice_source_poll_batch_seconds"),
                                     (sink, "sluice_sink_put_batch_seconds")):  # fmt: skip
            commits_of = f'sluice_offset_commits_total{{connector="{connector}",outcome="%s"}}'
            commits = prom.value(f"sum({commits_of % 'success'})")
            batches = prom.value(f'sum({histogram}_count{{connector="{connector}"}})')
            assert commits is not None and commits >= 2, f"{connector}: {commits} commits scraped"
            assert batches == commits, f"{connector}: {batches} batch durations for {commits} commits"
            assert prom.value(f"sum({commits_of % 'failure'})") in (None, 0.0)
            assert prom.value(f'sum(sluice_record_errors_total{{connector="{connector}"}})') == 0
        # The Temporal SDK's worker series come through the same target.
        assert prom.value('sum(temporal_num_pollers{poller_type="activity_task"})') is not None

        # Every dashboard query runs (Prometheus parses it) and names only series that exist.
        names = prom.metric_names()
        for expr in _dashboard_exprs():
            prom.query(expr.replace("$connector", f"{source}|{sink}"))
            used = set(re.findall(r"\b((?:sluice|temporal|process)_[a-z_]+)", expr))
            scraped_by_rest = {"sluice_task_status"}  # the REST server's, not the worker's
            assert used - scraped_by_rest <= names, f"{expr}: {sorted(used - names)} never scraped"

    # The REST server's /metrics: the workflow's view of each task.
    app = create_app(RestSettings(), client=sluice)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sluice") as http:
        answer = await http.get("/metrics")
    assert answer.status_code == 200
    for connector in (source, sink):
        assert f'sluice_task_status{{connector="{connector}",state="RUNNING",task="0"}} 1.0' in answer.text
        assert f'sluice_connector_state{{connector="{connector}",state="RUNNING"}} 1.0' in answer.text
    await sluice.delete(source)
    await sluice.delete(sink)
