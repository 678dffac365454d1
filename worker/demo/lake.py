"""`make demo-lake`: the live MariaDB shop's orders captured into a Delta table and an Iceberg
table, queried with Spark SQL, read back in time, and proved equal.

1. creates and loads the MariaDB database ``shop`` (``sluice.worker.demo.shop``; the PostgreSQL
   side of the other demos is left alone) and a fresh warehouse folder ``.sluice/demo-lake/<run>``;
2. starts a `sluice worker` process and creates three connectors through the Python client:
   ``mysql-cdc`` for ``orders`` (`make demo-cdc`'s Debezium MySQL config, with
   ``snapshot.mode=initial``: the rows already there first, then the binlog), ``delta-sink``
   (``ExtractNewRecordState``, ``insert.mode=upsert`` on ``id``, deletes by tombstone) and
   ``iceberg-sink`` with Apache Iceberg's Kafka Connect class and keys (``iceberg.tables``,
   ``iceberg.tables.upsert-mode-enabled``, a ``hadoop`` catalog with its warehouse);
3. waits, under the live view, until both tables hold the snapshot, and notes that moment: each
   table's version (Delta) or snapshot id (Iceberg), and the rows ``orders`` holds;
4. runs `make demo-cdc`'s load generator (inserts, updates *and deletes*) under the live view,
   stops it and waits for catch-up;
5. proves: revenue per status by Spark SQL on each table equals the same query on MariaDB; each
   table equals ``orders`` row by row by content; each table read ``VERSION AS OF`` the noted
   version equals the rows ``orders`` held then and differs from now. Prints the verdict and
   exits 1 unless every check holds.

Why ``snapshot.mode=initial`` and not `make demo-cdc`'s ``never`` with a probe row: a lake table
starts that way in practice (the rows already there, then the log), and the moment both tables
hold the snapshot with nothing else changing is a commit whose content is known exactly — the
version to travel back to.

The tables are read as a user's Spark job would read them: by the demo process's own SparkSession
with the lake jars (``settings().spark_jar_files()``), never through the worker. Its Iceberg
catalog is uncached: Spark's Iceberg catalog otherwise keeps a table's metadata for 30 s, and
"now" would be a snapshot the sink has already moved past.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final

from sqlalchemy import text
from sqlalchemy.engine import Engine

from sluice.activities.spark import LAKE_FORMATS, get_spark
from sluice.connectors.cdc.topics import debezium_topic
from sluice.deploy.local.config import StackConfig
from sluice.worker.client import SluiceClient
from sluice.worker.demo.cdc import JSON_WITH_SCHEMAS, debezium_mysql_source, shop_size
from sluice.worker.demo.db import (
    PASSWORD_ENV,
    SHOP,
    DemoDatabases,
    create_connectors,
    demo_databases,
    demo_parser,
    run_on_stack,
    watch,
    watch_load,
)
from sluice.worker.demo.file import started_worker
from sluice.worker.demo.live_view import LiveView, ProgressSampler, TableSample, TargetSide
from sluice.worker.demo.search import JSON_KEYS, recreate_source
from sluice.worker.demo.shop import LoadGenerator, ShopSize, connect_url, create_shop
from sluice.worker.demo.table_equality import (
    Kind,
    Row,
    TableComparison,
    canonical,
    canonical_rows,
    column_kinds,
    compare_rows,
)
from sluice.worker.settings import settings_or_exit

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TABLE: Final = "orders"
KEY: Final = "id"
DELTA: Final = "Delta"
ICEBERG: Final = "Iceberg"
FORMATS: Final = (DELTA, ICEBERG)
#: The demo session's name for the sink's Iceberg warehouse (the sink registers its own).
CATALOG: Final = "demo_lake"
BATCH: Final = {"batch.max.records": "20000", "poll.interval.ms": "500"}
REVENUE_SQL: Final = (
    "SELECT status, COUNT(*) AS orders, SUM(total) AS revenue FROM {table} GROUP BY status ORDER BY status"
)
#: Per status: orders and revenue as canonical text.
Revenue = dict[str, tuple[str, str]]


def connector_configs(
    run_id: str, dbs: DemoDatabases, warehouse: Path
) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """``mysql-cdc`` for ``orders`` (snapshot, then binlog), ``delta-sink`` with Sluice's keys and
    ``iceberg-sink`` with Apache Iceberg's; both upsert the new row state by ``id`` and delete on a
    tombstone, whose ``id`` only its key carries (keys as Connect envelopes, ``JSON_KEYS``). Topics
    are named after the run: fresh sinks on fresh topics."""
    prefix = f"lake{run_id}"
    source = debezium_mysql_source(
        dbs.source, f"${{env:{PASSWORD_ENV}}}", prefix, (TABLE,),
        **{"snapshot.mode": "initial", **BATCH, **JSON_KEYS},
    )  # fmt: skip
    common = {
        "topics": debezium_topic(prefix, dbs.name, TABLE),
        "transforms": "unwrap",
        "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
        "transforms.unwrap.delete.handling.mode": "none",
        **JSON_KEYS,
        **JSON_WITH_SCHEMAS,
        **BATCH,
    }
    delta = {
        "connector.class": "delta-sink",
        "delta.lake.tables.location": str(warehouse / "delta"),
        "table.name.format": TABLE,
        "insert.mode": "upsert",
        "pk.fields": KEY,
        "delete.enabled": "true",
        **common,
    }
    iceberg = {
        "connector.class": "org.apache.iceberg.connect.IcebergSinkConnector",
        "iceberg.tables": f"{dbs.name}.{TABLE}",
        "iceberg.tables.upsert-mode-enabled": "true",
        "iceberg.tables.default-id-columns": KEY,
        "iceberg.catalog.type": "hadoop",
        "iceberg.catalog.warehouse": str(warehouse / "iceberg"),
        **common,
    }
    return source, delta, iceberg


@dataclass(frozen=True)
class Version:
    """A committed version of a table: Delta's version number or Iceberg's snapshot id."""

    number: int
    committed_at: str  # UTC, as Spark prints it


class LakeTables:
    """The demo's two tables, read with the demo process's own SparkSession."""

    def __init__(self, spark: SparkSession, warehouse: Path, namespace: str) -> None:
        self.spark = spark
        self.delta_path = warehouse / "delta" / TABLE
        catalog = f"spark.sql.catalog.{CATALOG}"
        for key, value in {
            "": "org.apache.iceberg.spark.SparkCatalog",
            ".type": "hadoop",
            ".warehouse": str(warehouse / "iceberg"),
            ".cache-enabled": "false",
        }.items():
            spark.conf.set(catalog + key, value)
        self.iceberg_path = warehouse / "iceberg" / namespace / TABLE
        self.names = {DELTA: f"delta.`{self.delta_path}`", ICEBERG: f"{CATALOG}.{namespace}.{TABLE}"}

    def exists(self, fmt: str) -> bool:
        """Whether the sink committed the table yet, from its files: asked of a ``hadoop`` catalog
        while the sink creates the table, Iceberg logs a warning with a stack trace."""
        if fmt == DELTA:
            return any((self.delta_path / "_delta_log").glob("*.json"))
        return (self.iceberg_path / "metadata" / "version-hint.text").exists()

    def relation(self, fmt: str, version: int | None = None) -> str:
        """The table in a FROM clause, as of ``version`` when given."""
        return self.names[fmt] + ("" if version is None else f" VERSION AS OF {version}")

    def side(self, fmt: str) -> TargetSide:
        """The live view's ``TargetSide`` of one table: one aggregate query (nothing until created)."""

        def read(_table: str, mark: datetime | None) -> tuple[int, datetime | None, int]:
            if not self.exists(fmt):
                return 0, None, 0
            newer = (
                "COUNT(*)" if mark is None else f"COUNT_IF(updated_at > TIMESTAMP '{mark.isoformat(' ')}')"
            )
            rows, newest, changed = self.spark.sql(
                f"SELECT COUNT(*), CAST(MAX(updated_at) AS STRING), {newer} FROM {self.names[fmt]}"
            ).first() or (0, None, 0)
            return int(rows), None if newest is None else datetime.fromisoformat(newest), int(changed)

        return read

    def columns(self, fmt: str) -> list[str]:
        return list(self.spark.sql(f"SELECT * FROM {self.names[fmt]} LIMIT 0").columns)

    def rows(
        self, fmt: str, columns: Sequence[str], kinds: Sequence[Kind], version: int | None = None
    ) -> Iterator[Row]:
        """The table's rows ordered by ``id``, every value printed by Spark (UTC) and made
        canonical by its source column's kind: one side of ``compare_rows``, streamed."""
        # Aliased: Spark names ``CAST(id AS STRING)`` ``id``, and ORDER BY would sort the text.
        values = ", ".join(f"CAST(`{c}` AS STRING) AS v{i}" for i, c in enumerate(columns))
        frame = self.spark.sql(f"SELECT {values} FROM {self.relation(fmt, version)} ORDER BY `{KEY}`")
        for row in frame.toLocalIterator(prefetchPartitions=True):
            yield tuple(canonical(v, k) for v, k in zip(row, kinds, strict=True))

    def current(self, fmt: str) -> Version:
        """The table's newest committed version."""
        if fmt == DELTA:
            history = self.spark.sql(f"DESCRIBE HISTORY {self.names[DELTA]} LIMIT 1")
            found = history.selectExpr("version", "CAST(timestamp AS STRING)").first()
        else:
            found = self.spark.sql(
                f"SELECT snapshot_id, CAST(made_current_at AS STRING) FROM {self.names[ICEBERG]}.history "
                "WHERE is_current_ancestor ORDER BY made_current_at DESC LIMIT 1"
            ).first()
        if found is None:
            raise SystemExit(f"demo: the {fmt} table {self.names[fmt]} has no committed version")
        return Version(int(found[0]), str(found[1]))

    def commits(self, fmt: str) -> int:
        if fmt == DELTA:
            return self.spark.sql(f"DESCRIBE HISTORY {self.names[DELTA]}").count()
        return self.spark.table(f"{self.names[ICEBERG]}.snapshots").count()

    def revenue(self, fmt: str) -> Revenue:
        rows = self.spark.sql(REVENUE_SQL.format(table=self.names[fmt])).collect()
        return {str(s): (str(n), canonical(str(r), Kind.DECIMAL) or "") for s, n, r in rows}


class LakesSampler(ProgressSampler):
    """The live view's rows for both tables: ``orders`` sampled against each (a ProgressSampler
    has one target), each row labelled with its format."""

    def __init__(self, source: Engine, tables: LakeTables) -> None:
        super().__init__(source, tables.side(DELTA), [TABLE])
        self._iceberg = ProgressSampler(source, tables.side(ICEBERG), [TABLE])

    def sample(self) -> list[TableSample]:
        delta = [replace(s, table=f"{s.table} ({DELTA})") for s in super().sample()]
        return delta + [replace(s, table=f"{s.table} ({ICEBERG})") for s in self._iceberg.sample()]


def source_revenue(engine: Engine) -> Revenue:
    with engine.connect() as conn:
        rows = conn.execute(text(REVENUE_SQL.format(table=TABLE))).all()
    return {str(s): (str(n), canonical(str(r), Kind.DECIMAL) or "") for s, n, r in rows}


def compare_revenue(label: str, source: Revenue, target: Revenue) -> TableComparison:
    """Two answers of ``REVENUE_SQL`` compared status by status, as a table comparison."""
    result = TableComparison(label, ["status", "orders", "revenue"], len(source), len(target))
    for status in sorted(set(source) | set(target)):
        want, got = source.get(status), target.get(status)
        if want == got:
            continue
        if got is None:
            result.missing += 1
        elif want is None:
            result.extra += 1
        else:
            result.differing += 1
        result.examples.append(f"status {status!r}: MariaDB {want} != {got}")
    digest = lambda r: hashlib.sha256(repr(sorted(r.items())).encode()).hexdigest()  # noqa: E731
    result.source_digest, result.target_digest = digest(source), digest(target)
    return result


def print_revenue(source: Revenue, lakes: Mapping[str, Revenue], relations: Mapping[str, str]) -> None:
    print(f"\nrevenue per status: {REVENUE_SQL.format(table='<table>')}")
    for fmt, relation in relations.items():
        print(f"  {fmt}: Spark SQL on {relation}")
    sides = {"MariaDB": source, **lakes}
    print(f"  {'status':<10}" + "".join(f" {name + ' orders':>16} {'revenue':>14}" for name in sides))
    for status in sorted(set().union(*sides.values())):
        cells = [side.get(status, ("—", "—")) for side in sides.values()]
        print(f"  {status:<10}" + "".join(f" {n:>16} {r:>14}" for n, r in cells))


def prove(
    source_db: Engine, tables: LakeTables, then: Mapping[str, Version], then_rows: Sequence[Row]
) -> list[TableComparison]:
    """Every check, each a ``TableComparison``: revenue per status, the tables now row by row,
    and each table as of ``then`` against ``then_rows`` (and not equal to now)."""
    kinds_by_column = column_kinds(source_db, TABLE)
    columns, kinds = list(kinds_by_column), list(kinds_by_column.values())
    revenue = {fmt: tables.revenue(fmt) for fmt in FORMATS}
    mariadb = source_revenue(source_db)
    print_revenue(mariadb, revenue, tables.names)
    checks = [
        compare_revenue(f"revenue per status, {fmt} (Spark SQL)", mariadb, revenue[fmt]) for fmt in FORMATS
    ]
    now: dict[str, TableComparison] = {}
    for fmt in FORMATS:
        label = f"{TABLE} in {fmt}"
        held = tables.columns(fmt)
        absent = [c for c in columns if c not in held]
        if absent:
            now[fmt] = TableComparison(
                label, columns, problem=f"columns missing in the table: {', '.join(absent)}"
            )
            continue
        source = canonical_rows(source_db, TABLE, columns, kinds, KEY)
        now[fmt] = compare_rows(label, columns, KEY, source, tables.rows(fmt, columns, kinds))
    checks += now.values()
    print("\ntime travel: each table as it was when the snapshot had landed, before the load")
    for fmt in FORMATS:
        version = then[fmt]
        relation = tables.relation(fmt, version.number)
        label = f"{TABLE} in {fmt} VERSION AS OF {version.number} vs orders then"
        past = compare_rows(
            label, columns, KEY, iter(then_rows), tables.rows(fmt, columns, kinds, version.number)
        )
        if past.target_digest == now[fmt].target_digest:
            past.problem = "it reads the same rows as the table now: no earlier version was read"
        current = tables.current(fmt)
        print(f"  SELECT * FROM {relation} (committed {version.committed_at} UTC): "
              f"{past.target_rows:,} rows, sha256 {past.target_digest[:16]}…")  # fmt: skip
        print(f"    now (version {current.number}, {tables.commits(fmt)} commits): "
              f"{now[fmt].target_rows:,} rows, sha256 {now[fmt].target_digest[:16]}…")  # fmt: skip
        checks.append(past)
    return checks


def print_lake_verdict(checks: Sequence[TableComparison]) -> bool:
    """Each check, then one ``VERDICT`` line; True if every check holds."""
    print("\nproof: decimals exact, instants in UTC to the microsecond, rows by content")
    for check in checks:
        print(f"  {check.summary()}")
        for example in check.examples:
            print(f"      {example}")
    held = sum(c.equal for c in checks)
    verdict = "EQUAL" if held == len(checks) else "NOT EQUAL"
    print(f"\nVERDICT: MariaDB shop orders and its Delta and Iceberg tables are {verdict} "
          f"({held} of {len(checks)} checks: revenue per status, row by row, time travel)")  # fmt: skip
    return held == len(checks)


def lake_jars() -> tuple[str, ...]:
    """The lake formats' jars, for the demo's session; exits naming what is missing."""
    jars = settings_or_exit().spark_jar_files()
    missing = [p for p in LAKE_FORMATS if not any(Path(j).name.startswith(p) for j in jars)]
    if missing:
        raise SystemExit(f"demo: no {' or '.join(m.rstrip('_-') for m in missing)} jar among the Spark "
                         "jars (SLUICE_SPARK_JARS, else .sluice/spark-jars): run `make up`")  # fmt: skip
    return jars


async def run_demo(
    cfg: StackConfig, size: ShopSize, load_seconds: float, catch_up_s: float, database: str = SHOP
) -> bool:
    run_id = time.strftime("%Y%m%d%H%M%S")
    dbs = demo_databases(cfg, database)
    warehouse = cfg.state_dir / "demo-lake" / run_id
    print(f"creating MariaDB {dbs.source.render_as_string()}; tables under {warehouse}")
    jars = lake_jars()
    recreate_source(dbs)
    source_db = connect_url(dbs.source)
    t0 = time.monotonic()
    counts = await asyncio.to_thread(create_shop, source_db, size)
    print(f"loaded {', '.join(f'{n:,} {t}' for t, n in counts.items())} in {time.monotonic() - t0:.1f} s")
    # The demo's own session starts while the worker does: two JVMs starting side by side.
    spark_ready = asyncio.create_task(
        asyncio.to_thread(get_spark, "local[2]", driver_memory="1g", app_name="sluice-demo-lake", jars=jars)
    )
    queue = f"sluice-demo-lake-{run_id}"
    env = {"SLUICE_TASK_QUEUE": queue, PASSWORD_ENV: dbs.mariadb_password}
    os.environ.setdefault(PASSWORD_ENV, dbs.mariadb_password)  # the client checks the source config
    try:
        async with started_worker(cfg, f"demo-lake-worker-{run_id}", env):
            client = await SluiceClient.connect(cfg.temporal_address, cfg.temporal_namespace, queue)
            source, delta, iceberg = connector_configs(run_id, dbs, warehouse)
            names = (f"shop-lake-delta-{run_id}", f"shop-lake-iceberg-{run_id}", f"shop-lake-source-{run_id}")
            await create_connectors(client, cfg, tuple(zip(names, (delta, iceberg, source), strict=True)))
            spark = await spark_ready
            tables = LakeTables(spark, warehouse, dbs.name)
            view = LiveView(LakesSampler(source_db, tables), target="Delta + Iceberg")
            with view:
                phase = "initial snapshot (no load yet)"
                await watch(client, names, view, None, phase, time.monotonic() + catch_up_s, True)
            then = {fmt: await asyncio.to_thread(tables.current, fmt) for fmt in FORMATS}
            kinds = column_kinds(source_db, TABLE)
            then_rows = await asyncio.to_thread(
                lambda: list(canonical_rows(source_db, TABLE, list(kinds), list(kinds.values()), KEY))
            )
            print(f"snapshot landed: {len(then_rows):,} orders in both tables; Delta version "
                  f"{then[DELTA].number}, Iceberg snapshot {then[ICEBERG].number}", flush=True)  # fmt: skip
            load = LoadGenerator(
                source_db, size, orders_per_s=100, updates_per_s=200, deletes_per_s=30
            ).start()
            await watch_load(client, names, view, load, load_seconds, catch_up_s)
            checks = await asyncio.to_thread(prove, source_db, tables, then, then_rows)
            for name in names:
                await client.delete(name)
            print(f"connectors deleted; the database and the tables are kept: "
                  f"{dbs.source.render_as_string()}, {warehouse}")  # fmt: skip
    finally:
        source_db.dispose()
        # A session that never started has nothing to stop; the error that ended the demo is the one shown.
        with contextlib.suppress(Exception):
            (await spark_ready).stop()
    return print_lake_verdict(checks)


def main(argv: Sequence[str] | None = None) -> int:
    parser = demo_parser("python -m sluice.worker.demo.lake", __doc__, 20_000, 30, 600)
    parser.add_argument("--database", default=SHOP, help="MariaDB database and Iceberg namespace (recreated)")
    args = parser.parse_args(argv)
    size = shop_size(args.orders)
    return run_on_stack(
        lambda cfg: run_demo(cfg, size, args.load_seconds, args.catch_up_seconds, args.database)
    )


if __name__ == "__main__":
    sys.exit(main())
