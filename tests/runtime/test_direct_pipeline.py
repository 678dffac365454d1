"""A direct pipeline (RocketMQ Connect's DirectTask form, connectors.direct): MariaDB -> jdbc-source
task -> jdbc-sink task into PostgreSQL with no topic between them, exact through a worker SIGKILL
and a PostgreSQL restart (the target and the offset store both): the target table ends equal to
the source by content, no row lost or doubled (``insert`` mode makes a doubled row a primary-key
error, which would fail the task).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.stack import restart_service
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase
from tests.runtime.helpers import FAST_HEARTBEAT, wait_for
from tests.runtime.test_jdbc_pipeline_faults import MARIADB_ORDERS, _insert, _rows, _sink, _source


def _direct(src: Db, target: TestDatabase, prefix: str) -> dict[str, Any]:
    """As a RocketMQ Connect user writes it: Confluent's task classes and each side's keys, prefixed
    (the fault test's own source and sink configs: its router, on the sink side, takes the topic
    prefix off, so the table is ``orders``)."""
    source = _source(src, prefix, "incrementing")
    sink = _sink(target, prefix, "insert")
    return {
        "connector.direct.enable": "true",
        "source.task.class": "io.confluent.connect.jdbc.source.JdbcSourceTask",
        "sink.task.class": "io.confluent.connect.jdbc.sink.JdbcSinkTask",
        **{f"source.{k}": v for k, v in source.items() if k != "connector.class"},
        **{f"sink.{k}": v for k, v in sink.items() if k != "connector.class"},
        **FAST_HEARTBEAT,
    }


@pytest.mark.fault
@pytest.mark.private_worker  # SIGKILLs its worker
@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_mariadb_to_postgres_direct_through_worker_kill_and_postgres_restart(
    start_worker, sluice, stack_config: StackConfig, mariadb_db: TestDatabase, postgres_db: TestDatabase
) -> None:
    src = Db.of(mariadb_db)
    src.run(MARIADB_ORDERS)
    _insert(src, range(1, 20001))
    name = f"direct-{uuid.uuid4().hex[:8]}"
    first = start_worker()
    await sluice.create(name, _direct(src, postgres_db, f"D{uuid.uuid4().hex[:6]}-"))
    await wait_for(lambda: len(_rows(postgres_db.url)) >= 400, 600, "the first batch in PostgreSQL")
    status = await sluice.status(name)
    assert status.kind == "source" and status.connector_class == "jdbc-source -> jdbc-sink"
    first.kill()  # SIGKILL mid-run: a batch in flight is abandoned half-way
    print(f"killed the worker with {len(_rows(postgres_db.url))} of 20,000 rows in PostgreSQL")
    start_worker()
    _insert(src, range(20001, 21001))
    await wait_for(lambda: len(_rows(postgres_db.url)) > 20000, 600, "rows after the kill")
    restart_service(stack_config, "postgres")  # the target and the offset store at once
    _insert(src, range(21001, 21501))

    await wait_for(
        lambda: _rows(postgres_db.url) == _rows(src.url),
        600,
        "the PostgreSQL table equal to the MariaDB table after the kill and the PostgreSQL restart",
    )
    assert len(_rows(postgres_db.url)) == 21500
    assert (await sluice.status(name)).state == "RUNNING"
    await sluice.delete(name)


async def test_file_to_file_direct_with_appended_lines(tmp_path, start_worker, sluice) -> None:
    """Kafka's FileStream task classes with no topic between them: the target file equals the
    source file, appended lines too, and the pipeline shows in status as any connector does."""
    from tests.runtime.test_file_pipeline import _lines, _read

    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text(_lines(0, 2000))
    start_worker()
    name = f"direct-{uuid.uuid4().hex[:8]}"
    config = {
        "connector.direct.enable": "true",
        "source.task.class": "org.apache.kafka.connect.file.FileStreamSourceTask",
        "sink.task.class": "org.apache.kafka.connect.file.FileStreamSinkTask",
        "source.file": str(src),
        "sink.file": str(dst),
        "topic": "lines",
        "batch.max.bytes": str(32 * 1024),
        "poll.interval.ms": "200",
    }
    await sluice.create(name, config)
    await wait_for(lambda: _read(dst) == _read(src), 120, "the target file equal to the source file")
    with src.open("a") as f:
        f.write(_lines(2000, 300))
    await wait_for(lambda: _read(dst) == _lines(0, 2300), 60, "appended lines to arrive")
    status = await sluice.status(name)
    assert (status.state, status.kind) == ("RUNNING", "source")
    assert status.connector_class == "file-source -> file-sink"
    await sluice.delete(name)


async def test_a_direct_pipeline_dead_letters_a_bad_line_and_writes_the_rest(
    tmp_path, start_worker, sluice, stack_config
) -> None:
    """Under ``errors.tolerance=all`` a line the file source cannot decode goes to the dead-letter
    topic, its exact bytes and where it was, and the lines around it reach the target file."""
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient

    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    good = [f"line {i}".encode() for i in range(6)]
    bad = b"bad \xff\xfe line"
    raw = b"".join(line + b"\n" for line in [*good[:3], bad, *good[3:]])
    src.write_bytes(raw)
    start_worker()
    name, dlq = f"direct-{uuid.uuid4().hex[:8]}", f"DLQ_{uuid.uuid4().hex[:8]}"
    config = {
        "connector.direct.enable": "true", "source.task.class": "file-source", "sink.task.class": "file-sink",
        "source.file": str(src), "sink.file": str(dst), "topic": "lines", "poll.interval.ms": "200",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
    }  # fmt: skip
    await sluice.create(name, config)
    expected = b"".join(line + b"\n" for line in good)
    await wait_for(lambda: dst.exists() and dst.read_bytes() == expected, 120, "the good lines in the target")
    with SyncRocketMQClient(stack_config.namesrv_address) as client:
        letters = [m for mq in client.queues(dlq) for m in client.pull_range(mq, 0, client.max_offset(mq))]
    assert [m.body for m in letters] == [bad]
    props = letters[0].properties
    assert props["sluice.origin.offset"] == str(raw.index(bad)) and props["sluice.connector"] == name
    assert props["sluice.error"].startswith("line is not utf-8") and "sluice.origin.topic" not in props
    assert (await sluice.status(name)).tasks[0].state == "RUNNING"
    await sluice.delete(name)
