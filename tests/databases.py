"""Per-test databases on the local stack's MariaDB and PostgreSQL (tests/conftest.py fixtures).

Each test that moves database rows gets a database of its own, created empty and dropped after,
so tests never see each other's tables and can run in any order.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from sluice.deploy.local.config import StackConfig


@dataclass(frozen=True)
class TestDatabase:
    """A fresh database: ``url`` for SQLAlchemy, ``jdbc_url`` as a Kafka Connect user writes it."""

    __test__ = False  # not a pytest test class

    name: str
    url: str
    jdbc_url: str
    user: str
    password: str


@contextmanager
def mariadb_database(cfg: StackConfig) -> Iterator[TestDatabase]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(cfg.mariadb_url(), pool_pre_ping=True)  # survives a restart in the test
    try:
        with admin.begin() as conn:
            conn.execute(text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
        yield TestDatabase(
            name=name,
            url=cfg.mariadb_url(name),
            jdbc_url=f"jdbc:mysql://{cfg.host}:{cfg.mariadb_port}/{name}",
            user=cfg.mariadb_user,
            password=cfg.mariadb_password,
        )
        with admin.begin() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
    finally:
        admin.dispose()


@contextmanager
def postgres_database(cfg: StackConfig) -> Iterator[TestDatabase]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(cfg.database_url, isolation_level="AUTOCOMMIT", pool_pre_ping=True)
    url = make_url(cfg.database_url).set(database=name)
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield TestDatabase(
            name=name,
            url=url.render_as_string(hide_password=False),
            jdbc_url=f"jdbc:postgresql://{cfg.host}:{cfg.pg_port}/{name}?user={cfg.pg_user}",
            user=cfg.pg_user,
            password="",
        )
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def normalized(value: object) -> object:
    """A column value compared by content across MariaDB and PostgreSQL: aware datetimes in UTC
    without tzinfo (MariaDB's DATETIME has none; the local server runs in UTC), bytes as bytes,
    decimals exact."""
    import datetime as dt

    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    return value


def table_rows(url: str, table: str, order_by: str = "id") -> list[tuple[object, ...]]:
    """Every row of ``table`` (all columns, in the table's column order), ordered, normalised."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            quoted = f"`{table}`" if url.startswith("mysql") else f'"{table}"'
            rows = conn.execute(text(f"SELECT * FROM {quoted} ORDER BY {order_by}")).all()
    finally:
        engine.dispose()
    return [tuple(normalized(v) for v in row) for row in rows]
