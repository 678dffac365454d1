"""OpenSearch stopped mid-stream: an opensearch-sink rides it out and the index ends exact.

While a sink moves JsonConverter envelopes into an index, the local stack's real OpenSearch node is
stopped with the project's own service handle (``deploy.local.stack.services``: SIGTERM, the node's
clean shutdown). Records keep coming while it is down — updates, tombstones, new ids — and status
must say what is wrong: the task retrying, its last error naming the OpenSearch service by its URL,
one line, no traceback, and never the password the connection URL carries. Started again, the
index must end exactly as produced: every id once with its last value, deleted ids gone (the
batches that failed are re-run with the same document ids).

The node is started again in a ``finally`` and waited for until healthy, so a failure here leaves
the stack as the next test expects it (tests of a session run one after the other).
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.stack import services
from sluice.workflows.types import TaskState
from tests.runtime.helpers import FAST_RETRY, wait_for
from tests.runtime.test_opensearch_pipeline import _documents, _send

Rows = list[tuple[int, dict[str, object] | None]]


def _rows(ids: range, label: str) -> Rows:
    return [(i, {"id": i, "name": f"{label} {i}", "price": i + 0.5}) for i in ids]


def _apply(expected: dict[str, Any], rows: Rows) -> None:
    """What the index must hold after ``rows``: each id's last value; a tombstone deletes it."""
    for i, row in rows:
        if row is None:
            expected.pop(str(i), None)
        else:
            expected[str(i)] = row


@pytest.mark.fault
@pytest.mark.timeout(300)
async def test_opensearch_stopped_mid_stream_status_names_it_and_the_index_ends_exact(
    start_worker,
    sluice,
    topic_name: str,
    rocketmq_admin: SyncRocketMQClient,
    stack_config: StackConfig,
    worker_logs,
) -> None:
    os_url = stack_config.opensearch_url
    secret = f"pw-{uuid.uuid4().hex}"
    name = uuid.uuid4().hex[:8]
    index, sink = f"faults-{name}", f"os-faults-{name}"
    # No security plugin on the local node: the user information is ignored there, but the sink
    # must still never show it.
    url_with_password = os_url.replace("://", f"://sluice:{secret}@", 1)
    node = services(stack_config)["opensearch"]
    start_worker()
    expected: dict[str, Any] = {}
    try:
        first = _rows(range(60), "first")
        _send(rocketmq_admin, topic_name, first)
        _apply(expected, first)
        await sluice.create(
            sink,
            {
                "connector.class": "io.confluent.connect.elasticsearch.ElasticsearchSinkConnector",
                "topics": topic_name,
                "connection.url": url_with_password,
                "topic.index.map": f"{topic_name}:{index}",
                "key.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "write.method": "upsert",
                "behavior.on.null.values": "delete",
                "max.retries": "2",
                "retry.backoff.ms": "100",
                "connection.timeout.ms": "1000",
                "poll.interval.ms": "200",
                **FAST_RETRY,
            },
        )
        await wait_for(lambda: _documents(os_url, index) == expected, 120, "the first records in the index")

        node.stop()
        try:
            while_down: Rows = [*_rows(range(20), "updated"), *[(i, None) for i in range(20, 25)]]
            while_down += _rows(range(60, 80), "new")
            _send(rocketmq_admin, topic_name, while_down)
            _apply(expected, while_down)

            async def retrying_naming_opensearch() -> bool:
                task = (await sluice.status(sink)).tasks[0]
                return task.retrying and f"OpenSearch at {os_url}" in task.last_error

            await wait_for(retrying_naming_opensearch, 60, "status to name the OpenSearch service")
            status = await sluice.status(sink)
            task = status.tasks[0]
            assert task.state == TaskState.RUNNING and task.error == "", task
            assert f"connector '{sink}'" in task.last_error, task.last_error
            assert "Traceback" not in task.last_error and "\n" not in task.last_error, task.last_error
            assert secret not in repr(status), "the password in connection.url shows in status"

            more: Rows = [*_rows(range(60, 70), "renewed"), *[(i, None) for i in range(5)]]
            _send(rocketmq_admin, topic_name, more)  # still down: the sink keeps failing on them
            _apply(expected, more)
        finally:
            node.start()  # waits until the node answers green or yellow

        def index_exact() -> bool:
            try:
                return _documents(os_url, index) == expected
            except httpx.HTTPError:  # the node may still be opening its shards
                return False

        try:
            await wait_for(index_exact, 120, "the index to end exactly as produced")
        except AssertionError as exc:
            got = _documents(os_url, index) or {}
            wrong = {k: (expected.get(k), got.get(k)) for k in set(expected) | set(got)
                     if expected.get(k) != got.get(k)}  # fmt: skip
            raise AssertionError(f"{exc}: (want, got) {dict(list(wrong.items())[:5])}") from None
        assert len(expected) == 70  # ids 0..79, of which 0..4 and 20..24 deleted while OpenSearch was down
        final = await sluice.status(sink)
        assert final.tasks[0].state == TaskState.RUNNING and final.tasks[0].error == ""
        assert secret not in worker_logs(), "the password in connection.url shows in the worker's log"
        await sluice.delete(sink)
    finally:
        if not node.healthy():
            node.start()
        with httpx.Client(base_url=os_url, timeout=30) as http:
            http.delete(f"/{index}")
