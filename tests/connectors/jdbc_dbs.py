"""A small SQL helper over the per-test databases of tests/conftest.py (``mariadb_db`` /
``postgres_db``): raw DB-API statements with ``%s`` parameters on either database."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import make_url

from tests.databases import TestDatabase


@dataclass(frozen=True)
class Db:
    dialect: str  # "mysql" | "postgresql"
    name: str
    url: str
    jdbc_url: str
    user: str
    password: str

    @classmethod
    def of(cls, db: TestDatabase) -> Db:
        dialect = "mysql" if db.url.startswith("mysql") else "postgresql"
        return cls(dialect, db.name, db.url, db.jdbc_url, db.user, db.password)

    def connect(self) -> Any:
        url = make_url(self.url)
        if self.dialect == "mysql":
            import pymysql

            return pymysql.connect(
                host=url.host,
                port=url.port,
                user=url.username,
                password=url.password or "",
                database=self.name,
                autocommit=True,
                charset="utf8mb4",
                init_command="SET time_zone = '+00:00'",
            )
        import psycopg

        return psycopg.connect(
            host=url.host,
            port=url.port,
            user=url.username,
            dbname=self.name,
            autocommit=True,
            options="-c TimeZone=UTC",
        )

    def run(self, *statements: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run statements in order; the rows of the last one that returns rows."""
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
