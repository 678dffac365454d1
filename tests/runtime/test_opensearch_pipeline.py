"""RocketMQ -> opensearch-sink -> the local stack's real OpenSearch, through the shared `sluice worker`.

Producers write Kafka's JsonConverter envelopes (and tombstones) straight into topics, as a CDC
pipeline's source would, keyed by id, each id to its own queue. Two pipelines run side by side:

* **upsert and delete**: Confluent's class name, ``write.method=upsert``,
  ``behavior.on.null.values=delete``, ids from the struct keys, the index named by a RegexRouter,
  its mapping created from the Connect schema. The index ends equal, document by document and by
  content, to the last version of every id that was not deleted.
* **a document OpenSearch refuses**: schemaless JSON text into an index whose mapping says
  ``code`` is an integer; one record's ``code`` is not a number. With ``errors.tolerance=all`` it
  goes to the dead-letter topic with OpenSearch's reason and every other document lands; without
  tolerance the task is FAILED naming the record's topic, queue and offset.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from sluice.connectors.rocketmq.client import MessageQueue
from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.connectors.rocketmq.values import OutgoingMessage
from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.rocketmq import CLUSTER_NAME
from sluice.workflows.types import TaskState
from tests.runtime.helpers import failed_task_error, send_keyed_rows, wait_for

FIELDS = [
    {"type": "int64", "optional": False, "field": "id"},
    {"type": "string", "optional": True, "field": "name"},
    {"type": "float64", "optional": True, "field": "price"},
]
FAST = {"poll.interval.ms": "200"}


def _send(client: SyncRocketMQClient, topic: str, rows: list[tuple[int, dict[str, object] | None]]) -> None:
    send_keyed_rows(client, topic, rows, FIELDS[:1], lambda row: FIELDS)


def _documents(os_url: str, index: str) -> dict[str, dict[str, Any]] | None:
    """Every document of ``index`` by id (None while the index does not exist)."""
    with httpx.Client(base_url=os_url, timeout=10) as http:
        if http.post(f"/{index}/_refresh").status_code == 404:
            return None
        found = http.post(f"/{index}/_search", json={"size": 10_000, "query": {"match_all": {}}}).json()
    return {hit["_id"]: hit["_source"] for hit in found["hits"]["hits"]}


@pytest.fixture
def indices(stack_config: StackConfig) -> Iterator[list[str]]:
    """Index names a test makes; deleted after it."""
    made: list[str] = []
    yield made
    with httpx.Client(base_url=stack_config.opensearch_url, timeout=10) as http:
        for index in made:
            http.delete(f"/{index}")


async def test_upserts_deletes_and_refused_documents_into_opensearch(
    start_worker, sluice, topic_name, rocketmq_admin, stack_config: StackConfig, indices: list[str]
) -> None:
    os_url = stack_config.opensearch_url
    name = uuid.uuid4().hex[:8]
    start_worker()

    # -- upsert and delete -----------------------------------------------------------------------
    index = f"shop-{name}"
    indices.append(index)
    first = [(i, {"id": i, "name": f"item {i}", "price": i + 0.25}) for i in range(40)]
    updates = [(i, {"id": i, "name": f"renamed {i} ✓", "price": None}) for i in range(10)]
    deletes: list[tuple[int, dict[str, object] | None]] = [(i, None) for i in (10, 11, 12)]
    _send(rocketmq_admin, topic_name, first)
    sink = f"os-{name}"
    await sluice.create(
        sink,
        {
            "connector.class": "io.confluent.connect.elasticsearch.ElasticsearchSinkConnector",
            "topics": topic_name,
            "connection.url": os_url,
            "write.method": "upsert",
            "behavior.on.null.values": "delete",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "transforms": "route",
            "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.route.regex": ".*",
            "transforms.route.replacement": index,
            **FAST,
        },
    )
    expected = {str(i): row for i, row in first}

    def index_holds(want: dict[str, Any], where: str = index):  # type: ignore[no-untyped-def]
        return lambda: _documents(os_url, where) == want

    await wait_for(index_holds(expected), 120, "the first version of every item in the index")
    _send(rocketmq_admin, topic_name, [*updates, *deletes])
    for i, row in updates:
        expected[str(i)] = row  # type: ignore[assignment]
    for i, _ in deletes:
        del expected[str(i)]
    try:
        await wait_for(index_holds(expected), 120, "the updates and deletes in the index")
    except AssertionError as exc:
        got = _documents(os_url, index) or {}
        wrong = {
            k: (expected.get(k), got.get(k))
            for k in set(expected) | set(got)
            if expected.get(k) != got.get(k)
        }
        raise AssertionError(f"{exc}: differences (want, got) {dict(list(wrong.items())[:5])}") from None
    with httpx.Client(base_url=os_url, timeout=10) as http:
        props = http.get(f"/{index}/_mapping").json()[index]["mappings"]["properties"]
    assert props["price"] == {"type": "double"} and props["id"] == {"type": "long"}, "mapping from the schema"
    assert props["name"]["type"] == "text"
    assert (await sluice.status(sink)).tasks[0].state == TaskState.RUNNING

    # -- a document OpenSearch refuses -----------------------------------------------------------
    tolerant_index, strict_index = f"codes-{name}", f"strict-{name}"
    indices.extend([tolerant_index, strict_index])
    with httpx.Client(base_url=os_url, timeout=10) as http:
        for target in (tolerant_index, strict_index):
            body = {"mappings": {"properties": {"code": {"type": "integer"}}}}
            assert http.put(f"/{target}", json=body).status_code == 200
    lines = [json.dumps({"n": i, "code": i * 10}) for i in range(8)]
    bad_at = 5
    lines[bad_at] = json.dumps({"n": bad_at, "code": "not a number"})
    broker = rocketmq_admin.queues(topic_name)[0].broker_name
    codes_topic = f"C{topic_name}"  # one queue: the records' offsets are the lines' numbers
    rocketmq_admin.create_topic(codes_topic, queue_count=1, cluster=CLUSTER_NAME)
    rocketmq_admin.send_batch(
        MessageQueue(codes_topic, broker, 0), [OutgoingMessage(line.encode()) for line in lines]
    )
    dlq = f"DLQ_{name}"
    common = {
        "connector.class": "opensearch-sink",
        "topics": codes_topic,
        "connection.url": os_url,
        "key.ignore": "true",
        "schema.ignore": "true",
        **FAST,
    }
    tolerant, strict = f"os-dlq-{name}", f"os-strict-{name}"
    await sluice.create(
        tolerant,
        {
            **common,
            "topic.index.map": f"{codes_topic}:{tolerant_index}",
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dlq,
        },
    )
    await sluice.create(strict, {**common, "topic.index.map": f"{codes_topic}:{strict_index}"})

    queue = f"{broker}:0"
    good = {f"{codes_topic}+{queue}+{i}": json.loads(line) for i, line in enumerate(lines) if i != bad_at}
    await wait_for(index_holds(good, tolerant_index), 120, "every document but the refused one")

    def letters() -> list[Any]:
        with SyncRocketMQClient(stack_config.namesrv_address) as client:
            if not client.topic_exists(dlq):
                return []
            return [m for mq in client.queues(dlq) for m in client.pull_range(mq, 0, client.max_offset(mq))]

    await wait_for(lambda: bool(letters()), 60, "the refused document in the dead-letter topic")
    # Dead letters are at least once (a batch re-run after a crash sends its letters again), so
    # every letter must be the refused record, and it must be there.
    for letter in letters():
        assert json.loads(letter.body) == {"n": bad_at, "code": "not a number"}
        assert letter.properties["sluice.origin.offset"] == str(bad_at)
        assert "mapper_parsing_exception" in letter.properties["sluice.error"], letter.properties
    assert (await sluice.status(tolerant)).tasks[0].state == TaskState.RUNNING

    error = await failed_task_error(sluice, strict, 120, "the strict sink to fail on the refused document")
    assert f"topic '{codes_topic}' queue '{queue}' offset {bad_at}" in error, error
    assert "mapper_parsing_exception" in error and f"connector {strict!r}" in error, error
    assert f"connector {strict} task" not in error, error  # named once, by the sink itself
    for connector in (sink, tolerant, strict):
        await sluice.delete(connector)
