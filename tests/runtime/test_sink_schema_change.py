"""A column added in the middle of a stream, read by a sink that decodes with the schemas it met.

After its first batch, a strict sink decodes each batch with the envelope schemas met before and no
job searching the batch for them (the sink's stages: connectors.sink_stages). Here producers write
Kafka's JsonConverter envelopes straight into a topic read by ``jdbc-sink`` (upsert into
PostgreSQL, ``auto.evolve``): first rows of one schema, then rows and updates of a schema with a
column added. The stages that meet the new schema say so with the batch's schemas, which the sink
learns before running the batch again (the worker says so), and the table ends equal, row by row,
to what was written.
"""

from __future__ import annotations

import uuid

from sqlalchemy.exc import ProgrammingError

from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from tests.databases import TestDatabase, table_rows
from tests.runtime.helpers import send_keyed_rows, wait_for

ID = {"type": "int64", "optional": False, "field": "id"}
NAME = {"type": "string", "optional": True, "field": "name"}
NOTE = {"type": "string", "optional": True, "field": "note"}


def _send(client: SyncRocketMQClient, topic: str, rows: list[dict[str, object]], note: bool) -> None:
    """``rows`` keyed by id, each id to its own queue (id % 4), in order."""
    fields = [ID, NAME, NOTE] if note else [ID, NAME]
    send_keyed_rows(client, topic, [(int(str(row["id"])), row) for row in rows], [ID], lambda row: fields)


async def test_a_column_added_mid_stream_lands_when_the_sink_decodes_with_the_schemas_met(
    start_worker, sluice, topic_name, rocketmq_admin, target_pg: TestDatabase, worker_logs
) -> None:
    start_worker()
    expected: dict[int, tuple[object, ...]] = {}
    first = [{"id": i, "name": f"a{i}"} for i in range(20)]
    _send(rocketmq_admin, topic_name, first, note=False)
    name = f"dst-{uuid.uuid4().hex[:8]}"
    await sluice.create(
        name,
        {
            "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
            "topics": topic_name,
            "connection.url": target_pg.jdbc_url,
            "connection.user": target_pg.user,
            "connection.password": target_pg.password,
            "table.name.format": "items",
            "insert.mode": "upsert",
            "pk.mode": "record_key",
            "pk.fields": "id",
            "auto.create": "true",
            "auto.evolve": "true",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "poll.interval.ms": "200",
        },
    )
    expected.update({r["id"]: (r["id"], r["name"]) for r in first})  # type: ignore[misc]

    def holds(rows: dict[int, tuple[object, ...]]):  # type: ignore[no-untyped-def]
        def check() -> bool:
            try:
                return table_rows(target_pg.url, "items") == [rows[k] for k in sorted(rows)]
            except ProgrammingError:  # the sink has not created the table yet
                return False

        return check

    await wait_for(holds(expected), 300, "the first rows in PostgreSQL")

    # Batches of the schema met: the sink's decode that assumes it.
    second = [{"id": i, "name": f"b{i}"} for i in range(20, 40)]
    _send(rocketmq_admin, topic_name, second, note=False)
    expected.update({r["id"]: (r["id"], r["name"]) for r in second})  # type: ignore[misc]
    await wait_for(holds(expected), 300, "the second rows in PostgreSQL")

    # A column added: new rows and updates of old ones carry it.
    third = [{"id": i, "name": f"c{i}", "note": f"n{i}"} for i in [*range(40, 60), *range(0, 10)]]
    _send(rocketmq_admin, topic_name, third, note=True)
    with_note = {k: (*v, None) for k, v in expected.items()}
    with_note.update({r["id"]: (r["id"], r["name"], r["note"]) for r in third})  # type: ignore[misc]
    await wait_for(holds(with_note), 300, "the rows with the added column in PostgreSQL")
    assert "carries an envelope schema not met before" in worker_logs()
    assert (await sluice.status(name)).state == "RUNNING"
