"""mysql-cdc's initial snapshot against the local MariaDB: existing rows read in key chunks under
concurrent inserts/updates/key changes/deletes end, with the binlog's changes, equal to the source
by content; a snapshot resumed by a new task after a crash reads every row exactly once, and the
binlog resumes where capture started (kept in the snapshot positions), not where the new task
started."""

from __future__ import annotations

import uuid
from decimal import Decimal

from sluice.connectors.cdc.mysql.snapshot import _column_values
from sluice.connectors.cdc.mysql.source import MySqlCdcConnector, MySqlCdcTask
from sluice.connectors.cdc.snapshot import ChunkQuery
from tests.cdc.mysql import source_config
from tests.cdc.snapshot import (
    concurrent_snapshot_converges,
    initial_only_reads_the_rows_and_stops,
    resumed_snapshot_reads_each_row_once,
)
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase


def _maker(db: TestDatabase, chunk: int, mode: str = "initial") -> MySqlCdcTask:
    raw = {
        "name": f"cdc-{uuid.uuid4().hex[:6]}",
        **source_config(db, "shop", **{"snapshot.chunk.size": str(chunk)}),
    }
    if mode == "initial":
        del raw["snapshot.mode"]  # Debezium's default
    else:
        raw["snapshot.mode"] = mode
    connector = MySqlCdcConnector()
    assert connector.validate(raw) == []
    config = connector.parse(raw)
    assert config["snapshot.mode"] == mode
    connector.start(config)
    return MySqlCdcTask(config, 0)


def test_a_snapshot_under_concurrent_writes_converges(mariadb_db: TestDatabase) -> None:
    concurrent_snapshot_converges(
        Db.of(mariadb_db), lambda: _maker(mariadb_db, 64), lambda t: f"{mariadb_db.name}.{t}"
    )


def test_a_resumed_snapshot_reads_each_row_once(mariadb_db: TestDatabase) -> None:
    resumed_snapshot_reads_each_row_once(
        Db.of(mariadb_db), lambda: _maker(mariadb_db, 40), lambda t: f"{mariadb_db.name}.{t}"
    )


def test_initial_only_reads_the_rows_and_no_binlog(mariadb_db: TestDatabase) -> None:
    initial_only_reads_the_rows_and_stops(
        Db.of(mariadb_db),
        lambda: _maker(mariadb_db, 3, "initial_only"),
        lambda t: f"{mariadb_db.name}.{t}",
    )


#: A column of each kind MySQL/MariaDB has, with its edges (zero dates, BIT, unsigned, NULL).
TYPED_TABLE = """CREATE TABLE typed (
    id BIGINT UNSIGNED PRIMARY KEY, ti TINYINT, si SMALLINT UNSIGNED, mi MEDIUMINT, i INT, bi BIGINT,
    f FLOAT, d DOUBLE, dec1 DECIMAL(30,10), b1 BIT(1), b9 BIT(9), y YEAR, dt DATETIME(6),
    ts TIMESTAMP(3) NULL, dz DATETIME, da DATE, tm TIME(6), ch CHAR(3), vc VARCHAR(20),
    tx TEXT, bl BLOB, vb VARBINARY(8), e ENUM('a','b'), st SET('x','y'), js JSON
)"""
TYPED_ROWS = [
    "(1, -128, 65535, -8388608, -2147483648, -9223372036854775808, 1.5, -2.25, "
    "'-12345678901234567890.0123456789', b'1', b'100000001', 1901, '1000-01-01 00:00:00.000001', "
    "'1970-01-01 00:00:01.000', '0000-00-00 00:00:00', '0000-00-00', '-838:59:59.000000', 'ab', "
    "'zażółć', 'text €', x'00ff10', x'', 'b', 'x,y', '{\"k\": [1, 2.5, null]}')",
    "(18446744073709551615, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
]


def test_a_chunk_has_the_values_pymysql_reads_of_every_kind_of_column(mariadb_db: TestDatabase) -> None:
    """The chunk's rows come from the compiled reader (asyncmy); every value, of every kind of
    column, equals what PyMySQL reads of it mapped the snapshot's way, value and Python type."""
    db = Db.of(mariadb_db)
    db.run(
        "SET SESSION sql_mode = ''", TYPED_TABLE, *(f"INSERT INTO typed VALUES {row}" for row in TYPED_ROWS)
    )
    task = _maker(mariadb_db, 10)
    table = f"{mariadb_db.name}.typed"
    chunk = task._read_chunk(ChunkQuery(table, ("id",)))
    mapped = chunk.columns
    raw = db.run("SELECT * FROM typed ORDER BY id")
    expected = [_column_values(c, [row[i] for row in raw], "x") for i, c in enumerate(mapped)]
    assert [[(v, type(v)) for v in column] for column in chunk.values] == [
        [(v, type(v)) for v in column] for column in expected
    ]
    assert chunk.row_keys == [[1], [18446744073709551615]]
    after = task._read_chunk(ChunkQuery(table, ("id",), after=[1]))  # a key bound as a parameter
    assert after.column("id") == [Decimal(18446744073709551615)]
    task.close()
