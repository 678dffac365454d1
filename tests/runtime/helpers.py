"""Helpers of end-to-end tests: polling, task errors, connector settings, and a producer of Connect
envelopes as a JsonConverter with schemas writes them."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from tests.databases import TestDatabase

if TYPE_CHECKING:
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
    from sluice.worker.client import SluiceClient

#: A Connect struct schema's fields, as a JsonConverter envelope lists them.
Fields = Sequence[Mapping[str, object]]


async def wait_for(
    check: Callable[[], bool | Awaitable[bool]], timeout_s: float, what: str, interval_s: float = 0.5
) -> None:
    """Poll a (sync or async) condition; fail naming what did not happen. Each wait's length is
    printed, so a slow test shows where its time went."""
    import asyncio
    import inspect

    started = time.monotonic()
    deadline = started + timeout_s
    while time.monotonic() < deadline:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            print(f"waited {time.monotonic() - started:.1f}s for {what}")  # shown with -s or on failure
            return
        await asyncio.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")


async def failed_task_error(sluice: SluiceClient, connector: str, timeout_s: float, what: str) -> str:
    """Wait until the connector's first task is FAILED; its error."""
    from sluice.workflows.types import TaskState

    async def failed() -> bool:
        status = await sluice.status(connector)
        return bool(status.tasks) and status.tasks[0].state == TaskState.FAILED

    await wait_for(failed, timeout_s, what)
    return (await sluice.status(connector)).tasks[0].error


def replica_sink(target: TestDatabase, topics: str, **extra: str) -> dict[str, str]:
    """The CDC replica sink of docs/connectors.md (worker.demo.cdc.cdc_replica_sink) of topics
    ``<topics><table>`` into ``target``, with the tests' small batches."""
    from sluice.worker.demo.cdc import cdc_replica_sink

    connection = {"connection.url": target.jdbc_url, "connection.user": target.user,
                  "connection.password": target.password}  # fmt: skip
    small = {"batch.max.records": "500", "poll.interval.ms": "200"}
    return cdc_replica_sink(topics, connection, **{**small, **extra})


#: For fault tests' connectors: a task retries after 1 s, doubling up to 2 s instead of the default 30 s,
#: so it is back within seconds of the service; ``errors.retry.timeout`` stays -1 (never FAILED).
FAST_RETRY = {"errors.retry.delay.max.ms": "2000"}

#: For worker-kill tests' connectors: a SIGKILLed worker's task is noticed after 5 s, not 10.
FAST_HEARTBEAT = {"task.heartbeat.timeout.s": "5"}


def connect_envelope(fields: Fields, payload: Mapping[str, object]) -> str:
    """A key or value as Kafka's JsonConverter lays it out with schemas (compact, schema first)."""
    schema = {"type": "struct", "fields": list(fields), "optional": False, "name": "row"}
    return json.dumps({"schema": schema, "payload": payload}, separators=(",", ":"))


def send_keyed_rows(
    client: SyncRocketMQClient,
    topic: str,
    rows: Sequence[tuple[int, Mapping[str, object] | None]],
    key_fields: Fields,
    value_fields: Callable[[Mapping[str, object]], Fields],
) -> None:
    """Each ``(id, row)`` as a Connect envelope keyed by ``{"id": id}``, to queue ``id % 4``, in
    order (as a source sharding by key sends them); ``None`` is a tombstone. A row's value
    envelope lists ``value_fields(row)``."""
    from sluice.connectors.converters import TOMBSTONE_PROPERTY
    from sluice.connectors.rocketmq.values import MessageQueue, OutgoingMessage

    by_queue: dict[int, list[OutgoingMessage]] = {}
    for key, row in rows:
        keys = connect_envelope(key_fields, {"id": key})
        if row is None:
            message = OutgoingMessage(b"", keys=keys, properties={TOMBSTONE_PROPERTY: "true"})
        else:
            message = OutgoingMessage(connect_envelope(value_fields(row), row).encode(), keys=keys)
        by_queue.setdefault(key % 4, []).append(message)
    broker = client.queues(topic)[0].broker_name
    for queue_id, messages in sorted(by_queue.items()):
        client.send_batch(MessageQueue(topic, broker, queue_id), messages)
