"""Run inside the fresh venv that holds only the sluice wheel (tests/client/test_light_client.py).

What a service does with ``pip install sluice``: a file -> topic -> file pipeline with the async
client, watched to completion and driven through pause/resume/stop/delete; a bad config refused
per field; a literal secret refused without a sealing key; the sync wrapper. Argv: Temporal address,
task queue, topic, source file, sink file, a unique suffix. Prints ``light client OK`` at the end.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import sluice
from sluice import (
    Client,
    ConnectorConfig,
    ConnectorConfigError,
    ConnectorNotFoundError,
    ConnectorState,
    ConnectorStatus,
    SyncClient,
    TaskState,
)

ADDRESS, QUEUE, TOPIC, SRC, DST, SUFFIX = sys.argv[1:7]
POLL = {"poll.interval.ms": "200", "task.heartbeat.timeout.s": "5"}


async def wait_for_file(path: Path, expected: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text() == expected):
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not reach the source's content in {timeout:g}s")
        await asyncio.sleep(0.5)


async def pipeline() -> None:
    client = await Client.connect(ADDRESS, task_queue=QUEUE, answer_timeout=60)
    src, dst = f"src-{SUFFIX}", f"dst-{SUFFIX}"

    # A bad value: refused by the worker's validation, naming the field; nothing starts.
    bad = {"connector.class": "file-source", "file": SRC, "topic": TOPIC, "batch.max.bytes": "-3"}
    try:
        await client.create(f"bad-{SUFFIX}", bad)
    except ConnectorConfigError as exc:
        assert exc.fields == ["batch.max.bytes"], exc.errors
        assert "must be >= 1" in str(exc), exc
    else:
        raise AssertionError("a negative batch.max.bytes was accepted")
    assert f"bad-{SUFFIX}" not in await client.list()

    # No sealing key: a literal secret is refused by name instead of entering Temporal's history.
    keyless = Client(client.client, QUEUE, answer_timeout=60, require_sealing=True)
    try:
        await keyless.validate(f"secret-{SUFFIX}", {**bad, "api.token": "plain-text-token"})
    except ConnectorConfigError as exc:
        assert exc.fields == ["api.token"], exc.errors
    else:
        raise AssertionError("a literal secret was sent without a sealing key")

    # file -> topic -> file, the source as a typed ConnectorConfig, the sink as a flat dict.
    source = ConnectorConfig("file-source", {"file": SRC, "topic": TOPIC, **POLL}, tasks_max=1)
    created = await client.create(src, source)
    assert isinstance(created, ConnectorStatus) and created.name == src
    await client.create(dst, {"connector.class": "file-sink", "file": DST, "topics": TOPIC, **POLL})
    running = await client.wait_for(src, ConnectorState.RUNNING, timeout=120)
    assert running.kind == "source" and running.connector_class == "file-source", running
    await wait_for_file(Path(DST), Path(SRC).read_text(), 180)

    status = await client.status(dst)
    assert isinstance(status, sluice.ConnectorStatus) and status.state == ConnectorState.RUNNING
    assert status.kind == "sink" and [t.state for t in status.tasks] == [TaskState.RUNNING], status
    assert sorted([src, dst]) == sorted(n for n in await client.list() if n.endswith(SUFFIX))
    assert (await client.config(src))["topic"] == TOPIC

    assert (await client.pause(dst)).state == ConnectorState.PAUSED
    assert (await client.resume(dst)).state == ConnectorState.RUNNING
    assert (await client.stop(src)).state == ConnectorState.STOPPED
    await client.wait_for(src, ConnectorState.STOPPED)
    for name in (src, dst):
        await client.delete(name)
        try:
            await client.status(name)
        except ConnectorNotFoundError:
            pass
        else:
            raise AssertionError(f"{name} still answers after delete")


def sync_client() -> None:
    name = f"sync-{SUFFIX}"
    with SyncClient(ADDRESS, task_queue=QUEUE, answer_timeout=60) as client:
        try:
            client.create(name, {"connector.class": "file-source", "file": SRC})
        except ConnectorConfigError as exc:
            assert "topic" in exc.fields, exc.errors
        else:
            raise AssertionError("a file source without a topic was accepted")
        # A declared secret of the JDBC source (the worker names it): sealed before validation.
        result = client.validate(
            name,
            {
                "connector.class": "jdbc-source",
                "connection.url": "jdbc:postgresql://127.0.0.1:1/none",
                "connection.user": "u",
                "connection.password": f"hunter2-{SUFFIX}",
                "mode": "bulk",
                "table.whitelist": "t",
                "topic.prefix": "p",
            },
        )
        assert result.connector_class == "jdbc-source", result
        created = client.create(name, {"connector.class": "file-source", "file": SRC, "topic": TOPIC, **POLL})
        assert created.name == name
        assert client.wait_for(name, ConnectorState.RUNNING, timeout=120).kind == "source"
        assert client.stop(name).state == ConnectorState.STOPPED
        client.delete(name)
        assert name not in client.list()


asyncio.run(pipeline())
sync_client()
print("light client OK")
