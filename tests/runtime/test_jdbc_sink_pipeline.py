"""file (JSON lines) -> RocketMQ -> jdbc-sink into MariaDB, through a real `sluice worker` process.

One worker runs two pipelines at once (a worker start costs a minute on two loaded cores):

* **upsert with dead-lettering**: JSON orders, several versions per id, into a table whose
  ``name VARCHAR(8)`` refuses one record; with ``errors.tolerance=all`` that record goes to the
  dead-letter topic with MariaDB's reason, and the table equals the last good version of every id.
* **topics.regex**: a sink reading ``<prefix>_.*`` picks up a topic created after it started.
* **no tolerance**: a line that is not JSON fails the sink task naming its topic and queue offset,
  and nothing at or after it reaches the table.
"""

from __future__ import annotations

import json
import uuid
from decimal import Decimal
from pathlib import Path

from sqlalchemy import create_engine, text

from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.workflows.types import TaskState
from tests.databases import table_rows
from tests.runtime.helpers import failed_task_error, wait_for

BAD_ID = 10_000
FAST = {"poll.interval.ms": "200"}


def _orders() -> tuple[list[str], dict[int, tuple[int, str, Decimal]], int]:
    """JSON lines (updates of earlier ids among them, one bad record); the expected table; the bad
    record's line number (its queue offset: a file's lines all land in one queue, in order)."""
    lines: list[str] = []
    expected: dict[int, tuple[int, str, Decimal]] = {}
    bad_at = -1
    for i in range(600):
        oid = i if i < 400 else i % 50  # the last 200 lines update ids 0..49
        if i == 300:
            bad_at = len(lines)
            lines.append(json.dumps({"id": BAD_ID, "name": "much-too-long-name", "amount": 1.0}))
        name, amount = f"o{i}", Decimal(i) / 4
        lines.append(json.dumps({"id": oid, "name": name, "amount": float(amount)}))  # exact: quarters
        expected[oid] = (oid, name, amount.quantize(Decimal("0.01")))
    return lines, expected, bad_at


async def test_upsert_dead_letters_and_topics_regex_into_mariadb(
    tmp_path: Path, start_worker, sluice, topic_name, stack_config, mariadb_db
) -> None:
    db = mariadb_db
    engine = create_engine(db.url)
    with engine.begin() as conn:
        conn.execute(
            text("CREATE TABLE orders (id BIGINT PRIMARY KEY, name VARCHAR(8), amount DECIMAL(10,2))")
        )
    lines, expected, bad_at = _orders()
    src = tmp_path / "orders.jsonl"
    src.write_text("\n".join(lines) + "\n")
    start_worker()
    name = uuid.uuid4().hex[:8]
    dlq = f"DLQ_{name}"
    connection = {
        "connection.url": db.jdbc_url,
        "connection.user": db.user,
        "connection.password": db.password,
        "poll.interval.ms": "200",
    }
    await sluice.create(
        f"src-{name}",
        {"connector.class": "file-source", "file": str(src), "topic": topic_name, "poll.interval.ms": "200"},
    )
    sink = f"jdbc-{name}"
    await sluice.create(
        sink,
        {
            "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
            "topics": topic_name,
            **connection,
            "table.name.format": "orders",
            "insert.mode": "upsert",
            "pk.mode": "record_value",
            "pk.fields": "id",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            # amount as DOUBLE (quarters are exact): main's JSON converter now reads a declared
            # DECIMAL as Kafka's base64 Decimal only, and a JSON number becomes null there.
            "value.converter.schema": "id BIGINT, name STRING, amount DOUBLE",
            "batch.max.records": "250",
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dlq,
        },
    )
    # No tolerance: the 4th line (queue offset 3) is not JSON.
    strict_topic, strict_sink = f"JS_{name}", f"jdbc-strict-{name}"
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE strict_orders (id BIGINT PRIMARY KEY, name VARCHAR(8))"))
    strict_lines = [json.dumps({"id": i, "name": f"s{i}"}) for i in range(6)]
    strict_lines[3] = "{not json"
    strict_src = tmp_path / "strict.jsonl"
    strict_src.write_text("\n".join(strict_lines) + "\n")
    await sluice.create(
        f"srcs-{name}",
        {"connector.class": "file-source", "file": str(strict_src), "topic": strict_topic, **FAST},
    )
    await sluice.create(
        strict_sink,
        {
            "connector.class": "jdbc-sink", "topics": strict_topic, **connection,
            "table.name.format": "strict_orders", "insert.mode": "upsert", "pk.mode": "record_value",
            "pk.fields": "id", "value.converter": "json", "value.converter.schema": "id BIGINT, name STRING",
        },
    )  # fmt: skip
    # topics.regex: one matching topic now, one created after the sink started.
    prefix = f"JR_{name}"
    first, later = tmp_path / "first.txt", tmp_path / "later.txt"
    first.write_text("".join(f"first {i}\n" for i in range(30)))
    later.write_text("".join(f"later {i}\n" for i in range(20)))
    await sluice.create(
        f"src1-{name}",
        {"connector.class": "file-source", "file": str(first), "topic": f"{prefix}_1", **FAST},
    )
    regex_sink = f"jdbc-re-{name}"
    await sluice.create(
        regex_sink,
        {
            "connector.class": "jdbc-sink",
            "topics.regex": f"{prefix}_.*",
            **connection,
            "table.name.format": "lines",
            "auto.create": "true",
        },
    )

    def lines_table() -> list[tuple[object, ...]]:
        with engine.connect() as conn:
            exists = conn.execute(
                text(
                    "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() "
                    "AND table_name = 'lines'"
                )
            ).scalar()
            if not exists:
                return []
            return sorted(tuple(r) for r in conn.execute(text("SELECT topic, value FROM `lines`")))

    firsts = [(f"{prefix}_1", f"first {i}") for i in range(30)]
    await wait_for(lambda: lines_table() == sorted(firsts), 300, "the first matching topic's lines")
    await sluice.create(
        f"src2-{name}",
        {"connector.class": "file-source", "file": str(later), "topic": f"{prefix}_2", **FAST},
    )
    laters = [(f"{prefix}_2", f"later {i}") for i in range(20)]
    await wait_for(
        lambda: lines_table() == sorted(firsts + laters), 300, "the lines of the topic created after start"
    )

    want = [expected[k] for k in sorted(expected)]
    try:
        await wait_for(
            lambda: table_rows(db.url, "orders") == want, 300, "the last good version of every order"
        )
    except AssertionError as exc:
        got = table_rows(db.url, "orders")
        wrong = [(w, g) for w, g in zip(want, got, strict=False) if w != g][:5]
        raise AssertionError(f"{exc}: {len(got)} rows of {len(want)}, first differences {wrong}") from None
    with SyncRocketMQClient(stack_config.namesrv_address) as client:
        letters = [m for mq in client.queues(dlq) for m in client.pull_range(mq, 0, client.max_offset(mq))]
    assert [json.loads(m.body)["id"] for m in letters] == [BAD_ID]
    props = letters[0].properties
    assert props["sluice.connector"] == sink and props["sluice.origin.topic"] == topic_name
    assert props["sluice.origin.offset"] == str(bad_at)
    assert "'name'" in props["sluice.error"] and "orders" in props["sluice.error"], props["sluice.error"]
    assert (await sluice.status(sink)).tasks[0].state == TaskState.RUNNING

    error = await failed_task_error(
        sluice, strict_sink, 180, "the strict sink to fail on the line that is not JSON"
    )
    assert f"connector {strict_sink}: bad record at topic '{strict_topic}'" in error, error
    assert "offset 3" in error, error
    written = table_rows(db.url, "strict_orders")
    before_bad = [(i, f"s{i}") for i in range(3)]
    assert written == before_bad[: len(written)], "nothing at or after the bad record is written"
    for connector in (f"src-{name}", sink, f"src1-{name}", f"src2-{name}", regex_sink, f"srcs-{name}",
                      strict_sink):  # fmt: skip
        await sluice.delete(connector)
    engine.dispose()
