"""The databases one benchmark run makes and drops: a MariaDB database and two PostgreSQL ones,
and the RocketMQ topics the run made (its connectors' and baselines', and the broker's retry and
dead-letter topics of its consumer groups): a bench run leaves nothing in the stack behind it.

Shared by `make bench-db`, `bench-cdc`, `bench-cdc-batch` and `bench.batch_cost` (each run names
its own, so runs never see each other's tables). Run benchmarks on a quiet stack: a topic another
client makes during the run is dropped with the run's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import OperationalError

from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
from sluice.worker.settings import Settings

#: Topics the broker makes for itself (timers, schedules, transactions, traces) when first needed.
BROKER_TOPICS = ("RMQ_SYS", "SCHEDULE_TOPIC", "TBW102", "OFFSET_MOVED_EVENT", "TRANS_", "SELF_TEST_TOPIC")


@dataclass(frozen=True)
class Databases:
    """One MariaDB database and two PostgreSQL databases (source, target), made for this run."""

    mariadb: URL
    pg_source: URL
    pg_target: URL
    #: the broker's topics before the run: the others are the run's, dropped with its databases
    topics_before: frozenset[str] = field(default=frozenset())

    def jdbc(self, url: URL) -> str:
        scheme = "mariadb" if url.get_backend_name() in ("mysql", "mariadb") else "postgresql"
        return f"jdbc:{scheme}://{url.host}:{url.port}/{url.database}"


def make_databases(settings: Settings, run: str) -> Databases:
    cfg = settings.stack
    maria_admin = create_engine(cfg.mariadb_url(), isolation_level="AUTOCOMMIT")
    with maria_admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE bench_{run} CHARACTER SET utf8mb4"))
    maria_admin.dispose()
    pg_admin = create_engine(cfg.database_url, isolation_level="AUTOCOMMIT")
    with pg_admin.connect() as conn:
        for name in (f"bench_src_{run}", f"bench_dst_{run}"):
            conn.execute(text(f"CREATE DATABASE {name}"))
    pg_admin.dispose()
    pg = make_url(cfg.database_url)
    with SyncRocketMQClient(settings.runtime.namesrv) as client:
        topics = frozenset(client.all_topics())
    return Databases(
        make_url(cfg.mariadb_url(f"bench_{run}")),
        pg.set(database=f"bench_src_{run}"),
        pg.set(database=f"bench_dst_{run}"),
        topics,
    )


def drop_databases(settings: Settings, dbs: Databases) -> None:
    maria_admin = create_engine(settings.stack.mariadb_url(), isolation_level="AUTOCOMMIT")
    with maria_admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {dbs.mariadb.database}"))
    maria_admin.dispose()
    pg_admin = create_engine(settings.stack.database_url, isolation_level="AUTOCOMMIT")
    with pg_admin.connect() as conn:
        for url in (dbs.pg_source, dbs.pg_target):
            _drop_slots(conn, str(url.database))
            conn.execute(text(f"DROP DATABASE IF EXISTS {url.database} WITH (FORCE)"))
    pg_admin.dispose()
    with SyncRocketMQClient(settings.runtime.namesrv) as client:
        for topic in sorted(set(client.all_topics()) - dbs.topics_before):
            if not topic.upper().startswith(BROKER_TOPICS):
                client.delete_topic(topic)


def _drop_slots(conn: Connection, database: str, timeout_s: float = 30) -> None:
    """Drop the replication slots of ``database`` (a postgres-cdc run's): PostgreSQL refuses to drop
    a database a slot belongs to. A slot still held by a reader's last peek is waited for."""
    deadline = time.monotonic() + timeout_s
    drop = text("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = :db")
    while True:
        try:
            conn.execute(drop, {"db": database})
            return
        except OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
