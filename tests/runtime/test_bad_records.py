"""Records a converter or a source cannot handle: they fail the task naming their position (a
queue offset for a sink, a file byte offset for a file source), or, with ``errors.tolerance=all``,
go to a dead-letter topic (or are logged and skipped) while the good ones flow."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from sluice.workflows.types import TaskState
from tests.runtime.helpers import failed_task_error, wait_for

BAD_LINE = "{not json"


async def _file_pipeline(
    tmp_path: Path, start_worker, sluice, topic: str, lines: list[str], sink: dict[str, str]
) -> tuple[Path, str, str]:
    """file (``lines``) -> topic -> file sink with the ``sink`` settings; returns (sink file,
    source name, sink name)."""
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.txt"
    src.write_text("\n".join(lines) + "\n")
    start_worker()
    name = uuid.uuid4().hex[:8]
    source, sink_name = f"src-{name}", f"dst-{name}"
    await sluice.create(
        source,
        {"connector.class": "file-source", "file": str(src), "topic": topic, "poll.interval.ms": "200"},
    )
    await sluice.create(
        sink_name,
        {"connector.class": "file-sink", "file": str(dst), "topics": topic, "poll.interval.ms": "200",
         **sink},
    )  # fmt: skip
    return dst, source, sink_name


async def _json_pipeline(
    tmp_path: Path, start_worker, sluice, topic: str, bad_at: int, count: int, **sink_extra: str
) -> tuple[Path, str, str, list[dict[str, object]]]:
    """file (JSON lines, one bad) -> topic -> file sink with the JSON converter; returns
    (sink file, source name, sink name, the good records)."""
    records: list[dict[str, object]] = [{"id": i, "name": f"n{i}"} for i in range(count)]
    lines = [json.dumps(r) for r in records]
    converter = {"value.converter": "json", "value.converter.schema": "id INT, name STRING"}
    made = await _file_pipeline(
        tmp_path, start_worker, sluice, topic, [*lines[:bad_at], BAD_LINE, *lines[bad_at:]],
        {**converter, **sink_extra},
    )  # fmt: skip
    return (*made, records)


@pytest.mark.parametrize(
    ("pipeline", "why"),
    [("json", ()), ("envelope", ("not a Connect JSON envelope", "value.converter.schemas.enable=true"))],
    ids=["not-json", "no-envelope"],
)
async def test_an_undecodable_message_fails_the_sink_task_naming_topic_queue_and_offset(
    tmp_path: Path, start_worker, sluice, topic_name, pipeline: str, why: tuple[str, ...]
) -> None:
    """Not JSON for the json converter, or plain JSON where Kafka's JsonConverter (schemas on by
    default) expects an envelope: a bad record, never retried. The source shards by source
    partition, so every line lands in one queue, in order: the bad line's queue offset is 3."""
    if pipeline == "json":
        made = await _json_pipeline(tmp_path, start_worker, sluice, topic_name, bad_at=3, count=5)
    else:
        made = await _envelope_pipeline(tmp_path, start_worker, sluice, topic_name)
    dst, source, sink, _ = made

    error = await failed_task_error(sluice, sink, 180, "the sink task to fail on the bad record")
    assert f"connector {sink}" in error
    assert f"topic '{topic_name}'" in error and "offset 3" in error, error
    assert all(part in error for part in why), error
    assert not dst.exists() or dst.read_text() == "", "nothing of the failed batch may be written"
    await sluice.delete(source)
    await sluice.delete(sink)


async def test_errors_tolerance_all_sends_the_bad_record_to_the_dead_letter_topic(
    tmp_path: Path, start_worker, sluice, topic_name, stack_config
) -> None:
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient

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


async def test_a_chain_ending_in_spark_sql_runs_after_the_stages_and_bad_records_still_go_to_the_dlq(
    tmp_path: Path, start_worker, sluice, topic_name, stack_config
) -> None:
    """The sink's stages decode and run the chain's Arrow head (Cast), then the Spark SQL transform
    (by nature Spark's) runs over their records: the bad line is dead-lettered by the stages, and
    the SQL filter's and select's output is what the sink writes."""
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient

    dlq = f"DLQ_{uuid.uuid4().hex[:8]}"
    chain = {
        "transforms": "cast,sql",
        "transforms.cast.type": "org.apache.kafka.connect.transforms.Cast$Value",
        "transforms.cast.spec": "id:int64",
        "transforms.sql.type": "sql",
        "transforms.sql.statement": (
            "SELECT topic, partition, offset, key, named_struct('id', value.id * 10, 'name', "
            "upper(value.name)) AS value, headers, timestamp FROM records WHERE value.id % 2 = 0"
        ),
    }
    dst, source, sink, records = await _json_pipeline(
        tmp_path, start_worker, sluice, topic_name, bad_at=2, count=6,
        **{"errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq, **chain},
    )  # fmt: skip
    expected = [
        {"id": int(r["id"]) * 10, "name": str(r["name"]).upper()} for r in records if int(r["id"]) % 2 == 0
    ]

    def sink_rows() -> list[dict[str, object]]:
        return [json.loads(line) for line in dst.read_text().splitlines()] if dst.exists() else []

    await wait_for(lambda: sink_rows() == expected, 180, "the good even records, multiplied and upper-cased")
    with SyncRocketMQClient(stack_config.namesrv_address) as client:
        letters = [m for mq in client.queues(dlq) for m in client.pull_range(mq, 0, client.max_offset(mq))]
    assert [m.body for m in letters] == [BAD_LINE.encode()]
    assert letters[0].properties["sluice.origin.offset"] == "2"
    await sluice.delete(source)
    await sluice.delete(sink)


# --- sink side: a body the converter cannot decode, as Kafka's JsonConverter defaults it ----------

KAFKA_JSON = "org.apache.kafka.connect.json.JsonConverter"
PLAIN_LINE = '{"id": 3, "name": "n3"}'  # plain JSON where an envelope is expected


def _envelope(record: dict[str, object]) -> str:
    fields = [
        {"type": "int32", "optional": False, "field": "id"},
        {"type": "string", "optional": True, "field": "name"},
    ]
    schema = {"type": "struct", "fields": fields, "optional": False}
    return json.dumps({"schema": schema, "payload": record}, separators=(",", ":"))


async def _envelope_pipeline(tmp_path: Path, start_worker, sluice, topic: str, **sink_extra: str):
    """file (Connect envelopes, one plain JSON line at line 3) -> topic -> file sink whose
    converter is Kafka's JsonConverter with no schemas.enable line (so: envelopes expected)."""
    records: list[dict[str, object]] = [{"id": i, "name": f"n{i}"} for i in range(6)]
    lines = [_envelope(r) for r in records]
    made = await _file_pipeline(
        tmp_path, start_worker, sluice, topic, [*lines[:3], PLAIN_LINE, *lines[3:]],
        {"value.converter": KAFKA_JSON, **sink_extra},
    )  # fmt: skip
    return (*made, records)


async def test_with_tolerance_a_body_without_the_envelope_is_dead_lettered_and_the_rest_written(
    tmp_path: Path, start_worker, sluice, topic_name, stack_config
) -> None:
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient

    dlq = f"DLQ_{uuid.uuid4().hex[:8]}"
    dst, source, sink, records = await _envelope_pipeline(
        tmp_path, start_worker, sluice, topic_name,
        **{"errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq},
    )  # fmt: skip

    def sink_rows() -> list[dict[str, object]]:
        return [json.loads(line) for line in dst.read_text().splitlines()] if dst.exists() else []

    await wait_for(
        lambda: sink_rows() == records, 180, "every enveloped record's payload in the sink, in order"
    )
    with SyncRocketMQClient(stack_config.namesrv_address) as client:
        letters = [m for mq in client.queues(dlq) for m in client.pull_range(mq, 0, client.max_offset(mq))]
    assert [m.body for m in letters] == [PLAIN_LINE.encode()]
    assert letters[0].properties["sluice.origin.offset"] == "3"
    assert "value.converter.schemas.enable=true" in letters[0].properties["sluice.error"]
    assert (await sluice.status(sink)).tasks[0].state == TaskState.RUNNING
    await sluice.delete(source)
    await sluice.delete(sink)


async def test_envelopes_read_with_schemas_off_are_written_as_text_and_said_once(
    tmp_path: Path, start_worker, sluice, topic_name, worker_logs
) -> None:
    """An explicit schemas.enable=false works as before (the JSON text is written), and the sink
    says once, in status and log, that its messages carry envelopes."""
    dst, source, sink, records = await _envelope_pipeline(
        tmp_path, start_worker, sluice, topic_name, **{"value.converter.schemas.enable": "false"}
    )
    expected = [_envelope(r) for r in records[:3]] + [PLAIN_LINE] + [_envelope(r) for r in records[3:]]

    def sink_lines() -> list[str]:
        return dst.read_text().splitlines() if dst.exists() else []

    await wait_for(lambda: sink_lines() == expected, 180, "every message written as its JSON text")

    async def said() -> bool:
        status = await sluice.status(sink)
        return bool(status.tasks) and "value.converter.schemas.enable=false" in status.tasks[0].detail

    await wait_for(said, 60, "the sink's status to say its messages carry envelopes")
    detail = (await sluice.status(sink)).tasks[0].detail
    assert f"topic {topic_name!r} offset " in detail and "set value.converter.schemas.enable=true" in detail
    logs = worker_logs()
    assert logs.count("messages carry the Connect envelope") == 1
    assert (await sluice.status(sink)).tasks[0].state == TaskState.RUNNING
    await sluice.delete(source)
    await sluice.delete(sink)


# --- source side: lines a file source cannot decode, or the broker cannot take -------------------

BIG_LINE = b"B" * (6 * 1024 * 1024)  # over RocketMQ's 4 MiB maximum message size
NOT_UTF8 = b"caf\xe9 au lait"  # latin-1 text: not valid UTF-8


def _source_file(path: Path, bad: dict[int, bytes], count: int = 12) -> tuple[list[str], dict[int, bytes]]:
    """``count`` good lines with ``bad[i]`` inserted before good line ``i``; returns the good lines
    and the bad lines by the byte offset where each starts."""
    good = [f"line-{i:03d}" for i in range(count)]
    data, at = bytearray(), {}
    for i, line in enumerate(good):
        if i in bad:
            at[len(data)] = bad[i]
            data += bad[i] + b"\n"
        data += line.encode() + b"\n"
    path.write_bytes(bytes(data))
    return good, at


async def _task_state(sluice, name: str) -> tuple[TaskState | None, str]:
    status = await sluice.status(name)
    return (status.tasks[0].state, status.tasks[0].error) if status.tasks else (None, "")


@pytest.mark.parametrize(
    ("bad", "reason"),
    [(BIG_LINE, "over RocketMQ's maximum message size"), (NOT_UTF8, "line is not utf-8")],
    ids=["6MB-line", "not-utf8"],
)
async def test_a_bad_source_line_fails_the_task_naming_its_byte_offset(
    tmp_path: Path, start_worker, sluice, topic_name, bad: bytes, reason: str
) -> None:
    src = tmp_path / "in.txt"
    _, at = _source_file(src, {5: bad})
    (offset,) = at
    start_worker()
    name = f"src-{uuid.uuid4().hex[:8]}"
    await sluice.create(
        name,
        {"connector.class": "file-source", "file": str(src), "topic": topic_name, "poll.interval.ms": "200"},
    )

    async def failed() -> bool:
        return (await _task_state(sluice, name))[0] == TaskState.FAILED

    await wait_for(failed, 180, "the source task to fail on the bad line")
    error = (await _task_state(sluice, name))[1]
    assert f"connector {name}" in error, error
    assert f"partition '{src}' offset {offset}:" in error and reason in error, error
    assert len(error) < 4000
    await sluice.delete(name)


async def _tolerant_pipeline(tmp_path: Path, start_worker, sluice, topic: str, dlq: str):
    """file (good lines around a 6 MB line and a non-UTF-8 line) -> topic -> file sink, the source
    with errors.tolerance=all; returns (source name, good lines, bad lines by offset, sink file,
    source file)."""
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    good, at = _source_file(src, {3: BIG_LINE, 8: NOT_UTF8})
    start_worker()
    name = uuid.uuid4().hex[:8]
    source, sink = f"src-{name}", f"dst-{name}"
    await sluice.create(
        source,
        {
            "connector.class": "file-source", "file": str(src), "topic": topic, "poll.interval.ms": "200",
            "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
        },
    )  # fmt: skip
    await sluice.create(
        sink, {"connector.class": "file-sink", "file": str(dst), "topics": topic, "poll.interval.ms": "200"}
    )

    def sink_lines() -> list[str]:
        return dst.read_text().splitlines() if dst.exists() else []

    await wait_for(lambda: sink_lines() == good, 240, "every good line in the sink, in order")
    assert (await _task_state(sluice, source))[0] == TaskState.RUNNING
    await sluice.delete(sink)
    return source, at, src, good


async def test_with_tolerance_bad_source_lines_go_to_the_dead_letter_topic(
    tmp_path: Path, start_worker, sluice, topic_name, stack_config
) -> None:
    from sluice.connectors.dead_letter_messages import MAX_DEAD_LETTER_BODY
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient

    dlq = f"DLQ_{uuid.uuid4().hex[:8]}"
    source, at, src, _ = await _tolerant_pipeline(tmp_path, start_worker, sluice, topic_name, dlq)
    with SyncRocketMQClient(stack_config.namesrv_address) as client:
        letters = [m for mq in client.queues(dlq) for m in client.pull_range(mq, 0, client.max_offset(mq))]
    by_offset = {int(m.properties["sluice.origin.offset"]): m for m in letters}
    assert sorted(by_offset) == sorted(at) and len(letters) == 2, "exactly the bad lines"
    for offset, line in at.items():
        props = by_offset[offset].properties
        assert props["sluice.connector"] == source and props["sluice.origin.partition"] == str(src)
        assert props["sluice.original.size"] == str(len(line))
        assert "sluice.origin.topic" not in props  # a source record's topic is where it was going
        if line == BIG_LINE:
            assert props["sluice.truncated"] == "true"
            assert by_offset[offset].body == line[:MAX_DEAD_LETTER_BODY]
            assert "maximum message size of 4194304" in props["sluice.error"]
        else:
            assert props["sluice.truncated"] == "false" and by_offset[offset].body == line
            assert props["sluice.error"].startswith("line is not utf-8")

    # The dead-letter topic dumped with Sluice itself: a bytes file sink writes each letter as it is.
    dump = tmp_path / "dead-letters.bin"
    dumper = f"dump-{uuid.uuid4().hex[:8]}"
    await sluice.create(
        dumper,
        {"connector.class": "file-sink", "file": str(dump), "topics": dlq, "poll.interval.ms": "200",
         "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter"},
    )  # fmt: skip
    expected = b"".join(m.body + b"\n" for m in letters)  # in the dead-letter queue's order
    await wait_for(
        lambda: dump.exists() and dump.read_bytes() == expected, 180, "the dead letters dumped byte for byte"
    )
    assert NOT_UTF8 + b"\n" in dump.read_bytes()
    assert (await _task_state(sluice, dumper))[0] == TaskState.RUNNING
    await sluice.delete(dumper)
    await sluice.delete(source)


async def test_with_tolerance_and_no_dead_letter_topic_bad_source_lines_are_logged_and_skipped(
    tmp_path: Path, start_worker, sluice, topic_name, worker_logs
) -> None:
    source, at, _, _ = await _tolerant_pipeline(tmp_path, start_worker, sluice, topic_name, dlq="")
    logs = worker_logs()
    for offset in at:
        assert f"offset {offset}:" in logs, f"bad line at {offset} not logged"
    assert "bad record(s) tolerated, skipped" in logs
    await sluice.delete(source)
