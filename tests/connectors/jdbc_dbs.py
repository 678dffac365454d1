"""Per-test databases on the running MariaDB and PostgreSQL (the shape of main's ``mariadb_db`` /
``postgres_db`` fixtures: ``.url`` SQLAlchemy URL, ``.jdbc_url``, ``.name``), plus a tiny SQL helper."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pymysql
import pytest

MARIADB = {"host": "127.0.0.1", "port": 13306, "user": "sluice", "password": "sluice"}
POSTGRES = {"host": "127.0.0.1", "port": 15432, "user": "sluice"}


@dataclass(frozen=True)
class Db:
    dialect: str
    name: str
    url: str
    jdbc_url: str

    def connect(self) -> Any:
        if self.dialect == "mysql":
            return pymysql.connect(**MARIADB, database=self.name, autocommit=True, charset="utf8mb4",
                                   init_command="SET time_zone = '+00:00'")  # fmt: skip
        return psycopg.connect(**POSTGRES, dbname=self.name, autocommit=True, options="-c TimeZone=UTC")

    def run(self, *statements: str, params: Any = None) -> list[tuple[Any, ...]]:
        conn = self.connect()
        try:
            out: list[tuple[Any, ...]] = []
            with conn.cursor() as cur:
                for stmt in statements:
                    cur.execute(stmt, params)
                    if cur.description:
                        out = [tuple(r) for r in cur.fetchall()]
            return out
        finally:
            conn.close()


@pytest.fixture
def mariadb_db() -> Iterator[Db]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = pymysql.connect(**MARIADB, autocommit=True)
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    yield Db("mysql", name, f"mysql+pymysql://sluice:sluice@127.0.0.1:13306/{name}",
             f"jdbc:mariadb://127.0.0.1:13306/{name}")  # fmt: skip
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    admin.close()


@pytest.fixture
def postgres_db() -> Iterator[Db]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = psycopg.connect(**POSTGRES, dbname="postgres", autocommit=True)
    admin.execute(f'CREATE DATABASE "{name}"')
    yield Db("postgresql", name, f"postgresql+psycopg://sluice@127.0.0.1:15432/{name}",
             f"jdbc:postgresql://127.0.0.1:15432/{name}?user=sluice")  # fmt: skip
    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.close()
