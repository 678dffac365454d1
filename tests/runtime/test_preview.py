"""`sluice connector preview -f CONFIG`: a new source config's first batch, shown and not sent.

A Kafka Connect JDBC source file (Confluent's class, a rename transform, the JSON converter) against
a real MariaDB table: the messages shown are the table's rows as the converter writes them (content,
renamed field, Kafka's decimal bytes), at most ``--records``; afterwards no topic exists, no
position is stored, and an invalid config gets create's field errors."""

from __future__ import annotations

import base64
import json
import time
import uuid
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from sluice.connectors.rocketmq.errors import TopicNotFoundError
from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.deploy.local.config import StackConfig
from sluice.worker.cli import main
from tests.databases import TestDatabase


def _decimal(encoded: str, scale: int) -> Decimal:
    """Kafka's JsonConverter writes a decimal as the base64 of its unscaled two's-complement bytes."""
    return Decimal(int.from_bytes(base64.b64decode(encoded), "big", signed=True)).scaleb(-scale)


def test_preview_shows_the_first_batch_and_touches_nothing(
    mariadb_db: TestDatabase, stack_config: StackConfig, rocketmq_admin: SyncRocketMQClient,
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    source = create_engine(mariadb_db.url)
    with source.begin() as conn:
        conn.execute(text("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20), price DECIMAL(10,2))"))
        conn.execute(text("INSERT INTO items VALUES (1, 'tea', 3.50), (2, 'café', -0.25), (3, NULL, NULL)"))
    prefix, name = f"P{uuid.uuid4().hex[:8]}_", f"preview-{uuid.uuid4().hex[:6]}"
    config = tmp_path / "source.properties"
    config.write_text(
        f"name={name}\nconnector.class=io.confluent.connect.jdbc.JdbcSourceConnector\n"
        f"connection.url={mariadb_db.jdbc_url}\nconnection.user={mariadb_db.user}\n"
        f"connection.password={mariadb_db.password}\nmode=incrementing\nincrementing.column.name=id\n"
        f"table.whitelist=items\ntopic.prefix={prefix}\n"
        "value.converter=org.apache.kafka.connect.json.JsonConverter\nvalue.converter.schemas.enable=false\n"
        "transforms=r\ntransforms.r.type=org.apache.kafka.connect.transforms.ReplaceField$Value\n"
        "transforms.r.renames=name:title\n"
    )
    capsys.readouterr()
    assert main(["connector", "preview", "-f", str(config), "--records", "2", "-o", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["class"], shown["topic"]) == ("jdbc-source", f"{prefix}items")
    values = [json.loads(m["value"]) for m in shown["messages"]]
    assert [(v["id"], v["title"], _decimal(v["price"], 2)) for v in values] == [
        (1, "tea", Decimal("3.50")),
        (2, "café", Decimal("-0.25")),
    ]  # the first two rows, renamed as the transform renames them
    assert [json.loads(m["key"]) for m in shown["messages"]] == [{"id": 1}, {"id": 2}]

    # nothing sent, stored or created
    with pytest.raises(TopicNotFoundError):
        rocketmq_admin.queues(f"{prefix}items")
    store = create_engine(stack_config.database_url)
    with store.connect() as conn:
        schemas = conn.execute(text(
            "SELECT table_schema FROM information_schema.tables WHERE table_name = 'positions'"
        )).scalars().all()  # fmt: skip
        assert schemas, "the store's positions table"
        for schema in schemas:
            found = conn.execute(
                text(f'SELECT count(*) FROM "{schema}".positions WHERE connector = :n'), {"n": name}
            )
            assert found.scalar_one() == 0
    store.dispose()

    # an invalid config: create's own field errors, one line, exit 2
    assert main(["connector", "preview", "-f", str(config), "--set", "mode=sometimes"]) == 2
    error = capsys.readouterr().err
    assert "field 'mode'" in error and "Traceback" not in error
    assert main(["connector", "preview", "-f", str(config), "--set", "connector.class=com.example.Nope"]) == 2
    assert "unknown connector class 'com.example.Nope'; known: " in capsys.readouterr().err
    source.dispose()


def test_sink_preview_shows_records_ddl_and_writes_and_touches_nothing(
    postgres_db: TestDatabase, stack_config: StackConfig, rocketmq_admin: SyncRocketMQClient,
    topic_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from sluice.connectors.rocketmq.values import OutgoingMessage

    schema = {
        "type": "struct",
        "fields": [{"field": "id", "type": "int64"}, {"field": "name", "type": "string"}],
    }
    rows = [{"id": 1, "name": "tea"}, {"id": 2, "name": "café"}, {"id": 3, "name": "milk"}]
    [mq, *_] = rocketmq_admin.queues(topic_name)
    bodies = [json.dumps({"schema": schema, "payload": r}).encode() for r in rows]
    rocketmq_admin.send_batch(
        mq, [OutgoingMessage(b, keys=str(r["id"])) for b, r in zip(bodies, rows, strict=True)]
    )
    name = f"preview-sink-{uuid.uuid4().hex[:6]}"
    config = tmp_path / "sink.json"
    config.write_text(json.dumps({"name": name, "config": {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "connection.url": postgres_db.jdbc_url, "topics": topic_name, "table.name.format": "items",
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id", "auto.create": "true",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        "transforms": "r", "transforms.r.type": "ReplaceField$Value", "transforms.r.renames": "name:title",
    }}))  # fmt: skip
    for _ in range(100):  # the queue's end follows the send by a moment
        if rocketmq_admin.max_offset(mq) >= 3:
            break
        time.sleep(0.05)
    capsys.readouterr()
    assert main(["connector", "preview", "-f", str(config), "--records", "2", "-o", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [r["value"] for r in shown["records"]] == [{"id": 1, "title": "tea"}, {"id": 2, "title": "café"}]
    [write] = shown["writes"]
    assert (
        write["target"] == "public.items" and write["writes"] == "upsert 2 row(s) (id, title) keyed by (id)"
    )
    assert [ddl.split("(")[0].strip() for ddl in write["ddl"]] == [
        'CREATE TABLE IF NOT EXISTS "public"."items"'
    ]

    target = create_engine(postgres_db.url)
    with target.connect() as conn:  # nothing created
        assert conn.execute(text("SELECT to_regclass('public.items')")).scalar_one() is None
    target.dispose()
    # without auto.create the batch would fail, and the preview says so, naming the field
    assert main(["connector", "preview", "-f", str(config), "--set", "auto.create=false"]) == 2
    assert "auto.create" in capsys.readouterr().err
