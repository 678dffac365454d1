"""`make demo`: migrate a live MariaDB shop into PostgreSQL through RocketMQ, and prove the copy equal.

1. creates the MariaDB database ``shop`` (customers, products, ~300,000 orders: DECIMAL money,
   DATETIME/TIMESTAMP columns, NULLs, text beyond ASCII) and an empty PostgreSQL database ``shop``;
2. starts a `sluice worker` process and creates two connectors through the Python client:
   ``jdbc-source`` (mode ``timestamp+incrementing`` on ``updated_at``, ``id``: inserts *and* updates
   flow) into one RocketMQ topic per table, and ``jdbc-sink`` (upsert on ``id``, tables created
   from the records' schemas) into PostgreSQL — exactly once, data and positions in one transaction;
3. runs a load generator inserting and updating rows while the copy runs, with a live view of
   rows, changes/s and lag per table;
4. stops the load, waits until the target has caught up, and compares every table row by row by
   content with `sluice verify` (``SluiceClient.verify``, following the pipeline's configs): prints
   the verdict and exits 1 unless all tables are equal.

The connector configs are plain Kafka Connect JDBC files (Confluent class names and converter), as a
user migrating from Kafka Connect or RocketMQ Connect already has them; docs/connectors.md shows them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, Engine, make_url

from sluice.deploy.local.config import StackConfig
from sluice.worker.client import SluiceClient
from sluice.worker.demo.file import stack_is_healthy, started_worker
from sluice.worker.demo.live_view import LiveView, ProgressSampler, TableSample
from sluice.worker.demo.shop import TABLES, LoadGenerator, LoadStats, ShopSize, connect_url, create_shop
from sluice.worker.demo.table_equality import TableComparison
from sluice.worker.errors import ConnectorConfigError
from sluice.worker.settings import settings_or_exit
from sluice.workflows.types import ConnectorState, workflow_id_for

if TYPE_CHECKING:
    from sluice.worker.verify.model import VerifyReport

SHOP = "shop"
PASSWORD_ENV = "SHOP_MARIADB_PASSWORD"  # the source's password reaches the worker as ${env:...}


@dataclass(frozen=True)
class DemoDatabases:
    """Where the demo's source and target live; ``*_admin`` URLs reach the server, not ``shop``."""

    mariadb_admin: URL
    postgres_admin: URL
    mariadb_password: str
    name: str = SHOP  # the database's name on both servers

    @property
    def source(self) -> URL:
        return self.mariadb_admin.set(database=self.name)

    @property
    def target(self) -> URL:
        return self.postgres_admin.set(database=self.name)


def demo_databases(cfg: StackConfig, name: str = SHOP) -> DemoDatabases:
    """The local stack's MariaDB (user with all privileges) and PostgreSQL servers."""
    mariadb = make_url(cfg.mariadb_url())
    return DemoDatabases(mariadb.set(database=None), make_url(cfg.database_url), mariadb.password or "", name)


def connector_configs(run_id: str, dbs: DemoDatabases) -> tuple[dict[str, str], dict[str, str]]:
    """The source and sink configs (docs/connectors.md, "Database pipelines", shows one run's output
    verbatim).

    Topics are named after the run (``shop-<run>-orders``): a fresh sink on fresh topics, so
    messages of an earlier run never reach this run's target.
    """
    src, dst = dbs.source, dbs.target
    prefix = f"shop-{run_id}-"
    source = {
        "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
        "connection.url": f"jdbc:mariadb://{src.host}:{src.port}/{src.database}",
        "connection.user": src.username or "",
        "connection.password": f"${{env:{PASSWORD_ENV}}}",
        "mode": "timestamp+incrementing",
        "timestamp.column.name": "updated_at",
        "incrementing.column.name": "id",
        "table.whitelist": ",".join(TABLES),
        "timestamp.delay.interval.ms": "1000",
        "topic.prefix": prefix,
        "tasks.max": "3",
        "batch.max.rows": "50000",
        "poll.interval.ms": "500",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
    }
    sink = {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "connection.url": f"jdbc:postgresql://{dst.host}:{dst.port}/{dst.database}?user={dst.username}",
        "topics.regex": f"{prefix}.*",
        "insert.mode": "upsert",
        "pk.mode": "record_value",
        "pk.fields": "id",
        "auto.create": "true",
        "auto.evolve": "true",
        "table.name.format": "${topic}",
        "transforms": "route",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": f"{prefix}(.*)",
        "transforms.route.replacement": "$1",
        "tasks.max": "2",
        "batch.max.records": "50000",
        "poll.interval.ms": "500",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
    }
    return source, sink


def _on_servers(dbs: DemoDatabases, mariadb_sql: str, postgres_sql: str) -> None:
    for url, sql in ((dbs.mariadb_admin, mariadb_sql), (dbs.postgres_admin, postgres_sql)):
        engine = create_engine(url, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(text(sql))
        engine.dispose()


def recreate_databases(dbs: DemoDatabases) -> None:
    """Drop and create ``shop`` on both servers (the demo owns these two databases)."""
    drop_databases(dbs)
    _on_servers(
        dbs,
        f"CREATE DATABASE {dbs.name} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
        f"CREATE DATABASE {dbs.name}",
    )


def drop_databases(dbs: DemoDatabases) -> None:
    """Drop the demo's database on both servers (tests run the demos under their own names)."""
    _on_servers(
        dbs, f"DROP DATABASE IF EXISTS {dbs.name}", f"DROP DATABASE IF EXISTS {dbs.name} WITH (FORCE)"
    )


def caught_up(samples: Sequence[TableSample]) -> bool:
    return bool(samples) and all(s.lag_rows == 0 and s.source_rows == s.target_rows for s in samples)


def print_verdict(
    results: Sequence[TableComparison],
    target: str = "PostgreSQL shop",
    how: str = "decimals exact, instants in UTC",
) -> bool:
    """Each table's comparison, then one ``VERDICT`` line naming the target; True if all are equal."""
    print(f"\nproof: every table compared row by row by content ({how})")
    for r in results:
        print(f"  {r.summary()}")
        for example in r.examples:
            print(f"      {example}")
    equal = all(r.equal for r in results)
    rows = sum(r.source_rows for r in results)
    verdict = "EQUAL" if equal else "NOT EQUAL"
    print(f"\nVERDICT: MariaDB shop and {target} are {verdict} ({len(results)} tables, {rows:,} rows)")
    return equal


def print_proof(report: VerifyReport, target: str = "PostgreSQL shop") -> bool:
    """`sluice verify`'s table for the pipeline, then one ``VERDICT`` line; True if all are equal."""
    from sluice.worker import cli_render as render

    print("\nproof: sluice verify SOURCE SINK (checksums of key ranges in both databases, bisected to rows)")
    render.console().print(render.verify_table(report))
    rows = sum(t.rows_compared for t in report.tables)
    verdict = "EQUAL" if report.equal else "NOT EQUAL"
    print(f"\nVERDICT: MariaDB shop and {target} are {verdict} ({len(report.tables)} tables, {rows:,} rows)")
    return report.equal


async def failed_tasks(client: SluiceClient, names: Sequence[str]) -> list[str]:
    failed = []
    for name in names:
        status = await client.status(name)
        if status.state == ConnectorState.FAILED or status.error:
            failed.append(f"{name}: {status.error or status.state}")
        failed += [f"{name} task {t.task_id}: {t.error}" for t in status.tasks if t.error]
    return failed


async def watch(
    client: SluiceClient,
    names: Sequence[str],
    view: LiveView,
    load: LoadGenerator | None,
    phase: str,
    until: float,
    stop_when_caught_up: bool,
) -> list[TableSample]:
    """Refresh the view once a second until ``until`` (or catch-up, three samples in a row)."""
    streak, next_status = 0, 0.0
    samples: list[TableSample] = []
    while time.monotonic() < until:
        samples = await asyncio.to_thread(view.refresh, load.stats if load else None, phase)
        streak = streak + 1 if caught_up(samples) else 0
        if stop_when_caught_up and streak >= 3:
            return samples
        if time.monotonic() >= next_status:
            next_status = time.monotonic() + 5
            failed = await failed_tasks(client, names)
            if failed:
                raise SystemExit("demo: a connector failed:\n  " + "\n  ".join(failed))
        await asyncio.sleep(1)
    if stop_when_caught_up:
        behind = ", ".join(f"{s.table} {s.lag_rows:,} rows behind" for s in samples)
        raise SystemExit(
            f"demo: the target did not catch up in time ({behind})\n" + await _describe(client, names)
        )
    return samples


async def _describe(client: SluiceClient, names: Sequence[str]) -> str:
    """Each connector's tasks as status shows them (state, what they wait for, their last error)."""
    lines = []
    for name in names:
        status = await client.status(name)
        lines.append(f"  {name}: {status.state}")
        for t in status.tasks:
            extra = "; ".join(x for x in (t.detail, t.last_error and f"last error: {t.last_error}") if x)
            lines.append(
                f"    task {t.task_id}: {t.state} (attempt {t.attempt}){' — ' + extra if extra else ''}"
            )
    return "\n".join(lines)


async def create_connectors(
    client: SluiceClient, cfg: StackConfig, configs: Sequence[tuple[str, dict[str, str]]]
) -> None:
    """Create the connectors in order (the sink first: it must be subscribed before records come),
    printing each config and where to watch it in Temporal's UI."""
    for name, config in configs:
        print(f"{name} config:", json.dumps(config, indent=2), sep="\n", flush=True)
    for name, config in configs:
        await client.create(name, config)
        path = f"namespaces/{cfg.temporal_namespace}/workflows/{quote(workflow_id_for(name))}"
        print(f"connector {name}: {cfg.temporal_ui_url}/{path}", flush=True)


async def watch_load(
    client: SluiceClient,
    names: Sequence[str],
    view: LiveView,
    load: LoadGenerator,
    load_seconds: float,
    catch_up_s: float,
) -> LoadStats:
    """The live view while ``load`` runs for ``load_seconds``, then until the target caught up
    (`make demo`, `make demo-cdc` and `make demo-search` alike); prints what the load did."""
    try:
        with view:
            phase = f"copying while the load runs ({load_seconds:.0f} s)"
            await watch(client, names, view, load, phase, time.monotonic() + load_seconds, False)
            stats = load.stop()
            await watch(client, names, view, None, "load stopped, catching up",
                        time.monotonic() + catch_up_s, True)  # fmt: skip
    finally:
        load.stop()
    deletes = f", {stats.deletes:,} deletes" if stats.deletes else ""
    print(f"load generator: {stats.inserts:,} inserts, {stats.updates:,} updates{deletes} while copying")
    if stats.errors:
        print(f"load generator errors: {len(stats.errors)}, first: {stats.errors[0]}")
    return stats


async def watch_and_prove(
    client: SluiceClient,
    names: Sequence[str],
    engines: tuple[Engine, Engine],
    load: LoadGenerator,
    load_seconds: float,
    catch_up_s: float,
) -> bool:
    """The demo's second half, shared by `make demo` and `make demo-cdc`: the live view while
    ``load`` runs for ``load_seconds``, then until the target caught up, then the proof."""
    source_db, target_db = engines
    view = LiveView(ProgressSampler(source_db, target_db, TABLES))
    await watch_load(client, names, view, load, load_seconds, catch_up_s)
    from sluice.worker.verify.model import VerifyError

    sink, source = names
    try:
        report = await client.verify(source, sink)
    except VerifyError as exc:
        raise SystemExit(f"demo: sluice verify could not compare the copy: {exc}") from None
    return print_proof(report)


async def run_demo(
    cfg: StackConfig, size: ShopSize, load_seconds: float, catch_up_s: float, database: str = SHOP
) -> bool:
    run_id = time.strftime("%Y%m%d%H%M%S")
    dbs = demo_databases(cfg, database)
    print(f"creating MariaDB {dbs.source.render_as_string()} and PostgreSQL {dbs.target.render_as_string()}")
    recreate_databases(dbs)
    source_db: Engine = connect_url(dbs.source)
    target_db: Engine = connect_url(dbs.target)
    t0 = time.monotonic()
    counts = create_shop(source_db, size)
    print(f"loaded {', '.join(f'{n:,} {t}' for t, n in counts.items())} in {time.monotonic() - t0:.1f} s")
    queue = f"sluice-demo-db-{run_id}"
    env = {"SLUICE_TASK_QUEUE": queue, PASSWORD_ENV: dbs.mariadb_password}
    # the proof (sluice verify) resolves the source's ${env:...} password here, as the worker does
    os.environ.setdefault(PASSWORD_ENV, dbs.mariadb_password)
    async with started_worker(cfg, f"demo-db-worker-{run_id}", env):
        client = await SluiceClient.connect(cfg.temporal_address, cfg.temporal_namespace, queue)
        source_config, sink_config = connector_configs(run_id, dbs)
        names = (f"shop-sink-{run_id}", f"shop-source-{run_id}")
        await create_connectors(client, cfg, ((names[0], sink_config), (names[1], source_config)))
        load = LoadGenerator(source_db, size).start()
        equal = await watch_and_prove(client, names, (source_db, target_db), load, load_seconds, catch_up_s)
        for name in names:
            await client.delete(name)
        print(f"connectors deleted; both databases are kept: {dbs.source.render_as_string()}, "
              f"{dbs.target.render_as_string()}")  # fmt: skip
    source_db.dispose()
    target_db.dispose()
    return equal


def interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def demo_parser(
    prog: str, doc: str, orders: int, load_s: float, catch_up_s: float
) -> argparse.ArgumentParser:
    """The options both database demos take (`make demo`, `make demo-cdc`), with their defaults."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.splitlines()[0])
    parser.add_argument("--orders", type=int, default=orders, help="orders in the initial load")
    parser.add_argument("--load-seconds", type=float, default=load_s, help="how long the load generator runs")
    parser.add_argument(
        "--catch-up-seconds", type=float, default=catch_up_s, help="longest wait for catch-up"
    )
    parser.add_argument("--database", default=SHOP, help="database name on both servers (recreated)")
    return parser


def run_on_stack(demo: Callable[[StackConfig], Coroutine[Any, Any, bool]]) -> int:
    """Run ``demo`` against the local stack if it is healthy: 0 if the tables ended equal, else 1."""
    cfg = settings_or_exit().stack
    if not stack_is_healthy(cfg):
        return 1
    # SIGTERM (timeout, CI) unwinds like Ctrl-C, so the demo's worker process is stopped too.
    signal.signal(signal.SIGTERM, interrupt)
    try:
        equal = asyncio.run(demo(cfg))
    except ConnectorConfigError as exc:  # a config the connector refused: one message, no traceback
        print(f"demo: {exc}", file=sys.stderr)
        return 1
    return 0 if equal else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = demo_parser("python -m worker.demo.db", __doc__, 300_000, 60, 1200).parse_args(argv)
    size = ShopSize(orders=args.orders)
    return run_on_stack(
        lambda cfg: run_demo(cfg, size, args.load_seconds, args.catch_up_seconds, args.database)
    )


if __name__ == "__main__":
    sys.exit(main())
