"""MariaDB -> jdbc-source -> RocketMQ -> postgres-sink with real workers: the target table ends
equal to the source table by content, including rows inserted while the pipeline runs, a key gap
of a million ids, exact decimals and NULLs, through Kafka Connect's JSON envelope."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest
from sqlalchemy import create_engine, text

from tests.connectors.jdbc_dbs import Db
from tests.databases import normalized, table_rows
from tests.runtime.helpers import wait_for


def _insert(db: Db, ids: range) -> None:
    db.run(
        "INSERT INTO orders (id, customer, amount, note, created) VALUES "
        + ", ".join(
            f"({i}, 'c{i % 97}', {Decimal(i) / 100 + Decimal('12345678.9')}, "
            + ("NULL" if i % 7 == 0 else f"'n😀{i}'")
            + f", '2024-01-01 00:00:00.{i % 1000:03d}')"
            for i in ids
        )
    )


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_mariadb_table_reaches_postgres_equal_by_content(
    start_worker, sluice, runtime_env, stack_config, mariadb_db, fresh_schema
) -> None:
    src = Db.of(mariadb_db)
    src.run(
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR(20) NOT NULL, "
        "amount DECIMAL(14,2) NOT NULL, note VARCHAR(40), created DATETIME(3) NOT NULL)"
    )
    _insert(src, range(1, 1501))
    _insert(src, range(1_000_001, 1_000_501))  # a key gap of a million ids
    prefix = f"J{uuid.uuid4().hex[:8]}-"
    start_worker()
    name = uuid.uuid4().hex[:8]
    await sluice.create(
        f"jdbc-{name}",
        {
            "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
            "connection.url": src.jdbc_url,
            "connection.user": src.user,
            "connection.password": src.password,
            "mode": "incrementing",
            "incrementing.column.name": "id",
            "table.whitelist": "orders",
            "topic.prefix": prefix,
            "batch.max.rows": "700",
            "poll.interval.ms": "200",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "true",
        },
    )
    await sluice.create(
        f"pg-{name}",
        {
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
    )
    target_url = stack_config.database_url
    engine = create_engine(target_url)

    def target() -> list[tuple[object, ...]]:
        with engine.connect() as conn:
            if (
                conn.execute(text("SELECT to_regclass(:t)"), {"t": f'"{fresh_schema}".orders'}).scalar()
                is None
            ):
                return []
            rows = conn.execute(
                text(f'SELECT id, customer, amount, note, created FROM "{fresh_schema}".orders ORDER BY id')
            ).all()
        return [tuple(normalized(v) for v in r) for r in rows]  # timestamptz -> UTC wall clock

    def equal() -> bool:
        return target() == table_rows(src.url, "orders")

    await wait_for(lambda: len(target()) >= 1000, 300, "the first batches in PostgreSQL")
    _insert(src, range(2_000_001, 2_000_301))  # while it runs
    await wait_for(equal, 300, "the PostgreSQL table equal to the MariaDB table, row by row")
    rows = target()
    assert len(rows) == 2300 and rows[-1][0] == 2_000_300
    assert rows[0][2] == Decimal("12345678.91") and rows[6][3] is None  # exact decimal; NULL kept
    await sluice.delete(f"jdbc-{name}")
    await sluice.delete(f"pg-{name}")
    engine.dispose()
