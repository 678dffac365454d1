"""Records the converter cannot handle: they fail the sink task naming their position, or, with
``errors.tolerance=all``, go to a dead-letter topic while the good ones reach the sink."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from tests.runtime.helpers import wait_for
from workflows.types import TaskState

BAD_LINE = "{not json"


async def _json_pipeline(
    tmp_path: Path, start_worker, sluice, topic: str, bad_at: int, count: int, **sink_extra: str
) -> tuple[Path, str, str, list[dict[str, object]]]:
    """file (JSON lines, one bad) -> topic -> file sink with the JSON converter; returns
    (sink file, source name, sink name, the good records)."""
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.txt"
    records: list[dict[str, object]] = [{"id": i, "name": f"n{i}"} for i in range(count)]
    lines = [json.dumps(r) for r in records]
    src.write_text("\n".join([*lines[:bad_at], BAD_LINE, *lines[bad_at:]]) + "\n")
    start_worker()
    name = uuid.uuid4().hex[:8]
    source, sink = f"src-{name}", f"dst-{name}"
    await sluice.create(
        source,
        {"connector.class": "file-source", "file": str(src), "topic": topic, "poll.interval.ms": "200"},
    )
    await sluice.create(
        sink,
        {
            "connector.class": "file-sink",
            "file": str(dst),
            "topics": topic,
            "poll.interval.ms": "200",
            "value.converter": "json",
            "value.converter.schema": "id INT, name STRING",
            **sink_extra,
        },
    )
    return dst, source, sink, records


async def test_unparseable_json_fails_the_task_naming_topic_queue_and_offset(
    tmp_path: Path, start_worker, sluice, topic_name
) -> None:
    # The source shards by source partition: every line of the file lands in one queue, in order,
    # so the bad line's queue offset is its line number.
    dst, source, sink, _ = await _json_pipeline(tmp_path, start_worker, sluice, topic_name, bad_at=3, count=5)

    async def sink_failed() -> bool:
        status = await sluice.status(sink)
        return bool(status.tasks) and status.tasks[0].state == TaskState.FAILED

    await wait_for(sink_failed, 180, "the sink task to fail on the bad record")
    error = (await sluice.status(sink)).tasks[0].error
    assert f"connector {sink}" in error
    assert f"topic '{topic_name}'" in error and "offset 3" in error, error
    assert not dst.exists() or dst.read_text() == "", "nothing of the failed batch may be written"
    await sluice.delete(source)
    await sluice.delete(sink)


async def test_errors_tolerance_all_sends_the_bad_record_to_the_dead_letter_topic(
    tmp_path: Path, start_worker, sluice, topic_name, stack_config
) -> None:
    from connectors.rocketmq.sync_client import SyncRocketMQClient

    dlq = f"DLQ_{uuid.uuid4().hex[:8]}"
    dst, source, sink, records = await _json_pipeline(
        tmp_path, start_worker, sluice, topic_name, bad_at=2, count=6,
        **{"errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq},
    )  # fmt: skip

    def sink_rows() -> list[dict[str, object]]:
        return [json.loads(line) for line in dst.read_text().splitlines()] if dst.exists() else []

    await wait_for(lambda: sink_rows() == records, 180, "the good records in the sink, in order")
    with SyncRocketMQClient(stack_config.namesrv_address) as client:
        letters = [m for mq in client.queues(dlq) for m in client.pull_range(mq, 0, client.max_offset(mq))]
    assert [m.body for m in letters] == [BAD_LINE.encode()]
    props = letters[0].properties
    assert props["sluice.connector"] == sink and props["sluice.origin.topic"] == topic_name
    assert props["sluice.origin.offset"] == "2" and props["sluice.error"]
    assert (await sluice.status(sink)).tasks[0].state == TaskState.RUNNING
    await sluice.delete(source)
    await sluice.delete(sink)
