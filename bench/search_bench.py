"""`make bench-search`: RocketMQ -> opensearch-sink -> OpenSearch end to end, against OpenSearch's
own bulk API alone writing the same documents.

Printed in one run against the local stack (a benchmark: nothing is asserted):
1. end to end, records/s: RECORDS Kafka JsonConverter envelopes (a struct of 7 fields, about 200
   bytes with its schema, keyed by a struct ``{id}`` envelope, each id to queue ``id % 4``) produced
   with Sluice's client into a fresh RocketMQ topic that an ``opensearch-sink`` (Confluent's
   class name, ``write.method=insert``, ids from the keys, index mapping from the schema, one task)
   in an in-process worker already reads. Timed from the first send until the index, refreshed,
   counts RECORDS documents (polled every 0.5 s); then every document is checked by content
   against what was produced. A first run of WARM_UP records (its own topic and index) warms the
   worker's Spark JVM and Python workers up, as a long-running worker is; its time is printed;
2. bulk alone, records/s: the same documents (the JSON the sink wrote, the same ids, the same index
   mapping, read back from the warm-up index) sent by one client to ``_bulk`` in requests of
   ``batch.size`` documents, one after the other (as the sink's task sends them), into a fresh index,
   timed from the first request to a ``_refresh`` after the last. The request bodies are built
   before the clock starts: the strongest baseline. Measured before and after the pipeline; the
   better of the two is kept (OpenSearch on a busy two-core machine varies from run to run).

Usage: ``python -m bench.search_bench [--records N] [--batch-size N]`` (default 50,000 and the
sink's default 2,000; ``make bench-search BENCH_ARGS='--records 20000'``). The last line is the
summary; every key names its unit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import httpx

from sluice.activities.context import RuntimeContext
from sluice.connectors.rocketmq.client import MessageQueue, OutgoingMessage
from sluice.deploy.local.rocketmq import CLUSTER_NAME
from sluice.worker.client import SluiceClient
from sluice.worker.main import build_worker, store_listener
from sluice.worker.settings import Settings, settings_or_exit
from sluice.worker.temporal_client import connect

QUEUES: Final = 4
SEND_BATCH: Final = 1_000  # messages per send_batch request
POLL_S: Final = 0.5
_EPOCH: Final = datetime(2024, 1, 1, tzinfo=UTC)
_FIELDS: Final = [
    {"type": "int64", "optional": False, "field": "id"},
    {"type": "string", "optional": False, "field": "sku"},
    {"type": "string", "optional": True, "field": "title"},
    {"type": "float64", "optional": False, "field": "price"},
    {"type": "int32", "optional": False, "field": "stock"},
    {"type": "boolean", "optional": False, "field": "active"},
    {"type": "int64", "optional": False, "field": "updated_at",
     "name": "org.apache.kafka.connect.data.Timestamp", "version": 1},
]  # fmt: skip
_WORDS: Final = ("kettle", "lamp", "chair", "bike", "tent", "mug", "desk", "pen", "scarf", "drone", "piano")


def _head(fields: list[dict[str, Any]], name: str) -> str:
    schema = {"type": "struct", "fields": fields, "optional": False, "name": name}
    return '{"schema":' + json.dumps(schema, separators=(",", ":")) + ',"payload":'


_VALUE_HEAD: Final = _head(_FIELDS, "bench.product")
_KEY_HEAD: Final = _head(_FIELDS[:1], "bench.key")


def record(i: int) -> tuple[dict[str, Any], int]:
    """Record ``i``'s payload, and its ``updated_at`` in epoch milliseconds."""
    millis = int(_EPOCH.timestamp() * 1000) + i * 1_337
    payload = {
        "id": i,
        "sku": f"SKU-{i:08d}",
        "title": f"{_WORDS[i % 11].title()} {_WORDS[i * 7 % 11]} #{i} — édition ✓",
        "price": round(1 + (i * 7919 % 250_000) / 100, 2),
        "stock": i * 31 % 500,
        "active": i % 3 != 0,
        "updated_at": millis,
    }
    return payload, millis


def document(i: int) -> dict[str, Any]:
    """What the index must hold for record ``i``: its fields, the timestamp as the sink writes a
    Connect Timestamp (ISO-8601 UTC with milliseconds)."""
    payload, millis = record(i)
    at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=millis)
    return {**payload, "updated_at": at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}Z"}


def messages(ids: range) -> dict[int, list[OutgoingMessage]]:
    """Each record as a JsonConverter envelope keyed by a ``{id}`` envelope, by queue ``id % 4``."""
    by_queue: dict[int, list[OutgoingMessage]] = {q: [] for q in range(QUEUES)}
    for i in ids:
        payload, _ = record(i)
        body = _VALUE_HEAD + json.dumps(payload, ensure_ascii=False, separators=(",", ":")) + "}"
        key = _KEY_HEAD + f'{{"id":{i}}}}}'
        by_queue[i % QUEUES].append(OutgoingMessage(body.encode(), keys=key))
    return by_queue


def produce(ctx: RuntimeContext, topic: str, by_queue: dict[int, list[OutgoingMessage]]) -> float:
    """Send every queue's messages in batches, the queues in turn; seconds it took."""
    client = ctx.rocketmq
    broker = client.queues(topic)[0].broker_name
    t0 = time.perf_counter()
    longest = max(len(m) for m in by_queue.values())
    for start in range(0, longest, SEND_BATCH):
        for q, batch in by_queue.items():
            if batch[start : start + SEND_BATCH]:
                client.send_batch(MessageQueue(topic, broker, q), batch[start : start + SEND_BATCH])
    return time.perf_counter() - t0


@dataclass(frozen=True)
class Timed:
    records: int
    seconds: float

    @property
    def per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else float("nan")


class Index:
    """One index over OpenSearch's REST API."""

    def __init__(self, http: httpx.Client, name: str) -> None:
        self.http, self.name = http, name

    def count(self, refresh: bool = True) -> int:
        if refresh and self.http.post(f"/{self.name}/_refresh").status_code == 404:
            return 0
        answer = self.http.get(f"/{self.name}/_count")
        return int(answer.json()["count"]) if answer.status_code == 200 else 0

    def mapping(self) -> dict[str, Any]:
        return dict(self.http.get(f"/{self.name}/_mapping").json()[self.name]["mappings"])

    def documents(self) -> Iterator[tuple[str, dict[str, Any]]]:
        after: list[Any] | None = None
        while True:
            body: dict[str, Any] = {"size": 5_000, "sort": [{"id": "asc"}], "query": {"match_all": {}}}
            if after is not None:
                body["search_after"] = after
            hits = self.http.post(f"/{self.name}/_search", json=body).json()["hits"]["hits"]
            if not hits:
                return
            yield from ((h["_id"], h["_source"]) for h in hits)
            after = hits[-1]["sort"]

    def delete(self) -> None:
        self.http.delete(f"/{self.name}")


def differences(index: Index, ids: range) -> list[str]:
    """Every document against the record it came from: the first few differences (none: equal)."""
    found: list[str] = []
    seen = 0
    for doc_id, source in index.documents():
        seen += 1
        i = int(doc_id)
        if i not in ids:
            found.append(f"document {doc_id} was never produced")
        elif source != document(i):
            found.append(f"document {doc_id}: {source} != {document(i)}")
        if len(found) >= 3:
            break
    if not found and seen != len(ids):
        found.append(f"{seen:,} documents for {len(ids):,} records")
    return found


def sink_config(url: str, topic: str, index: str, batch_size: int) -> dict[str, str]:
    return {
        "connector.class": "io.confluent.connect.elasticsearch.ElasticsearchSinkConnector",
        "connection.url": url,
        "topics": topic,
        "topic.index.map": f"{topic}:{index}",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "batch.size": str(batch_size),
        "batch.max.records": "20000",
        "poll.interval.ms": "100",
    }


@dataclass(frozen=True)
class E2E:
    """One pipeline run: its time, the producer's seconds, when the first document showed, the index."""

    timed: Timed
    produce_s: float
    first_doc_s: float
    index: Index


async def end_to_end(
    ctx: RuntimeContext, sluice: SluiceClient, http: httpx.Client, url: str, records: int, batch_size: int
) -> E2E:
    """One pipeline run of ``records`` records, from the first send until the index holds them all."""
    name = uuid.uuid4().hex[:8]
    topic, index = f"bench-search-{name}", Index(http, f"bench-search-{name}")
    ctx.rocketmq.create_topic(topic, queue_count=QUEUES, cluster=CLUSTER_NAME)
    by_queue = messages(range(records))
    connector = f"bench-search-{name}"
    await sluice.create(connector, sink_config(url, topic, index.name, batch_size))
    await asyncio.sleep(2)  # the task is up and polling the empty topic
    t0 = time.perf_counter()
    producing = asyncio.create_task(asyncio.to_thread(produce, ctx, topic, by_queue))
    deadline = time.monotonic() + max(600, records / 100)
    first_s = None
    while (held := await asyncio.to_thread(index.count)) < records:
        if held and first_s is None:
            first_s = time.perf_counter() - t0
        if time.monotonic() > deadline:
            status = await sluice.status(connector)
            errors = [t.last_error or t.error for t in status.tasks]
            raise SystemExit(f"bench search: the index holds {index.count():,} of {records:,} documents; "
                             f"sink {status.state}: {errors}")  # fmt: skip
        await asyncio.sleep(POLL_S)
    elapsed = time.perf_counter() - t0
    produce_s = await producing
    await sluice.delete(connector)
    return E2E(Timed(records, elapsed), produce_s, elapsed if first_s is None else first_s, index)


def bulk_alone(http: httpx.Client, mapping: dict[str, Any], records: int, batch_size: int) -> Timed:
    """The same documents through ``_bulk`` alone, ``batch_size`` per request, one request at a time."""
    index = Index(http, f"bench-bulk-{uuid.uuid4().hex[:8]}")
    assert http.put(f"/{index.name}", json={"mappings": mapping}).status_code == 200
    bodies = []
    for start in range(0, records, batch_size):
        lines = []
        for i in range(start, min(records, start + batch_size)):
            lines.append(json.dumps({"index": {"_index": index.name, "_id": str(i)}}))
            lines.append(json.dumps(document(i), ensure_ascii=False, separators=(",", ":")))
        bodies.append(("\n".join(lines) + "\n").encode())
    headers = {"Content-Type": "application/x-ndjson"}
    t0 = time.perf_counter()
    for body in bodies:
        answer = http.post("/_bulk", content=body, headers=headers)
        if answer.status_code != 200 or answer.json()["errors"]:
            raise SystemExit(
                f"bench search: bulk alone failed: HTTP {answer.status_code} {answer.text[:300]}"
            )
    http.post(f"/{index.name}/_refresh")
    elapsed = time.perf_counter() - t0
    held = index.count(refresh=False)
    index.delete()
    if held != records:
        raise SystemExit(f"bench search: bulk alone left {held:,} of {records:,} documents")
    return Timed(records, elapsed)


@dataclass(frozen=True)
class Results:
    e2e: E2E
    bulk: Timed
    warm_up: Timed
    verified: int


async def run(settings: Settings, ctx: RuntimeContext, records: int, batch_size: int) -> Results:
    url = settings.stack.opensearch_url
    client = await connect(settings.temporal_address, settings.temporal_namespace)
    warm = min(records, 10_000)
    pool = ThreadPoolExecutor(max_workers=settings.max_concurrent_tasks + 4)  # as `sluice worker` sizes it
    with httpx.Client(base_url=url, timeout=120) as http, pool, store_listener(ctx):
        async with build_worker(client, settings, ctx, pool):
            sluice = SluiceClient(client, settings.task_queue)
            warm_up = await end_to_end(ctx, sluice, http, url, warm, batch_size)
            print(f"warm-up: {warm:,} records end to end in {warm_up.timed.seconds:.1f} s", flush=True)
            mapping = warm_up.index.mapping()
            warm_up.index.delete()
            before = await asyncio.to_thread(bulk_alone, http, mapping, records, batch_size)
            print(f"bulk alone (before): {before.per_s:,.0f} records/s", flush=True)
            e2e = await end_to_end(ctx, sluice, http, url, records, batch_size)
            index = e2e.index
            print(f"end to end: {records:,} records in {e2e.timed.seconds:.1f} s, {e2e.timed.per_s:,.0f} "
                  f"records/s (producing took {e2e.produce_s:.1f} s; first document after "
                  f"{e2e.first_doc_s:.1f} s)", flush=True)  # fmt: skip
            wrong = await asyncio.to_thread(differences, index, range(records))
            if wrong:
                raise SystemExit(
                    "bench search: the index differs from what was produced:\n  " + "\n  ".join(wrong)
                )
            print(f"verified: all {records:,} documents equal by content to the records produced", flush=True)
            if index.mapping() != mapping:
                print(f"note: the index mappings differ: {index.mapping()} != {mapping}")
            index.delete()
            after = await asyncio.to_thread(bulk_alone, http, mapping, records, batch_size)
            print(f"bulk alone (after): {after.per_s:,.0f} records/s", flush=True)
    bulk = before if before.per_s >= after.per_s else after
    return Results(e2e, bulk, warm_up.timed, records)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.search_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000, help="records end to end (default 50,000)")
    parser.add_argument(
        "--batch-size", type=int, default=2_000, help="documents per bulk request, both sides (batch.size)"
    )
    args = parser.parse_args(argv)
    run_id = uuid.uuid4().hex[:8]
    settings = settings_or_exit().model_copy(
        update={"task_queue": f"bench-search-{run_id}", "store_schema": f"bench_{run_id}"}
    )
    ctx = RuntimeContext(settings.runtime)
    try:
        ctx.spark  # noqa: B018 - start Spark before timing anything
        r = asyncio.run(run(settings, ctx, args.records, args.batch_size))
    finally:
        ctx.close()
    doc_bytes = len(json.dumps(document(0), ensure_ascii=False, separators=(",", ":")).encode())
    e2e = r.e2e.timed
    ratio = e2e.per_s / r.bulk.per_s
    print(f"\n  {'path':<48} {'records/s':>10}")
    e2e_path = "RocketMQ -> opensearch-sink -> OpenSearch (e2e)"
    print(f"  {e2e_path:<48} {e2e.per_s:>10,.0f}   {ratio:.2f} of bulk alone")
    print(f"  {'_bulk alone, one client, same documents':<48} {r.bulk.per_s:>10,.0f}")
    print(
        f"bench search: e2e_records_per_s={e2e.per_s:.0f} bulk_alone_records_per_s={r.bulk.per_s:.0f} "
        f"e2e_vs_bulk_ratio={ratio:.3f} e2e_s={e2e.seconds:.1f} bulk_alone_s={r.bulk.seconds:.1f} "
        f"first_doc_s={r.e2e.first_doc_s:.1f} produce_msgs_per_s={e2e.records / r.e2e.produce_s:.0f} "
        f"records={e2e.records} batch_size_docs={args.batch_size} doc_bytes={doc_bytes} "
        f"verified_docs={r.verified} warm_up_records={r.warm_up.records} warm_up_s={r.warm_up.seconds:.1f}"
    )


if __name__ == "__main__":
    main()
