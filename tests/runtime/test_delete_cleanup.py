"""``connector delete`` cleans the broker: a sink's consumer group ``sluice-<name>`` and its
``%RETRY%`` topic go with its offsets, the topic the source wrote stays, ``keep offsets`` keeps the
group too, and a broker nobody can reach costs a warning, not the delete."""

from __future__ import annotations

import dataclasses
import logging
import socket
import time
import uuid
from pathlib import Path

import pytest

from sluice.activities.connector_activities import ConnectorActivities
from sluice.activities.context import RuntimeContext
from sluice.connectors.positions import PartitionKey
from sluice.connectors.rocketmq import SyncRocketMQClient
from sluice.connectors.rocketmq.client import retry_topic
from sluice.connectors.rocketmq.offsets import consumer_group
from sluice.deploy.local.config import StackConfig
from sluice.worker.settings import settings
from tests.runtime.helpers import wait_for

pytestmark = pytest.mark.timeout(600)


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def _sink(dst: Path, topic: str) -> dict[str, str]:
    return {
        "connector.class": "file-sink",
        "file": str(dst),
        "topics": topic,
        "poll.interval.ms": "200",
        "task.heartbeat.timeout.s": "5",
    }


def _on_broker(broker: SyncRocketMQClient, connector: str) -> tuple[bool, bool]:
    """Whether the connector's consumer group and its retry topic exist on the broker."""
    group = consumer_group(connector)
    return group in broker.groups(), broker.topic_exists(retry_topic(group))


async def test_delete_removes_the_sinks_group_and_retry_topic_unless_offsets_are_kept(
    tmp_path: Path, start_worker, sluice, topic_name: str, stack_config: StackConfig
) -> None:
    src, dst, kept_dst = tmp_path / "in.txt", tmp_path / "out.txt", tmp_path / "kept.txt"
    src.write_text("".join(f"line {i}\n" for i in range(200)))
    start_worker()
    name = uuid.uuid4().hex[:8]
    source, sink, kept = f"src-{name}", f"dst-{name}", f"kept-{name}"
    await sluice.create(
        source,
        {"connector.class": "file-source", "file": str(src), "topic": topic_name, "poll.interval.ms": "200"},
    )
    await sluice.create(sink, _sink(dst, topic_name))
    await sluice.create(kept, _sink(kept_dst, topic_name))
    await wait_for(lambda: _read(dst) == _read(src), 180, "the sink file to equal the source file")
    await wait_for(lambda: _read(kept_dst) == _read(src), 60, "the second sink file to equal the source")

    with SyncRocketMQClient(stack_config.namesrv_address) as broker:
        # The offsets are mirrored after the batch is written: wait for the mirror, then delete.
        await wait_for(lambda: _on_broker(broker, sink) == (True, True), 30, "the sink's group to appear")
        await wait_for(lambda: _on_broker(broker, kept) == (True, True), 30, "the kept group to appear")

        await sluice.delete(sink)
        assert _on_broker(broker, sink) == (False, False)
        assert retry_topic(consumer_group(sink)) not in broker.all_topics()
        assert broker.topic_exists(topic_name)  # what the source wrote is data, not the sink's

        await sluice.delete(kept, delete_offsets=False)
        assert _on_broker(broker, kept) == (True, True)  # the broker's copy of the kept offsets

        await sluice.delete(source)
        assert broker.topic_exists(topic_name)
        assert _on_broker(broker, source) == (False, False)
        broker.delete_group(consumer_group(kept))
        broker.delete_topic(retry_topic(consumer_group(kept)))


def test_an_unreachable_broker_leaves_a_warning_and_still_deletes_the_offsets(
    stack_config: StackConfig, fresh_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{sock.getsockname()[1]}"
    runtime = dataclasses.replace(
        settings().runtime, database_url=stack_config.database_url, store_schema=fresh_schema, namesrv=dead
    )
    ctx = RuntimeContext(runtime)
    try:
        acts = ConnectorActivities(ctx)
        ctx.store.set_positions("gone", {PartitionKey("broker-a:0", "T"): 7})
        t0 = time.monotonic()
        with caplog.at_level(logging.WARNING):
            acts.delete_offsets("gone")
        assert time.monotonic() - t0 < 60
        assert ctx.store.committed_positions("gone") == {}
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "gone" in r.getMessage()]
        assert len(warnings) == 1, caplog.text
        message = warnings[0].getMessage()
        assert "consumer group 'sluice-gone'" in message and "topic '%RETRY%sluice-gone'" in message
        assert warnings[0].exc_info is None  # a warning to read, not a traceback
    finally:
        ctx.close()
