"""Fixtures of the offset-store tests: a migrated store in a fresh PostgreSQL schema."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.engine import Engine

from sluice.activities.store import OffsetStore
from sluice.connectors.jdbc.sink import JdbcSinkTask
from sluice.deploy.local.config import StackConfig


@pytest.fixture
def store(stack_config: StackConfig, pg_engine: Engine, fresh_schema: str) -> Iterator[OffsetStore]:
    s = OffsetStore(stack_config.database_url, schema=fresh_schema, engine=pg_engine)
    s.migrate()
    yield s


@pytest.fixture
def tasks() -> Iterator[list[JdbcSinkTask]]:
    """Sink tasks a test made (``postgres-sink``'s too), closed when it ends."""
    made: list[JdbcSinkTask] = []
    yield made
    for t in made:
        t.close()
