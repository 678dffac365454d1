"""`sluice connector ...` as a new user runs it: real CLI processes against the real Temporal server.

The worker is the one of tests/runtime/test_cli_exit_codes.py (real ConnectorWorkflow, real config
validation, real offset activities on a fresh store schema, stand-in tasks that heartbeat the real
``Progress`` details). Checked here: the tables people read, the JSON scripts parse, config files
in the formats Kafka Connect and RocketMQ Connect users keep, validate, offsets, and watch.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from sluice.connectors.secrets import REDACTED
from sluice.workflows.types import ConnectorState
from tests.runtime import test_cli_exit_codes as base
from tests.runtime.helpers import wait_for
from tests.runtime.test_cli_exit_codes import (
    DUMMY,
    CliEnv,
    _is_running,
    _name,
    assert_ok,
    assert_one_line_error,
    sluice,
)

cli = base.cli  # the fixture: a worker on a private task queue


async def test_create_from_kafka_properties_then_tables_and_json(cli: CliEnv, tmp_path: Path) -> None:
    name = _name("props")
    props = tmp_path / "connect-file-source.properties"
    props.write_text(
        f"# Kafka's standalone file, unchanged\nname={name}\nconnector.class=FileStreamSource\n"
        "tasks.max=1\nfile=/tmp/does-not-matter.txt\ntopic=cli-test\ndb.password=hunter2\n"
    )
    created = await sluice(cli, "connector", "create", "-f", str(props))
    assert_ok(created)
    assert name in created.stdout and "FileStreamSource" in created.stdout
    assert "hunter2" not in created.stdout and REDACTED in created.stdout
    await wait_for(lambda: _is_running(cli.sluice, name), 30, f"{name} RUNNING")

    table = await sluice(cli, "connector", "status", name)
    assert_ok(table)
    assert "RUNNING" in table.stdout and "task" in table.stdout and "topic" in table.stdout
    as_json = json.loads((await sluice(cli, "connector", "status", name, "--output", "json")).stdout)
    assert as_json["name"] == name and as_json["state"] == "RUNNING"
    assert [t["state"] for t in as_json["tasks"]] == ["RUNNING"]
    assert as_json["config"]["db.password"] == REDACTED and as_json["config"]["topic"] == "cli-test"

    listed = await sluice(cli, "connector", "list")
    assert_ok(listed)
    row = next(line for line in listed.stdout.splitlines() if name in line)
    assert "RUNNING" in row and "FileStreamSource" in row and "0:RUNNING" in row
    names = (await sluice(cli, "connector", "list", "-q")).stdout.split()
    assert name in names
    listed_json = json.loads((await sluice(cli, "connector", "list", "-o", "json")).stdout)
    assert {"name": name, "state": "RUNNING"}.items() <= next(
        c for c in listed_json if c["name"] == name
    ).items()

    config = json.loads((await sluice(cli, "connector", "config", name, "-o", "json")).stdout)
    assert config["file"] == "/tmp/does-not-matter.txt" and config["db.password"] == REDACTED
    config_table = (await sluice(cli, "connector", "config", name)).stdout
    assert "tasks.max" in config_table and "hunter2" not in config_table
    tasks = json.loads((await sluice(cli, "connector", "tasks", name, "-o", "json")).stdout)
    assert len(tasks) == 1 and tasks[0]["topic"] == "cli-test"

    assert_one_line_error(
        await sluice(cli, "connector", "create", "-f", str(props)), 4, name, "already exists"
    )
    assert_ok(await sluice(cli, "connector", "delete", name))


async def test_lifecycle_commands_answer_with_the_new_state(cli: CliEnv, tmp_path: Path) -> None:
    name = _name("life")
    body = tmp_path / "post.json"  # Kafka's POST /connectors body, PAUSED from the start
    body.write_text(
        json.dumps(
            {
                "name": name,
                "config": {"connector.class": "dummy-source", "topic": "cli-test", "tasks.max": 2},
                "initial_state": "PAUSED",
            }
        )
    )
    created = json.loads((await sluice(cli, "connector", "create", "-f", str(body), "-o", "json")).stdout)
    assert created["state"] == "PAUSED"
    state = {}
    for command in ("resume", "stop", "resume", "pause"):
        run = await sluice(cli, "connector", command, name, "-o", "json")
        assert_ok(run)
        state[command] = json.loads(run.stdout)["state"]
    assert state == {"resume": "RUNNING", "stop": "STOPPED", "pause": "PAUSED"}
    restarted = await sluice(cli, "connector", "restart", name, "--include-tasks", "-o", "json")
    assert_ok(restarted)
    assert json.loads(restarted.stdout)["state"] == "RUNNING"
    only_failed = await sluice(cli, "connector", "restart", name, "--only-failed")
    assert_ok(only_failed)
    assert "RUNNING" in only_failed.stdout

    merged = await sluice(
        cli, "connector", "reconfigure", name, "--merge", "--set", "tasks.max=1", "-o", "json"
    )
    assert_ok(merged)
    assert json.loads(merged.stdout)["config"] == {
        "connector.class": "dummy-source",
        "topic": "cli-test",
        "tasks.max": "1",
    }
    deleted = await sluice(cli, "connector", "delete", name, "-o", "json")
    assert json.loads(deleted.stdout) == {"name": name, "deleted": True, "offsets_kept": False}
    assert_one_line_error(await sluice(cli, "connector", "watch", name), 3, f"connector {name} not found")


async def test_validate_lists_field_errors_and_creates_nothing(cli: CliEnv, tmp_path: Path) -> None:
    name = _name("check")
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"name: {name}\nconfig:\n  connector.class: dummy-source\n  tasks.max: zero\n")
    run = await sluice(cli, "connector", "validate", str(bad))
    assert run.code == 2, str(run)
    assert "topic" in run.stdout and "tasks.max" in run.stdout  # one row per field
    assert run.stderr.count("\n") == 1 and name in run.stderr and "field error" in run.stderr
    as_json = json.loads((await sluice(cli, "connector", "validate", str(bad), "-o", "json")).stdout)
    assert as_json["error_count"] == len(as_json["errors"]) >= 2
    assert {"topic", "tasks.max"} <= {e["field"] for e in as_json["errors"]}
    assert_one_line_error(await sluice(cli, "connector", "status", name), 3, name)

    fixed = await sluice(cli, "connector", "validate", str(bad), "--set", "topic=t", "--set", "tasks.max=2")
    assert_ok(fixed)
    assert "configuration is valid (source dummy-source, 1 task(s))" in fixed.stdout
    assert_one_line_error(await sluice(cli, "connector", "status", name), 3, name)


async def test_offsets_get_alter_reset(cli: CliEnv, tmp_path: Path) -> None:
    name = _name("offs")
    assert_ok(await sluice(cli, "connector", "create", name, *DUMMY))
    await wait_for(lambda: _is_running(cli.sluice, name), 30, f"{name} RUNNING")
    kafka_body = tmp_path / "offsets.json"  # Kafka's PATCH /connectors/{name}/offsets body
    kafka_body.write_text(
        json.dumps({"offsets": [{"partition": {"partition": "p0"}, "offset": {"position": 42}}]})
    )
    refused = await sluice(cli, "connector", "offsets", "alter", name, "-f", str(kafka_body))
    assert_one_line_error(refused, 5, f"connector {name}")

    assert_ok(await sluice(cli, "connector", "stop", name))
    empty = await sluice(cli, "connector", "offsets", "get", name)
    assert_ok(empty)
    assert "no committed offsets" in empty.stdout
    altered = await sluice(cli, "connector", "offsets", "alter", name, "-f", str(kafka_body))
    assert_ok(altered)
    assert "p0" in altered.stdout and "42" in altered.stdout
    got = json.loads((await sluice(cli, "connector", "offsets", "get", name, "-o", "json")).stdout)
    assert [e["partition"] for e in got["offsets"]] == [{"partition": "p0"}]
    assert got["offsets"][0]["offset"]["position"]["key"] == [42]
    # What get printed is what alter takes back (--partition/--offset for one entry).
    one = await sluice(
        cli,
        "connector",
        "offsets",
        "alter",
        name,
        "--partition",
        '{"partition": "p1"}',
        "--offset",
        '{"position": 7}',
    )
    assert_ok(one)
    assert "p1" in one.stdout and "p0" in one.stdout
    reset = await sluice(cli, "connector", "offsets", "reset", name, "-o", "json")
    assert_ok(reset)
    assert json.loads(reset.stdout) == {"offsets": []}
    bad = await sluice(cli, "connector", "offsets", "alter", name, "--partition", "[1]", "--offset", "1")
    assert_one_line_error(bad, 2, "--partition takes a JSON object")
    assert_one_line_error(await sluice(cli, "connector", "offsets", "get", _name("ghost")), 3, "not found")
    assert_ok(await sluice(cli, "connector", "delete", name))


async def test_watch_refreshes_until_the_connector_stops(cli: CliEnv) -> None:
    name = _name("watched")
    assert_ok(await sluice(cli, "connector", "create", name, *DUMMY))
    await wait_for(lambda: _is_running(cli.sluice, name), 30, f"{name} RUNNING")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sluice.worker.cli", "connector", "watch", name, "--interval", "0.5",
        env=cli.env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    frames: list[str] = []
    current: list[str] = []

    async def read_frames(until: int) -> None:
        assert proc.stdout is not None
        while len(frames) < until:
            line = (await proc.stdout.readline()).decode()
            assert line, f"watch ended early: {frames}"
            if line.startswith(name) and current:
                frames.append("".join(current))
                current.clear()
            current.append(line)

    await asyncio.wait_for(read_frames(4), timeout=60)
    assert proc.returncode is None, "watch must keep refreshing while the connector runs"
    assert all("RUNNING" in f and "records/s" in f for f in frames)
    # The stand-in task's heartbeats reach the view: records counted, a rate computed.
    await asyncio.wait_for(read_frames(12), timeout=60)
    assert any(_records(f) > 0 for f in frames), frames[-1]

    assert (await cli.sluice.stop(name)).state == ConnectorState.STOPPED
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    assert err.decode() == ""
    assert "STOPPED" in "".join(current) + out.decode(), "the last frame shows the connector STOPPED"

    once = await sluice(cli, "connector", "watch", name, "--once", "-o", "json")
    assert_ok(once)
    assert json.loads(once.stdout)["status"]["state"] == "STOPPED"
    assert_ok(await sluice(cli, "connector", "delete", name))


def _records(frame: str) -> int:
    """The records column of task 0's row (the 4th cell), 0 when it shows '-'."""
    for line in frame.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) > 5 and cells[1] == "0":
            return int(cells[4].replace(",", "")) if cells[4] not in ("", "-") else 0
    return 0


async def test_plugins_lists_connectors_and_their_fields(cli: CliEnv) -> None:
    table = await sluice(cli, "plugins")
    assert_ok(table)
    row = next(line for line in table.stdout.splitlines() if "file-source" in line)
    assert "source" in row and "FileSourceConnector" in row
    assert "org.apache.kafka.connect.file.FileStreamSourceConnector" in table.stdout
    listed = json.loads((await sluice(cli, "plugins", "-o", "json")).stdout)
    assert {"name": "postgres-sink", "kind": "sink"}.items() <= next(
        p for p in listed if p["name"] == "postgres-sink"
    ).items()
    fields = json.loads((await sluice(cli, "plugins", "FileStreamSource", "-o", "json")).stdout)["fields"]
    by_name = {f["name"]: f for f in fields}
    assert "topic" in by_name and "tasks.max" in by_name
    assert_one_line_error(await sluice(cli, "plugins", "no-such-plugin"), 2, "no-such-plugin")
