"""`make demo-search`: the live MariaDB shop kept in sync with OpenSearch by change data capture,
searched, and proved equal.

1. creates the MariaDB database ``shop`` with its three tables *empty* (``sluice.worker.demo.shop``)
   and deletes the indices ``shop-customers``, ``shop-products`` and ``shop-orders`` (the demo owns
   them; the PostgreSQL side of the other demos is left alone);
2. starts a `sluice worker` process and creates its connectors through the Python client:
   ``mysql-cdc`` (`make demo-cdc`'s Debezium MySQL config, ``snapshot.mode=never``) and, per table,
   an ``opensearch-sink`` with the class name and keys of Confluent's Elasticsearch sink:
   ``ExtractNewRecordState`` (the new row state; a delete becomes a null value), the index named by
   ``topic.index.map``, ``write.method=upsert`` on the record key ``id`` and
   ``behavior.on.null.values=delete``; each index is created with a mapping from the rows' schema
   (one sink per table: ``search_sink``);
3. waits until capture is live (a probe customer, written until its document shows, then deleted),
   then loads the shop's rows: with ``snapshot.mode=never`` every row reaches the index through the
   binlog;
4. runs `make demo-cdc`'s load generator (inserts, updates *and deletes*) under the same live view,
   whose target side is read from the indices (``_count`` and the newest ``updated_at``);
5. stops the load, waits for catch-up, answers two full-text ``match`` queries from the indices
   (showing the hits), and compares every table with its index document by document by content
   (``compare_search``): prints the verdict and exits 1 unless every table is equal.

Why the proof reads documents by content and not counts: a count cannot tell an update that never
landed or a document a delete missed. Each document's ``_source`` is made canonical as the SQL
side's rows are (``sluice.worker.demo.table_equality``), with one normalisation OpenSearch imposes:
a ``date`` field holds milliseconds, so the sink writes instants at millisecond precision
(docs/opensearch.md) and the source's microsecond instants are compared truncated to milliseconds.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Final

import httpx
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

from sluice.deploy.local.config import StackConfig
from sluice.worker.client import SluiceClient
from sluice.worker.demo.cdc import (
    JSON_WITH_SCHEMAS,
    PROBE_ID,
    await_capture,
    debezium_mysql_source,
    shop_size,
)
from sluice.worker.demo.db import (
    PASSWORD_ENV,
    SHOP,
    DemoDatabases,
    create_connectors,
    demo_databases,
    demo_parser,
    print_verdict,
    run_on_stack,
    watch_load,
)
from sluice.worker.demo.file import started_worker
from sluice.worker.demo.live_view import LiveView, ProgressSampler
from sluice.worker.demo.shop import TABLES, LoadGenerator, ShopSize, connect_url, create_tables, load_shop
from sluice.worker.demo.table_equality import (
    Kind,
    Row,
    TableComparison,
    canonical,
    canonical_rows,
    column_kinds,
    compare_rows,
)

#: Record keys as Connect envelopes on both sides, as Kafka's JsonConverter writes them: the sink
#: gets the struct key ``{id}`` back typed, and a struct of one field is the document id.
JSON_KEYS: Final = {"key.converter": "org.apache.kafka.connect.json.JsonConverter"}
_PAGE: Final = 5_000  # documents per search_after page of the proof
_ABSENT: Final = "<no such field>"  # a column the document lacks: differs from null and every value


def topic_prefix(run_id: str) -> str:
    return f"search{run_id}"


def index_name(database: str, table: str) -> str:
    """The index of a table: ``shop-orders`` (OpenSearch index names are lower case)."""
    return f"{database}-{table}".lower()


def search_sink(url: str, topic: str, index: str, **extra: str) -> dict[str, str]:
    """Confluent's Elasticsearch sink config for one table's CDC topic: the new row state upserted
    as document ``id``, deletes from null values, into ``index`` (``topic.index.map``).

    One sink per table, each index written by its own task (one sink over ``topics.regex`` gives
    each index its own fields too: opensearch-sink narrows a batch's merged schema per topic)."""
    return {
        "connector.class": "io.confluent.connect.elasticsearch.ElasticsearchSinkConnector",
        "connection.url": url,
        "topics": topic,
        "topic.index.map": f"{topic}:{index}",
        "transforms": "unwrap",
        "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
        "transforms.unwrap.delete.handling.mode": "none",
        "key.ignore": "false",
        "schema.ignore": "false",
        "write.method": "upsert",
        "behavior.on.null.values": "delete",
        **JSON_KEYS,
        **JSON_WITH_SCHEMAS,
        **extra,
    }


def connector_configs(
    run_id: str, dbs: DemoDatabases, opensearch_url: str
) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """The source (`make demo-cdc`'s, keys as envelopes) and each table's OpenSearch sink; topics
    (``<prefix>_<db>_<table>``, Debezium's names with ``_``) named after the run, so no sink reads
    an earlier run's records."""
    prefix = topic_prefix(run_id)
    batch = {"batch.max.records": "20000", "poll.interval.ms": "500"}
    source = debezium_mysql_source(
        dbs.source, f"${{env:{PASSWORD_ENV}}}", prefix, TABLES, **batch, **JSON_KEYS
    )
    sinks = {
        table: search_sink(
            opensearch_url, f"{prefix}_{dbs.name}_{table}", index_name(dbs.name, table), **batch
        )
        for table in TABLES
    }
    return source, sinks


def recreate_source(dbs: DemoDatabases) -> None:
    """Drop and create the MariaDB database (only that server: the PostgreSQL ``shop`` of
    `make demo` stays as it was)."""
    engine = create_engine(dbs.mariadb_admin, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {dbs.name}"))
            conn.execute(text(f"CREATE DATABASE {dbs.name} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"))
    finally:
        engine.dispose()


def _millis(value: float | None) -> datetime | None:
    """An aggregation's epoch milliseconds as naive UTC, at the *end* of its millisecond: the
    index holds instants truncated to milliseconds, so a source row of that millisecond is
    reached (else the live view's lag would never reach 0)."""
    if value is None:
        return None
    start = datetime.fromtimestamp(value / 1000, UTC).replace(tzinfo=None)
    return start + timedelta(microseconds=999)


class ShopIndices:
    """The demo's indices on OpenSearch, read over its REST API."""

    def __init__(self, url: str, database: str) -> None:
        self.url, self.database = url, database
        self.http = httpx.Client(base_url=url, timeout=60)
        self._last: dict[str, tuple[int, datetime | None, int]] = {}  # target_side's latest readings

    def name(self, table: str) -> str:
        return index_name(self.database, table)

    def delete_all(self) -> None:
        for table in TABLES:
            answer = self.http.delete(f"/{self.name(table)}")
            if answer.status_code not in (200, 404):
                raise SystemExit(f"demo: OpenSearch at {self.url} did not delete index {self.name(table)}: "
                                 f"HTTP {answer.status_code} {answer.text[:200]}")  # fmt: skip

    def refresh(self) -> None:
        """Make every write searchable now (OpenSearch refreshes each second on its own)."""
        for table in TABLES:
            self.http.post(f"/{self.name(table)}/_refresh")

    def holds_probe(self) -> bool:
        try:
            return self.http.get(f"/{self.name('customers')}/_doc/{PROBE_ID}").status_code == 200
        except httpx.TransportError:
            return False

    def target_side(self, table: str, mark: datetime | None) -> tuple[int, datetime | None, int]:
        """The live view's ``TargetSide``: documents, newest ``updated_at`` and documents newer
        than ``mark``, in one search (nothing while the sink has not created the index)."""
        aggs: dict[str, Any] = {"newest": {"max": {"field": "updated_at"}}}
        if mark is not None:
            since = int(mark.replace(tzinfo=UTC).timestamp() * 1000)
            aggs["newer"] = {"filter": {"range": {"updated_at": {"gt": since, "format": "epoch_millis"}}}}
        search = {"size": 0, "track_total_hits": True, "aggs": aggs}
        try:
            answer = self.http.post(f"/{self.name(table)}/_search", json=search)
        except httpx.TransportError:
            answer = None
        if answer is not None and answer.status_code == 404:
            return 0, None, 0
        if answer is None or answer.status_code in (429, 503):
            # Busy, or a new index whose shard is not started yet: the last reading stands.
            return self._last.get(table, (0, None, 0))
        answer.raise_for_status()
        body = answer.json()
        rows = int(body["hits"]["total"]["value"])
        newer = int(body["aggregations"]["newer"]["doc_count"]) if mark is not None else rows
        self._last[table] = (rows, _millis(body["aggregations"]["newest"]["value"]), 0)
        return rows, self._last[table][1], newer

    def documents(self, table: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every document of ``table``'s index as ``(_id, _source)``, ordered by its ``id`` field
        (``search_after`` pages). Numbers are read as ``Decimal``: the text the sink wrote, exactly."""
        after: list[Any] | None = None
        while True:
            body: dict[str, Any] = {"size": _PAGE, "sort": [{"id": "asc"}], "query": {"match_all": {}}}
            if after is not None:
                body["search_after"] = after
            answer = self.http.post(f"/{self.name(table)}/_search", json=body)
            answer.raise_for_status()
            hits = json.loads(answer.content, parse_float=Decimal)["hits"]["hits"]
            if not hits:
                return
            for hit in hits:
                yield hit["_id"], hit["_source"]
            after = hits[-1]["sort"]

    def match(self, table: str, field: str, words: str, size: int = 5) -> tuple[int, list[dict[str, Any]]]:
        """A full-text ``match`` query: total hits and the best ``size`` hits (``_score``, ``_source``)."""
        query = {"query": {"match": {field: words}}, "size": size, "track_total_hits": True}
        answer = self.http.post(f"/{self.name(table)}/_search", json=query)
        answer.raise_for_status()
        found = answer.json()["hits"]
        return int(found["total"]["value"]), found["hits"]

    def close(self) -> None:
        self.http.close()


def document_value(value: Any, kind: Kind) -> str | None:
    """A ``_source`` value as the canonical text of a source column of ``kind``."""
    if value is None:
        return None
    if kind is Kind.INTEGER:
        return ("1" if value else "0") if isinstance(value, bool) else str(value)
    if kind is Kind.DECIMAL:
        return canonical(str(value), kind)
    if kind is Kind.INSTANT:  # "2024-02-29T23:59:59.123Z" (TIMESTAMP) or without Z (DATETIME)
        return canonical(str(value).removesuffix("Z"), kind)
    if kind is Kind.BINARY:
        return base64.b64decode(str(value)).hex()
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def to_millis(row: Row, kinds: Sequence[Kind]) -> Row:
    """A source row with its instants truncated to milliseconds: what an OpenSearch ``date`` holds."""
    return tuple(
        v[:23] + "000" if v is not None and k is Kind.INSTANT else v for v, k in zip(row, kinds, strict=True)
    )


def compare_search(source_db: Engine, indices: ShopIndices, table: str, key: str = "id") -> TableComparison:
    """``table`` against its index, row by row by content: every row one document with equal
    values, no other document; a document whose ``_id`` is not its ``id`` field, or with fields
    the table has not, makes the table not comparable."""
    kinds_by_column = column_kinds(source_db, table)
    columns, kinds = list(kinds_by_column), list(kinds_by_column.values())
    label = f"{table} (index {indices.name(table)})"
    if indices.http.head(f"/{indices.name(table)}").status_code == 404:
        return TableComparison(label, columns, problem="the index does not exist")
    known, problems = set(columns), list[str]()

    def documents() -> Iterator[Row]:
        for doc_id, source in indices.documents(table):
            extra = sorted(set(source) - known)
            if extra and len(problems) < 3:
                problems.append(f"document {doc_id} has fields the table has not: {', '.join(extra)}")
            row = tuple(
                document_value(source[c], k) if c in source else _ABSENT
                for c, k in zip(columns, kinds, strict=True)
            )
            if row[columns.index(key)] != doc_id and len(problems) < 3:
                problems.append(f"document _id {doc_id} holds {key}={row[columns.index(key)]}")
            yield row

    rows = (to_millis(r, kinds) for r in canonical_rows(source_db, table, columns, kinds, key))
    result = compare_rows(label, columns, key, rows, documents())
    result.problem = "; ".join(problems)
    return result


def _print_query(index: str, field: str, words: str) -> None:
    query = json.dumps({"query": {"match": {field: words}}}, ensure_ascii=False)
    print(f"\nsearch: GET {index}/_search {query}")


def show_searches(source_db: Engine, indices: ShopIndices) -> None:
    """Two full-text queries answered by the indices, with their best hits; the customers' one is
    checked against MariaDB (the same word in the names, case aside)."""
    words = "desk lamp"
    total, hits = indices.match("products", "title", words)
    _print_query(indices.name("products"), "title", words)
    print(f"  {total:,} products match; the best {len(hits)}:")
    for hit in hits:
        p = hit["_source"]
        print(f"  {hit['_score']:6.2f}  {p['title']:<28} {p['sku']}  price {p['price']}  stock {p['stock']}")
    word = "müller"
    total, hits = indices.match("customers", "name", word)
    with source_db.connect() as conn:
        named = conn.execute(
            text("SELECT COUNT(*) FROM customers WHERE LOWER(name) REGEXP :w"), {"w": rf"\b{word}\b"}
        ).scalar_one()
    same = "as many as" if total == named else "NOT as many as"
    _print_query(indices.name("customers"), "name", word)
    print(f"  {total:,} customers match, {same} MariaDB's names holding the word ({named:,}); "
          f"the best {len(hits)}:")  # fmt: skip
    for hit in hits:
        c = hit["_source"]
        print(f"  {hit['_score']:6.2f}  {c['name']:<24} {c['email'] or '(no email)'}  {c['country'] or '--'}")


async def run_demo(
    cfg: StackConfig, size: ShopSize, load_seconds: float, catch_up_s: float, database: str = SHOP
) -> bool:
    run_id = time.strftime("%Y%m%d%H%M%S")
    dbs = demo_databases(cfg, database)
    indices = ShopIndices(cfg.opensearch_url, database)
    print(f"creating MariaDB {dbs.source.render_as_string()}; indices "
          f"{', '.join(indices.name(t) for t in TABLES)} on {cfg.opensearch_url}")  # fmt: skip
    recreate_source(dbs)
    indices.delete_all()
    source_db = connect_url(dbs.source)
    create_tables(source_db)
    queue = f"sluice-demo-search-{run_id}"
    env = {"SLUICE_TASK_QUEUE": queue, PASSWORD_ENV: dbs.mariadb_password}
    # The client checks the source config (it connects to MariaDB) before the worker runs it.
    os.environ.setdefault(PASSWORD_ENV, dbs.mariadb_password)
    try:
        async with started_worker(cfg, f"demo-search-worker-{run_id}", env):
            client = await SluiceClient.connect(cfg.temporal_address, cfg.temporal_namespace, queue)
            source_config, sink_configs = connector_configs(run_id, dbs, cfg.opensearch_url)
            configs = [(f"shop-search-{t}-{run_id}", c) for t, c in sink_configs.items()]
            configs.append((f"shop-search-source-{run_id}", source_config))  # sinks first: subscribed
            names = [name for name, _ in configs]
            await create_connectors(client, cfg, configs)
            live = await await_capture(client, names, source_db, indices.holds_probe, catch_up_s)
            print(f"capture is live after {live:.1f} s; loading the shop (through the binlog)", flush=True)
            t0 = time.monotonic()
            counts = await asyncio.to_thread(load_shop, source_db, size)
            loaded = ", ".join(f"{n:,} {t}" for t, n in counts.items())
            print(f"loaded {loaded} in {time.monotonic() - t0:.1f} s", flush=True)
            load = LoadGenerator(
                source_db, size, orders_per_s=100, updates_per_s=200, deletes_per_s=30
            ).start()
            view = LiveView(ProgressSampler(source_db, indices.target_side, TABLES), target="OpenSearch")
            await watch_load(client, names, view, load, load_seconds, catch_up_s)
            try:
                await asyncio.to_thread(indices.refresh)
                await asyncio.to_thread(show_searches, source_db, indices)
                results = [await asyncio.to_thread(compare_search, source_db, indices, t) for t in TABLES]
            except httpx.HTTPError as exc:
                raise SystemExit(f"demo: OpenSearch at {cfg.opensearch_url} failed a query: {exc}") from None
            for name in names:
                await client.delete(name)
            kept = f"{dbs.source.render_as_string()}, {cfg.opensearch_url}/{indices.name('*')}"
            print(f"connectors deleted; the database and the indices are kept: {kept}")
    finally:
        source_db.dispose()
        indices.close()
    how = "decimals exact, instants in UTC to the millisecond: an OpenSearch date's precision"
    return print_verdict(results, f"its OpenSearch indices ({indices.name('*')})", how)


def main(argv: Sequence[str] | None = None) -> int:
    parser = demo_parser("python -m worker.demo.search", __doc__, 20_000, 30, 600)
    parser.add_argument("--database", default=SHOP, help="MariaDB database and index prefix (recreated)")
    args = parser.parse_args(argv)
    size = shop_size(args.orders)
    return run_on_stack(
        lambda cfg: run_demo(cfg, size, args.load_seconds, args.catch_up_seconds, args.database)
    )


if __name__ == "__main__":
    sys.exit(main())
