"""`sluice connector backfill` through real workers: MariaDB -> jdbc-source (timestamp+incrementing)
-> RocketMQ -> postgres-sink (upsert). A target damaged behind the pipeline's back (rows deleted,
rows made stale) is mended by a filtered backfill requested while a writer keeps updating the source:
every key the condition covers ends equal to its source row (none older), the damage outside the
condition is left as it was, and the request's progress reads done."""

from __future__ import annotations

import random
import threading
import uuid

import pytest
from sqlalchemy import create_engine, text

from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase
from tests.runtime.helpers import wait_for


class Updater(threading.Thread):
    """Updates random rows below ``below`` (a new name, qty + 1, the time now) until stopped."""

    def __init__(self, db: Db, below: int) -> None:
        super().__init__(daemon=True)
        self.db, self.below, self.rng = db, below, random.Random(7)
        self.done = threading.Event()
        self.count = 0

    def run(self) -> None:
        while not self.done.is_set():
            i = self.rng.randrange(1, self.below)
            self.db.run(
                f"UPDATE items SET qty = qty + 1, name = 'u{self.count}', updated = NOW(3) WHERE id = {i}"
            )
            self.count += 1
            self.done.wait(0.01)

    def stop(self) -> int:
        self.done.set()
        self.join(10)
        return self.count


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_a_filtered_backfill_mends_a_damaged_target_while_the_source_is_updated(
    start_worker, sluice, stack_config, runtime_env, mariadb_db: TestDatabase, fresh_schema: str
) -> None:
    from sluice.activities.store import OffsetStore

    sluice.store = OffsetStore(
        stack_config.database_url, schema=runtime_env.store_schema
    )  # the workers' store
    src = Db.of(mariadb_db)
    src.run(
        "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(40), qty INT, updated DATETIME(3) NOT NULL)"
    )
    src.run(
        "INSERT INTO items VALUES "
        + ", ".join(f"({i}, 'n{i}', {i % 7}, '2024-01-01 00:00:00')" for i in range(1, 2001))
    )
    prefix = f"B{uuid.uuid4().hex[:8]}-"
    name = uuid.uuid4().hex[:8]
    start_worker()
    source = f"jdbc-{name}"
    await sluice.create(
        source,
        {
            "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
            "connection.url": src.jdbc_url,
            "connection.user": src.user,
            "connection.password": src.password,
            "mode": "timestamp+incrementing",
            "timestamp.column.name": "updated",
            "incrementing.column.name": "id",
            "table.whitelist": "items",
            "topic.prefix": prefix,
            "read.split.rows": "200",
            "poll.interval.ms": "200",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "true",
        },
    )
    await sluice.create(
        f"pg-{name}",
        {
            "connector.class": "postgres-sink",
            "topics": f"{prefix}items",
            "connection.url": stack_config.database_url,
            "schema": fresh_schema,
            "table": "items",
            "auto.create": "true",
            "insert.mode": "upsert",
            "pk.fields": "id",
            "value.converter": "json",
            "value.converter.schemas.enable": "true",
            "poll.interval.ms": "200",
        },
    )
    engine = create_engine(stack_config.database_url)

    def target() -> dict[int, tuple[object, ...]]:
        with engine.connect() as conn:
            if (
                conn.execute(text("SELECT to_regclass(:t)"), {"t": f'"{fresh_schema}".items'}).scalar()
                is None
            ):
                return {}
            rows = conn.execute(text(f'SELECT id, name, qty FROM "{fresh_schema}".items')).all()
        return {r[0]: tuple(r) for r in rows}

    def source_rows() -> dict[int, tuple[object, ...]]:
        return {r[0]: tuple(r) for r in src.run("SELECT id, name, qty FROM items")}

    await wait_for(lambda: target() == source_rows(), 300, "the target equal to the source")
    with engine.begin() as conn:  # damage behind the pipeline's back
        conn.execute(text(f'DELETE FROM "{fresh_schema}".items WHERE id BETWEEN 500 AND 1400 AND id % 3 = 0'))
        conn.execute(text(f"UPDATE \"{fresh_schema}\".items SET qty = -1, name = 'stale' WHERE id % 50 = 1"))
    outside = {i for i in range(1, 2001) if i % 50 == 1 and not 400 <= i < 1500}
    updater = Updater(src, below=1450)
    updater.start()
    try:
        await wait_for(lambda: updater.count > 20, 60, "the updater under way")
        [request] = await sluice.backfill(source, ["items"], where="id >= 400 AND id < 1500")
        assert request.tables == ("items",) and not request.cancelled

        async def done() -> bool:
            [status] = await sluice.backfills(source)
            return all(t.state == "done" for t in status.tables)

        await wait_for(done, 300, "the backfill done")
    finally:
        writes = updater.stop()
    assert writes > 20, writes
    [status] = await sluice.backfills(source)
    assert status.tables[0].rows == 1100  # every row of the range, once

    def mended() -> bool:
        want, got = source_rows(), target()
        return all(got.get(i) == want[i] for i in want if i not in outside)

    await wait_for(mended, 300, "every key the condition covers equal to its source row")
    got, want = target(), source_rows()
    untouched_outside = {i for i in outside if i >= 1450}  # the updater never reached these
    assert all(got[i][1:] == ("stale", -1) for i in untouched_outside)  # the backfill left them
    assert set(got) == set(want)
    await sluice.delete(source)
    await sluice.delete(f"pg-{name}")
    engine.dispose()
