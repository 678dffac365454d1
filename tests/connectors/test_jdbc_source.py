"""The JDBC source against real MariaDB and PostgreSQL: exact ranges per mode, positions, key gaps,
parallel splits, schema changes, and bad input. Each test runs on both dialects."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sluice.activities.spark_binding import source_frame
from sluice.connectors.api import open_source_task
from sluice.connectors.jdbc.read import JdbcAuthError, JdbcSourceConfigError
from sluice.connectors.jdbc.source import JdbcSourceConnector, JdbcSourceTask
from sluice.connectors.model import PartitionRange
from sluice.connectors.positions import Position
from tests.connectors.jdbc_dbs import Db

pytestmark = pytest.mark.slow


@pytest.fixture(params=["mysql", "postgresql"])
def db(request: pytest.FixtureRequest, stack_config: object) -> Db:  # stack_config: the lane
    return Db.of(request.getfixturevalue("mariadb_db" if request.param == "mysql" else "postgres_db"))


def config(db: Db, **extra: str) -> dict[str, str]:
    cfg = {
        "connector.class": "jdbc-source",
        "name": "jdbc-test",
        "connection.url": db.jdbc_url,
        "topic.prefix": "jt-",
        "mode": "incrementing",
        "incrementing.column.name": "id",
        "table.whitelist": "items",
    }
    if db.dialect == "mysql":
        cfg.update({"connection.user": db.user, "connection.password": db.password})
    return {**cfg, **extra}


def task(db: Db, **extra: str) -> JdbcSourceTask:
    cfg = config(db, **extra)
    assert JdbcSourceConnector().validate(cfg) == []
    t = open_source_task(JdbcSourceConnector, cfg, 0)
    assert isinstance(t, JdbcSourceTask)
    return t


def values(t: JdbcSourceTask, start: Position, end: Position, table: str = "items") -> list[dict]:
    """The range's record values in offset order, read in-process (no JVM: the source is Arrow)."""
    records = t.read([PartitionRange(table, start, end)]).to_table().sort_by("offset")
    return records.column("value").to_pylist()


def ts_type(db: Db) -> str:
    return "DATETIME(6)" if db.dialect == "mysql" else "timestamp"


def test_incrementing_ranges_are_exact_across_a_million_id_gap(spark, db: Db) -> None:
    ids = [1, 2, 3, 4, 5, 1_000_001, 1_000_002, 1_000_003]
    db.run("CREATE TABLE items (id BIGINT PRIMARY KEY, v VARCHAR(20) NOT NULL)")
    for i in ids:
        db.run("INSERT INTO items VALUES (%s, %s)", params=(i, f"v{i}"))
    t = task(db, **{"read.split.rows": "2"})
    try:
        start = t.earliest_positions()["items"]
        latest = t.latest_positions({})["items"]
        assert latest == Position((1_000_003,))
        first = t.batch_end("items", start, latest, 3)
        assert first == Position((3,))
        second = t.batch_end("items", first, latest, 3)
        assert second == Position((1_000_001,))  # three rows later, across the gap
        assert t.batch_end("items", second, latest, 10) == latest
        assert [v["id"] for v in values(t, start, first)] == [1, 2, 3]
        got = values(t, first, second)
        assert got == [{"id": 4, "v": "v4"}, {"id": 5, "v": "v5"}, {"id": 1_000_001, "v": "v1000001"}]
        # The whole table in one range: split into 2-row sub-ranges read by parallel Spark tasks.
        whole = source_frame(spark, t.read([PartitionRange("items", start, latest)]))
        assert whole.rdd.getNumPartitions() == 4
        rows = whole.collect()
        assert sorted(r["offset"] for r in rows) == ids
        assert {r["key"].asDict()["id"] for r in rows} == set(ids)
        assert {r["topic"] for r in rows} == {"jt-items"}
    finally:
        t.close()


def test_timestamp_incrementing_positions_are_composite_and_delay_holds_back_new_rows(db: Db) -> None:
    db.run(f"CREATE TABLE items (id INT PRIMARY KEY, ts {ts_type(db)} NOT NULL, v VARCHAR(10))")
    rows = [
        (1, "2024-01-01 00:00:01"),
        (2, "2024-01-01 00:00:01"),
        (3, "2024-01-01 00:00:01"),
        (4, "2024-01-01 00:00:02"),
        (5, "2999-01-01 00:00:00"),
    ]
    for i, ts in rows:
        db.run("INSERT INTO items VALUES (%s, %s, %s)", params=(i, ts, f"r{i}"))
    t = task(
        db,
        mode="timestamp+incrementing",
        **{"timestamp.column.name": "ts", "timestamp.delay.interval.ms": "1000"},
    )
    try:
        start = t.earliest_positions()["items"]
        latest = t.latest_positions({})["items"]
        ts2 = 1704067202 * 1_000_000
        assert latest == Position((ts2, 4))  # the row of year 2999 is not before now - delay
        mid = t.batch_end("items", start, latest, 2)
        assert mid == Position((1704067201 * 1_000_000, 2))  # inside one timestamp, broken by id
        assert [v["id"] for v in values(t, start, mid)] == [1, 2]
        assert sorted(v["id"] for v in values(t, mid, latest)) == [3, 4]
        # An update moves a row past the position reached: the next range sees it again.
        db.run("UPDATE items SET ts = %s, v = 'new' WHERE id = 1", params=("2024-01-01 00:00:03",))
        later = t.latest_positions({"items": latest})["items"]
        assert later == Position((1704067203 * 1_000_000, 1))
        assert values(t, latest, later)[0]["v"] == "new"
    finally:
        t.close()


def test_timestamp_mode_batches_end_on_a_timestamp_boundary(db: Db) -> None:
    db.run(f"CREATE TABLE items (id INT PRIMARY KEY, ts {ts_type(db)} NOT NULL)")
    for i, sec in enumerate([1, 1, 1, 2, 3], start=1):
        db.run("INSERT INTO items VALUES (%s, %s)", params=(i, f"2024-01-01 00:00:0{sec}"))
    t = task(db, mode="timestamp", **{"timestamp.column.name": "ts"})
    try:
        start, latest = t.earliest_positions()["items"], t.latest_positions({})["items"]
        end = t.batch_end("items", start, latest, 2)
        assert end == Position((1704067201 * 1_000_000,))  # all three rows of second 1
        assert sorted(v["id"] for v in values(t, start, end)) == [1, 2, 3]
        assert sorted(v["id"] for v in values(t, end, latest)) == [4, 5]
    finally:
        t.close()


def test_a_column_added_to_the_table_appears_in_later_records(db: Db) -> None:
    db.run("CREATE TABLE items (id INT PRIMARY KEY, a VARCHAR(5))", "INSERT INTO items VALUES (1, 'x')")
    t = task(db)
    try:
        start = t.earliest_positions()["items"]
        first = t.latest_positions({})["items"]
        assert values(t, start, first) == [{"id": 1, "a": "x"}]
        db.run("ALTER TABLE items ADD COLUMN b DECIMAL(10,2)", "INSERT INTO items VALUES (2, 'y', 1.25)")
        second = t.latest_positions({"items": first})["items"]
        got = values(t, first, second)
        assert [(v["id"], v["a"], str(v["b"])) for v in got] == [(2, "y", "1.25")]
    finally:
        t.close()


def test_bulk_reads_a_snapshot_per_poll_interval(db: Db) -> None:
    db.run("CREATE TABLE items (id INT PRIMARY KEY)", "INSERT INTO items VALUES (1), (2)")
    t = task(db, mode="bulk", **{"poll.interval.ms": "3600000"})
    try:
        start = t.earliest_positions()["items"]
        snap = t.latest_positions({})["items"]
        assert snap.key == (1,) and snap.get("at")
        assert t.latest_positions({"items": snap})["items"] == snap  # not before the interval
        assert [v["id"] for v in values(t, start, snap)] == [1, 2]
    finally:
        t.close()


def test_custom_query_is_one_partition_with_its_own_topic(db: Db) -> None:
    db.run(
        "CREATE TABLE items (id INT PRIMARY KEY, s VARCHAR(5))",
        "INSERT INTO items VALUES (1, 'ab'), (2, 'b'), (3, 'ac')",
    )
    q = "SELECT id, s FROM items WHERE s LIKE 'a%'"
    t = task(db, query=q, **{"table.whitelist": "", "topic.prefix": "q-rows"})
    try:
        assert t.partitions() == ["query"]
        start, latest = t.earliest_positions()["query"], t.latest_positions({})["query"]
        records = t.read([PartitionRange("query", start, latest)]).to_table()
        assert set(records.column("topic").to_pylist()) == {"q-rows"}
        assert [v["id"] for v in values(t, start, latest, "query")] == [1, 3]
    finally:
        t.close()


def test_a_read_loads_no_pyspark(db: Db) -> None:
    """Sources speak Arrow (#18): reading records, hashed offsets included, needs no PySpark (no
    JVM); the runtime's Spark binding is the one place that does."""
    db.run(
        f"CREATE TABLE items (id INT PRIMARY KEY, ts {ts_type(db)} NOT NULL)",
        "INSERT INTO items VALUES (1, '2024-01-01 00:00:01'), (2, '2024-01-01 00:00:02')",
    )
    script = (
        "import json, sys\n"
        "from sluice.connectors.api import open_source_task\n"
        "from sluice.connectors.jdbc.source import JdbcSourceConnector\n"
        "from sluice.connectors.model import PartitionRange\n"
        "t = open_source_task(JdbcSourceConnector, json.loads(sys.argv[1]), 0)\n"
        "r = PartitionRange('items', t.earliest_positions()['items'], t.latest_positions({})['items'])\n"
        "print(t.read([r]).to_table().num_rows, any(m.startswith('pyspark') for m in sys.modules))\n"
    )
    cfg = config(db, mode="timestamp", **{"timestamp.column.name": "ts"})
    command = [sys.executable, "-c", script, json.dumps(cfg)]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.split() == ["2", "False"]


def test_tables_are_dealt_round_robin_one_task_per_table(db: Db) -> None:
    db.run(*[f"CREATE TABLE {n} (id INT PRIMARY KEY)" for n in ("a", "b", "c", "skipped")])
    cfg = config(db, **{"table.whitelist": "", "table.exclude.list": "skipped"})
    connector = JdbcSourceConnector()
    assert connector.validate(cfg) == []
    canonical = connector.full_config_def("jdbc-test").canonical(cfg)
    tasks = connector.task_configs(canonical, 2)
    assert [c["table.whitelist"] for c in tasks] == ["a,c", "b"]


def test_wrong_credentials_fail_clearly_without_the_password(db: Db) -> None:
    db.run("CREATE TABLE items (id INT PRIMARY KEY)")
    if db.dialect == "postgresql":
        pytest.skip("the local PostgreSQL trusts local connections: no password is checked")
    t = task(db, **{"connection.password": "not-the-password-42"})
    with pytest.raises(JdbcAuthError) as caught:
        t.latest_positions({})
    assert "connector 'jdbc-test'" in str(caught.value) and "refused the credentials" in str(caught.value)
    assert "not-the-password-42" not in str(caught.value)


def test_missing_table_names_connector_and_table(db: Db) -> None:
    t = task(db, **{"table.whitelist": "nope"})
    with pytest.raises(JdbcSourceConfigError, match="connector 'jdbc-test'.*table 'nope' does not exist"):
        t.latest_positions({})


def test_unsupported_column_type_names_connector_table_and_column(db: Db) -> None:
    kind = "POINT" if db.dialect == "mysql" else "point"
    db.run(f"CREATE TABLE items (id INT PRIMARY KEY, spot {kind})")
    t = task(db)
    with pytest.raises(
        JdbcSourceConfigError, match="connector 'jdbc-test' table 'items' column 'spot'.*point"
    ):
        t.latest_positions({})


def test_incrementing_column_must_be_an_integer_and_not_null(db: Db) -> None:
    db.run("CREATE TABLE items (id VARCHAR(5) PRIMARY KEY, n INT)")
    with pytest.raises(
        JdbcSourceConfigError, match="column 'id': the incrementing column must be an integer"
    ):
        task(db).latest_positions({})
    with pytest.raises(JdbcSourceConfigError, match="column 'n' is nullable"):
        task(db, **{"incrementing.column.name": "n"}).latest_positions({})
