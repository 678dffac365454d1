"""The per-test database fixtures and the local MariaDB's settings that connectors rely on."""

from __future__ import annotations

from sqlalchemy import create_engine, text

from tests.databases import TestDatabase


def test_mariadb_database_is_fresh_utf8mb4_with_row_binlog(mariadb_db: TestDatabase) -> None:
    engine = create_engine(mariadb_db.url)
    try:
        with engine.begin() as conn:
            assert conn.execute(text("SHOW TABLES")).all() == []
            conn.execute(text("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))"))
            conn.execute(text("INSERT INTO t VALUES (1, '😀')"))
            assert conn.execute(text("SELECT v FROM t")).scalar_one() == "😀"
            settings = dict(
                conn.execute(
                    text(
                        "SHOW VARIABLES WHERE Variable_name IN "
                        "('log_bin', 'binlog_format', 'binlog_row_image', 'binlog_row_metadata', 'time_zone')"
                    )
                ).all()
            )
            grants = " ".join(row[0] for row in conn.execute(text("SHOW GRANTS")).all())
    finally:
        engine.dispose()
    assert settings == {
        "log_bin": "ON",
        "binlog_format": "ROW",
        "binlog_row_image": "FULL",
        "binlog_row_metadata": "FULL",
        "time_zone": "+00:00",
    }
    assert "GRANT ALL PRIVILEGES ON *.*" in grants


def test_postgres_database_is_fresh(postgres_db: TestDatabase) -> None:
    engine = create_engine(postgres_db.url)
    try:
        with engine.begin() as conn:
            assert conn.execute(text("SELECT current_database()")).scalar_one() == postgres_db.name
            tables = conn.execute(text("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"))
            assert tables.scalar_one() == 0
    finally:
        engine.dispose()
