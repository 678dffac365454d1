"""The same pipelines on every kind of Spark master. A standalone cluster (``spark://``: a master
and one worker from pyspark's own distribution) and Spark Connect (``sc://``: a server from the jars
pyspark ships) each run a file pipeline (file -> RocketMQ -> file) and a database pipeline (MariaDB
-> jdbc-source, read in splits by Spark tasks -> RocketMQ -> postgres-sink) side by side on one real
worker, and each output must equal its input. ``local[2]`` runs the same two pipelines, built from
the same helpers, in test_file_pipeline.py and test_jdbc_source_pipeline.py (on the session's shared
worker); not again here, to keep the suite's time. Here every batch runs on the master's Spark
(``SLUICE_LOCAL_BATCH_MAX_RECORDS=0``): none in the worker's own process.

Off ``local``, the Python code runs in processes the worker did not start (a standalone executor,
the Connect server's Python workers); they import the zip of ``sluice`` the worker ships
(activities.spark). The PostgreSQL sink's batches are staged by those processes
(connectors.jdbc.staging): on the standalone cluster, two executors of one core each, the test
follows each staging process named in the worker's log up to the executor JVM that started it.
Also: a worker whose master is unreachable stops at once, naming the setting.
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from sluice.deploy.local.spark_cluster import HOST, ConnectServer, StandaloneCluster, free_port
from tests.connectors.jdbc_dbs import Db
from tests.databases import normalized, table_rows
from tests.runtime.helpers import wait_for
from tests.runtime.test_file_pipeline import _lines, _pipeline_configs, _read
from tests.runtime.test_jdbc_source_pipeline import _insert

#: The standalone cluster's workers, one executor each of one core: the Spark tasks a batch side
#: may use there at once.
STANDALONE_WORKERS = 2

#: What the worker's log says of a staged sink batch (connectors.jdbc.sink.JdbcSinkTask.write_staged).
STAGED_LINE = re.compile(r"row\(s\) staged by process\(es\) (\S+(?:, \S+)*), merged")

#: Each kind's worker is a private one: its environment names the master.
MASTER_KINDS = [
    pytest.param("standalone", marks=pytest.mark.private_worker, id="standalone"),
    pytest.param("connect", marks=pytest.mark.private_worker, id="connect"),
]


@dataclass(frozen=True)
class MasterUnderTest:
    #: what the worker's environment adds to name the master
    env: dict[str, str]
    #: where copies of the worker's shipped ``sluice.zip`` land (executor work folders, the
    #: Connect server's session files)
    shipped_to: Path
    #: the pattern of such a copy under ``shipped_to``
    shipped_glob: str
    #: in the command line of the JVM whose Python workers run the batches' Spark tasks
    task_jvm: str

    def shipped(self) -> list[Path]:
        return list(self.shipped_to.glob(self.shipped_glob))


@pytest.fixture
def spark_master(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MasterUnderTest]:
    """One master kind, its cluster or server running meanwhile.

    Function-scoped, each kind used by one test: no two clusters' JVMs at once on a small machine.
    """
    if request.param == "standalone":
        state = tmp_path_factory.mktemp("spark-standalone")
        with StandaloneCluster(state, workers=STANDALONE_WORKERS, cores=1) as cluster:
            env = {
                "SLUICE_SPARK_MASTER": cluster.master_url,
                "SLUICE_LOCAL_BATCH_MAX_RECORDS": "0",  # every batch on the cluster, none in the worker
                "SLUICE_BATCH_TASKS": str(STANDALONE_WORKERS),
                "SPARK_LOCAL_IP": HOST,  # where the executors reach the worker's driver
            }
            yield MasterUnderTest(
                env, state, "spark-worker-*/app-*/*/sluice.zip", "CoarseGrainedExecutorBackend"
            )
    else:
        with ConnectServer(tmp_path_factory.mktemp("spark-connect")) as server:
            env = {"SLUICE_SPARK_MASTER": server.url, "SLUICE_LOCAL_BATCH_MAX_RECORDS": "0"}
            yield MasterUnderTest(env, server.local_dir, "**/sluice.zip", "SparkConnectServer")


def _ancestors(pid: int) -> list[tuple[int, str]]:
    """``pid`` and each of its parents, with their command lines (Linux ``/proc``)."""
    chain = []
    while pid > 1:
        proc = Path(f"/proc/{pid}")
        try:
            chain.append(
                (pid, proc.joinpath("cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            )
            pid = int(proc.joinpath("stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return chain


def _staging_processes(log: str) -> set[int]:
    """The processes the worker's log names as having staged sink batches (``host:pid``)."""
    return {int(p.rsplit(":", 1)[1]) for m in STAGED_LINE.finditer(log) for p in m.group(1).split(", ")}


@pytest.fixture
def opensearch_index(stack_config) -> Iterator[str]:  # type: ignore[no-untyped-def]
    index = f"orders-{uuid.uuid4().hex[:8]}"
    yield index
    httpx.delete(f"{stack_config.opensearch_url}/{index}", timeout=10)


def _documents(url: str, index: str) -> list[tuple[object, ...]]:
    """(id, customer, note) of every document of ``index``, sorted (a document twice shows twice)."""
    if httpx.post(f"{url}/{index}/_refresh", timeout=10).status_code == 404:
        return []
    found = httpx.post(f"{url}/{index}/_search", json={"size": 10_000}, timeout=10).json()
    return sorted(
        (h["_source"]["id"], h["_source"]["customer"], h["_source"]["note"]) for h in found["hits"]["hits"]
    )


def _copied_rows(url: str) -> list[tuple[object, ...]]:
    try:
        return table_rows(url, "orders_copy")
    except Exception:  # the sink's first batch creates it
        return []


def _orders_rows(url: str, schema: str) -> list[tuple[object, ...]]:
    """The target's orders (none before the sink created the table), compared by content."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            if conn.execute(text("SELECT to_regclass(:t)"), {"t": f'"{schema}".orders'}).scalar() is None:
                return []
            rows = conn.execute(
                text(f'SELECT id, customer, amount, note, created FROM "{schema}".orders ORDER BY id')
            ).all()
    finally:
        engine.dispose()
    return [tuple(normalized(v) for v in row) for row in rows]


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("spark_master", MASTER_KINDS, indirect=True)
async def test_file_and_database_pipelines_equal_their_inputs(
    spark_master, runtime_env, start_worker, sluice, stack_config, tmp_path: Path, topic_name,
    mariadb_db, fresh_schema, worker_logs, opensearch_index,
) -> None:  # fmt: skip
    runtime_env.env.update(spark_master.env)
    source_db = Db.of(mariadb_db)
    source_db.run(
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR(20) NOT NULL, "
        "amount DECIMAL(14,2) NOT NULL, note VARCHAR(40), created DATETIME(3) NOT NULL)"
    )
    _insert(source_db, range(1, 501))
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text(_lines(0, 600))
    worker = start_worker()

    name = uuid.uuid4().hex[:8]
    prefix = f"M{name}-"
    file_source, file_sink = _pipeline_configs(src, dst, topic_name, 16 * 1024)
    connectors = {
        f"file-src-{name}": file_source,
        f"file-dst-{name}": file_sink,
        f"jdbc-{name}": {
            "connector.class": "jdbc-source",
            "connection.url": source_db.jdbc_url,
            "connection.user": source_db.user,
            "connection.password": source_db.password,
            "mode": "incrementing",
            "incrementing.column.name": "id",
            "table.whitelist": "orders",
            "topic.prefix": prefix,
            "batch.max.rows": "500",
            "read.split.rows": "150",  # a batch is read by several Spark tasks (mapInArrow)
            "poll.interval.ms": "200",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "true",
        },
        f"pg-{name}": {
            "connector.class": "postgres-sink",
            "topics": f"{prefix}orders",
            "connection.url": stack_config.database_url,
            "schema": fresh_schema,
            "table": "orders",
            "auto.create": "true",
            "insert.mode": "upsert",
            "pk.fields": "id",
            "value.converter": "json",
            "value.converter.schemas.enable": "true",
            "poll.interval.ms": "200",
        },
        f"my-{name}": {  # back into MariaDB, beside the source table: staged by LOAD DATA
            "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
            "topics": f"{prefix}orders",
            "connection.url": source_db.jdbc_url,
            "connection.user": source_db.user,
            "connection.password": source_db.password,
            "table.name.format": "orders_copy",
            "auto.create": "true",
            "insert.mode": "upsert",
            "pk.mode": "record_value",
            "pk.fields": "id",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "poll.interval.ms": "200",
        },
        f"os-{name}": {  # its Spark tasks send their shares' _bulk requests
            "connector.class": "opensearch-sink",
            "topics": f"{prefix}orders",
            "connection.url": stack_config.opensearch_url,
            "key.ignore": "true",
            "transforms": "route",
            "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.route.regex": ".*",
            "transforms.route.replacement": opensearch_index,
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "poll.interval.ms": "200",
        },
    }
    for connector, config in connectors.items():
        await sluice.create(connector, config)

    expected_orders = table_rows(source_db.url, "orders")
    await wait_for(lambda: _read(dst) == _read(src), 240, "the sink file equal to the source file")
    await wait_for(
        lambda: _orders_rows(stack_config.database_url, fresh_schema) == expected_orders,
        240,
        "the PostgreSQL table equal to the MariaDB table, row by row",
    )
    await wait_for(
        lambda: _copied_rows(source_db.url) == expected_orders,
        240,
        "the MariaDB copy equal to the MariaDB table, row by row",
    )
    expected_documents = sorted((row[0], row[1], row[3]) for row in expected_orders)
    await wait_for(
        lambda: _documents(stack_config.opensearch_url, opensearch_index) == expected_documents,
        240,
        "the OpenSearch index holding every MariaDB row once",
    )
    assert len(expected_orders) == 500 and _read(dst) == _lines(0, 600)
    assert spark_master.shipped(), "the worker's code did not reach the cluster (sluice_archive)"
    # The sink's rows were COPYed by the processes running its Spark tasks, not by the worker.
    stagers = _staging_processes(worker_logs())
    assert stagers, f"no staged sink batch in the worker's log:\n{worker_logs()[-3000:]}"
    for pid in stagers:
        chain = _ancestors(pid)
        assert worker.proc.pid not in [p for p, _ in chain], f"the worker staged rows itself: {chain}"
        assert any(spark_master.task_jvm in c for _, c in chain), f"process {pid} staged rows: {chain}"
    for connector in connectors:
        await sluice.delete(connector)


def _worker_on(master: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``sluice worker`` run against ``master`` on a queue of its own; it must exit 2 (refused)."""
    env = {**env, "SLUICE_SPARK_MASTER": master, "SLUICE_TASK_QUEUE": f"q-{uuid.uuid4().hex[:8]}"}
    command = [sys.executable, "-m", "sluice.worker.cli", "worker"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    return done


@pytest.mark.parametrize("master", ["spark://127.0.0.1:{port}", "sc://127.0.0.1:{port}"])
def test_unreachable_master_stops_the_worker_naming_the_setting(
    stack_config, runtime_env, master: str
) -> None:
    """Before it polls: the check comes before the SparkSession, seconds, not Spark's minute of
    retries; the worker exits 2 and its one line says which setting to fix."""
    url = master.format(port=free_port())  # nothing listens there
    done = _worker_on(url, runtime_env.env)
    assert f"Spark master {url!r} (SLUICE_SPARK_MASTER): unreachable" in done.stderr
    assert "sluice worker ready" not in done.stdout


def test_a_port_that_is_no_connect_server_stops_the_worker_in_seconds(stack_config, runtime_env) -> None:
    """PostgreSQL's port answers but speaks no Spark Connect: the session's first calls retry
    briefly (not the ten minutes later calls ride a restart out with), and the one line says why."""
    url = f"sc://{stack_config.host}:{stack_config.pg_port}"
    done = _worker_on(url, runtime_env.env)
    assert f"Spark master {url!r} (SLUICE_SPARK_MASTER): no Spark session: " in done.stderr
    assert "sluice worker ready" not in done.stdout
