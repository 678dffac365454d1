"""The side-by-side job of the record-path issue, as RocketMQ Connect's users would configure it.

A MariaDB table (BIGINT id, VARCHAR, DECIMAL(12,2), TEXT with NULLs and non-ASCII, DATETIME(3)) is
copied MariaDB -> RocketMQ -> PostgreSQL by connectors configured with Confluent's JDBC connector
class names and keys (``table.whitelist``, ``topic.prefix``, ``insert.mode=upsert`` on ``id``) and
Kafka's ``JsonConverter`` with schemas, the configs those users keep in files. Measured on it, in
one worker already past its first jobs:

- rows/s from creating the connectors until the target holds every row;
- first-row seconds: creating the connectors until the first row is visible in PostgreSQL;
- CPU-seconds of this process and every process under it (the in-process worker, Spark's JVM and
  its Python workers), read from ``/proc`` before and after;

and the target is checked equal to the source, row by row, before the figures count.
RocketMQ Connect's own JDBC connector ran this job on this machine kind at 6,667-9,091 rows/s,
first row after 7 s, 22-31 CPU-seconds (the issue's table); it is not built here.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
import uuid
from dataclasses import dataclass
from datetime import datetime

import psycopg
import pymysql
from sqlalchemy.engine import URL

from bench.db_baselines import count_rows, pg_dsn
from sluice.worker.client import SluiceClient

JOB_TABLE = "job_orders"
COLUMNS = "id, name, amount, note, updated"
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class JobRun:
    rows: int
    seconds: float
    first_row_s: float
    cpu_s: float

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("nan")


def fill(url: URL, rows: int) -> None:
    """``rows`` rows made by MariaDB's sequence engine; every seventh note is NULL, the rest carry
    non-ASCII text."""
    sql = (
        f"DROP TABLE IF EXISTS {JOB_TABLE}; "
        f"CREATE TABLE {JOB_TABLE} (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(64) NOT NULL, "
        "amount DECIMAL(12,2) NOT NULL, note TEXT NULL, updated DATETIME(3) NOT NULL); "
        f"INSERT INTO {JOB_TABLE} SELECT seq, CONCAT('customer ', seq % 5000), seq * 1.25 % 100000, "
        "IF(seq % 7 = 0, NULL, CONCAT('Grüße, 東京 ', MD5(seq), ' ✓')), "
        f"TIMESTAMP'2024-01-01 00:00:00.000' + INTERVAL seq * 1001 MICROSECOND FROM seq_1_to_{rows};"
    )
    command = [
        "mariadb", f"--host={url.host}", f"--port={url.port or 3306}", f"--user={url.username}",
        "--default-character-set=utf8mb4", str(url.database), "-e", sql,
    ]  # fmt: skip
    env = {**os.environ, "MYSQL_PWD": url.password or ""}
    subprocess.run(command, env=env, check=True, capture_output=True)


def confluent_configs(source: URL, target: URL, name: str) -> tuple[dict[str, str], dict[str, str]]:
    """The source and sink configs, in Confluent's and Kafka's names (Sluice takes them as aliases)."""
    converters = {
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
    }
    prefix = f"job-{name}-"
    src = {
        "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
        "connection.url": f"jdbc:mariadb://{source.host}:{source.port}/{source.database}",
        "connection.user": source.username or "",
        "connection.password": source.password or "",
        "table.whitelist": JOB_TABLE,
        "mode": "incrementing",
        "incrementing.column.name": "id",
        "topic.prefix": prefix,
        "batch.max.rows": "100000",
        "poll.interval.ms": "100",
        **converters,
    }
    sink = {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "connection.url": f"jdbc:postgresql://{target.host}:{target.port}/{target.database}",
        "connection.user": target.username or "",
        "connection.password": target.password or "",
        "topics": f"{prefix}{JOB_TABLE}",
        "table.name.format": f"job_{name}",
        "insert.mode": "upsert",
        "pk.mode": "record_value",
        "pk.fields": "id",
        "auto.create": "true",
        "batch.max.records": "100000",  # Sluice's own key: a Kafka sink's batches are its consumer's
        "poll.interval.ms": "100",
        **converters,
    }
    return src, sink


def direct_config(source: URL, target: URL, name: str) -> dict[str, str]:
    """The same job as one direct pipeline (RocketMQ Connect's DirectTask form: Confluent's task
    classes, each side's keys prefixed), with no topic between MariaDB and PostgreSQL."""
    src, sink = confluent_configs(source, target, name)
    return {
        "connector.direct.enable": "true",
        "source.task.class": "io.confluent.connect.jdbc.source.JdbcSourceTask",
        "sink.task.class": "io.confluent.connect.jdbc.sink.JdbcSinkTask",
        **{f"source.{k}": v for k, v in src.items() if k != "connector.class"},
        **{f"sink.{k}": v for k, v in sink.items() if k != "connector.class"},
    }


def tree_cpu_seconds(pid: int | None = None) -> float:
    """User+system CPU-seconds of ``pid`` (this process) and every live process under it, with what
    their children that ended used (reaped: ``cutime``/``cstime``), so a Spark Python worker that
    exits between two readings does not take its CPU out of the second one."""
    root = pid or os.getpid()
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        parents[int(entry)] = int(fields[1])
        ticks[int(entry)] = sum(int(tick) for tick in fields[11:15])  # utime, stime, cutime, cstime
    total, todo = 0, [root]
    while todo:
        current = todo.pop()
        total += ticks.get(current, 0)
        todo.extend(child for child, parent in parents.items() if parent == current)
    return total / _TICKS_PER_S


def check_equal(
    source: URL, target: URL, table: str, source_table: str = JOB_TABLE, columns: str = COLUMNS
) -> None:
    """Raise unless the target table holds exactly the source's rows (content, not counts)."""
    maria = pymysql.connect(
        host=source.host, port=source.port or 3306, user=source.username, password=source.password or "",
        database=source.database, charset="utf8mb4",
    )  # fmt: skip
    try:
        with maria.cursor() as cur:
            cur.execute(f"SELECT {columns} FROM {source_table} ORDER BY id")
            want = [_normal(row) for row in cur.fetchall()]
    finally:
        maria.close()
    with psycopg.connect(pg_dsn(target)) as conn:
        got = [_normal(row) for row in conn.execute(f'SELECT {columns} FROM "{table}" ORDER BY id')]
    if got != want:
        pairs = enumerate(zip(want, got, strict=False))
        diff = next((i for i, (a, b) in pairs if a != b), min(len(want), len(got)))
        raise AssertionError(
            f"bench job: target {table} differs from the source ({len(got)} rows vs {len(want)}); "
            f"first difference at row {diff}: {want[diff] if diff < len(want) else None} "
            f"vs {got[diff] if diff < len(got) else None}"
        )


def _normal(row: tuple[object, ...]) -> tuple[object, ...]:
    """Rows of both databases in one form: timestamps naive (both hold UTC wall time)."""
    return tuple(v.replace(tzinfo=None) if isinstance(v, datetime) else v for v in row)


#: A job that has not finished by then has stalled (a broker down, a failed task): say why
#: instead of waiting forever. Its slowest measured run took 45 s for 200,000 rows.
JOB_TIMEOUT_S = 600


async def _stalled(sluice: SluiceClient, connectors: list[str], done: int, rows: int) -> str:
    """Why the job stopped short: rows so far and each connector's task states and last errors."""
    said = []
    for connector in connectors:
        status = await sluice.status(connector)
        tasks = "; ".join(
            f"task {t.task_id} {t.state.value}"
            + (f" ({t.error or t.last_error})" if t.error or t.last_error else "")
            for t in status.tasks
        )
        said.append(f"{connector}: {status.state.value}, {tasks or 'no tasks'}")
    return f"bench job: {done:,} of {rows:,} rows in PostgreSQL after {JOB_TIMEOUT_S} s; " + " | ".join(said)


async def run_job(sluice: SluiceClient, source: URL, target: URL, rows: int) -> JobRun:
    """The job through RocketMQ: the sink created first, then the source (Confluent's configs)."""
    name = uuid.uuid4().hex[:8]
    src, sink = confluent_configs(source, target, name)
    return await _timed(sluice, {f"job-dst-{name}": sink, f"job-src-{name}": src}, source, target, name, rows)


async def run_direct_job(sluice: SluiceClient, source: URL, target: URL, rows: int) -> JobRun:
    """The job as one direct pipeline, no topic between the databases (``direct_config``)."""
    name = uuid.uuid4().hex[:8]
    config = direct_config(source, target, name)
    return await _timed(sluice, {f"job-direct-{name}": config}, source, target, name, rows)


async def _timed(
    sluice: SluiceClient,
    connectors: dict[str, dict[str, str]],
    source: URL,
    target: URL,
    name: str,
    rows: int,
) -> JobRun:
    """Create the connectors, time the first row and the last, delete them, check equality."""
    table, dsn = f"job_{name}", pg_dsn(target)
    cpu0, t0 = tree_cpu_seconds(), time.perf_counter()
    for connector, config in connectors.items():
        await sluice.create(connector, config)
    first_row_s = None
    while (done := await asyncio.to_thread(count_rows, dsn, table)) < rows:
        if first_row_s is None and done > 0:
            first_row_s = time.perf_counter() - t0
        if time.perf_counter() - t0 > JOB_TIMEOUT_S:
            raise RuntimeError(await _stalled(sluice, list(connectors), done, rows))
        await asyncio.sleep(0.05)
    seconds = time.perf_counter() - t0
    cpu = tree_cpu_seconds() - cpu0
    for connector in connectors:
        await sluice.delete(connector)
    await asyncio.to_thread(check_equal, source, target, table)
    return JobRun(done, seconds, first_row_s if first_row_s is not None else seconds, cpu)
