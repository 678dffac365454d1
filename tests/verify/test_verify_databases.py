"""`sluice verify`'s engine against the real local MariaDB and PostgreSQL (the stack lane).

Equal tables holding every kind of column compare equal in all four pairings; a changed value, a
deleted row and an added row among 100,000 are each found by key, with the changed column named,
and nothing else; string and composite keys are bisected in binary order whatever the collation;
a table without a primary key is compared as a multiset with a warning; keys of incompatible types,
missing tables and columns, and unreachable databases are errors that name the side and place.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import socket
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from sluice.connectors.jdbc.urls import Dialect
from sluice.worker.verify import engine as verify_engine
from sluice.worker.verify.canonical import SEPARATOR
from sluice.worker.verify.checksums import hash_sql, literal
from sluice.worker.verify.engine import verify, verify_keys
from sluice.worker.verify.model import ProgressEvent, RowDifference, TablePair, VerifyError
from tests.databases import TestDatabase


def _run(url: str, *statements: str) -> list[tuple[Any, ...]]:
    """Execute ``statements`` (sent as they are) in one transaction; the last one's rows."""
    engine = create_engine(url)
    rows: list[tuple[Any, ...]] = []
    try:
        with engine.begin() as conn:
            for sql in statements:
                result = conn.exec_driver_sql(sql, execution_options={"no_parameters": True})
                rows = [tuple(r) for r in result.all()] if result.returns_rows else []
    finally:
        engine.dispose()
    return rows


def _is_maria(url: str) -> bool:
    return url.startswith("mysql")


def _load(url: str, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """Bulk-insert ``rows`` (executemany on MariaDB, COPY on PostgreSQL)."""
    engine = create_engine(url)
    try:
        raw = engine.raw_connection()
        try:
            cur = raw.cursor()
            if _is_maria(url):
                marks = ", ".join(["%s"] * len(rows[0]))
                cur.executemany(f"INSERT INTO `{table}` VALUES ({marks})", rows)
            else:
                with cur.copy(f'COPY "{table}" FROM STDIN') as copy:
                    for row in rows:
                        copy.write_row(row)
            raw.commit()
        finally:
            raw.close()
    finally:
        engine.dispose()


@pytest.fixture
def sides(mariadb_db: TestDatabase, postgres_db: TestDatabase) -> dict[str, TestDatabase]:
    return {"mariadb": mariadb_db, "postgres": postgres_db}


PAIRINGS = ["mariadb->postgres", "postgres->mariadb", "mariadb->mariadb", "postgres->postgres"]


def _pairing(sides: dict[str, TestDatabase], pairing: str) -> tuple[TestDatabase, TestDatabase]:
    source, target = pairing.split("->")
    return sides[source], sides[target]


# --- the hash ------------------------------------------------------------------------------------


def test_both_databases_compute_the_same_60_bits(mariadb_db: TestDatabase, postgres_db: TestDatabase) -> None:
    texts = ["", "a", "=10.5" + SEPARATOR + "~", "héllo wörld ✓ 😀 日本", "x" * 5000, "'\\\"%:"]
    for text in texts:
        expected = int(hashlib.md5(text.encode()).hexdigest()[17:32], 16)
        maria = _run(
            mariadb_db.url, f"SELECT {hash_sql(Dialect.MYSQL, literal(Dialect.MYSQL, text, binary=False))}"
        )
        pg = _run(
            postgres_db.url, f"SELECT {hash_sql(Dialect.POSTGRESQL, literal(Dialect.POSTGRESQL, text))}"
        )
        assert int(maria[0][0]) == int(pg[0][0]) == expected, text


# --- every kind of column ------------------------------------------------------------------------

KINDS_DDL = {
    "mariadb": (
        "CREATE TABLE {t} (id BIGINT PRIMARY KEY, i INT, b BOOL, bt BIT(1), d DECIMAL(10,2), "
        "d0 DECIMAL(14,0), "
        "f4 FLOAT, f8 DOUBLE, ts TIMESTAMP(6) NULL, dtm DATETIME(6), dt0 DATETIME, dd DATE, tm TIME(6), "
        "bin VARBINARY(20), txt VARCHAR(50), ch CHAR(5), js JSON, u CHAR(36), "
        "lt VARCHAR(10) CHARACTER SET latin1) CHARACTER SET utf8mb4"
    ),
    "postgres": (
        "CREATE TABLE {t} (id bigint PRIMARY KEY, i integer, b boolean, bt boolean, d numeric, "
        "d0 numeric(20,0), "
        "f4 real, f8 double precision, ts timestamptz, dtm timestamp, dt0 timestamp(0), dd date, tm time, "
        "bin bytea, txt text, ch char(5), js jsonb, u uuid, lt text)"
    ),
}
# The same values written as each database reads them: PostgreSQL's numeric holds 10.5 where
# MariaDB's DECIMAL(10,2) holds 10.50; the PostgreSQL instant is given in another zone.
KINDS_ROWS = {
    "mariadb": [
        "(1, 5, TRUE, b'1', 10.50, 12345678901, 0.1, 0.1, '2024-01-02 03:04:05.123456', "
        "'2024-01-02 03:04:05', '2024-01-02 03:04:05', '2024-01-02', '03:04:05.5', X'00ff10', "
        "'héllo ✓ 😀', 'ab', '{\"a\": 1}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'café')",
        "(2, 0, FALSE, b'0', 0.00, 0, 1e20, -1.5e-10, '1999-12-31 23:59:59.999999', "
        "'1970-01-01 00:00:00.000001', '2000-02-29 12:00:00', '0999-01-01', '23:59:59.999999', "
        "X'', '', '', "
        "'[]', '00000000-0000-0000-0000-000000000000', '')",
        "(3, " + ", ".join(["NULL"] * 18) + ")",
        "(4, -2147483648, TRUE, b'1', -99999999.99, -5, -2.5, 123456789.123456789, '2038-01-19 03:14:07', "
        "'9999-12-31 23:59:59.999999', '1000-01-01 00:00:00', '9999-12-31', '00:00:00', X'deadbeef', "
        "'~', 'NULL', 'null', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'x')",
    ],
    "postgres": [
        "(1, 5, true, true, 10.5, 12345678901, 0.1, 0.1, '2024-01-02 05:04:05.123456+02', "
        "'2024-01-02 03:04:05', '2024-01-02 03:04:05', '2024-01-02', '03:04:05.5', '\\x00ff10', "
        "'héllo ✓ 😀', 'ab', '{\"a\": 1}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'café')",
        "(2, 0, false, false, 0, 0, 1e20, -1.5e-10, '1999-12-31 23:59:59.999999+00', "
        "'1970-01-01 00:00:00.000001', '2000-02-29 12:00:00', '0999-01-01', '23:59:59.999999', "
        "'\\x', '', '', "
        "'[]', '00000000-0000-0000-0000-000000000000', '')",
        "(3, " + ", ".join(["NULL"] * 18) + ")",
        "(4, -2147483648, true, true, -99999999.990, -5, -2.5, 123456789.123456789, "
        "'2038-01-19 03:14:07+00', "
        "'9999-12-31 23:59:59.999999', '1000-01-01 00:00:00', '9999-12-31', '00:00:00', '\\xdeadbeef', "
        "'~', 'NULL', 'null', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'x')",
    ],
}


def _kinds_table(db: TestDatabase, kind: str, table: str) -> None:
    _run(
        db.url,
        KINDS_DDL[kind].format(t=table),
        f"INSERT INTO {table} VALUES " + ", ".join(KINDS_ROWS[kind]),
    )


def _jdbc(db: TestDatabase) -> str:
    return db.jdbc_url if "?" in db.jdbc_url else f"{db.jdbc_url}?user={db.user}&password={db.password}"


@pytest.mark.parametrize("pairing", PAIRINGS)
def test_equal_tables_of_every_kind_are_equal(sides: dict[str, TestDatabase], pairing: str) -> None:
    source, target = _pairing(sides, pairing)
    _kinds_table(source, pairing.split("->")[0], "kinds_source")
    _kinds_table(target, pairing.split("->")[1], "kinds_target")
    events: list[ProgressEvent] = []
    urls = (_jdbc(source), _jdbc(target)) if pairing == "mariadb->postgres" else (source.url, target.url)
    report = verify(*urls, [TablePair("kinds_source", "kinds_target")], progress=events.append)
    table = report.tables[0]
    assert report.equal, report.to_json()
    assert (table.rows_compared, table.key_columns, table.warnings) == (4, ["id"], [])
    assert [e.stage for e in events][0] == "start" and events[-1].stage == "done"

    # and each column's canonical text really is compared: change one value at a time in the target
    target_engine = pairing.split("->")[1]
    changes = {
        "d": "d = 10.51" if target_engine == "mariadb" else "d = 10.501",
        "ts": "ts = ts + INTERVAL 1 MICROSECOND"
        if target_engine == "mariadb"
        else "ts = ts + interval '1 microsecond'",
        "txt": "txt = 'héllo ✓ 😁'",
        "bin": "bin = NULL",
        "ch": "ch = ''",
    }
    for column, assignment in changes.items():
        _run(target.url, f"UPDATE kinds_target SET {assignment} WHERE id = 1")
        table = verify(source.url, target.url, [TablePair("kinds_source", "kinds_target")]).tables[0]
        assert (table.missing, table.extra) == ([], [])
        assert table.different == [RowDifference({"id": 1}, [column])], column
        _run(
            target.url,
            "DELETE FROM kinds_target WHERE id = 1",
            f"INSERT INTO kinds_target VALUES {KINDS_ROWS[target_engine][0]}",
        )


# --- 100,000 rows: one change, one delete, one insert ------------------------------------------

BIG = "orders"
BIG_DDL = {
    "mariadb": f"CREATE TABLE {BIG} (id BIGINT PRIMARY KEY, name VARCHAR(40) NOT NULL, "
    "amount DECIMAL(12,2) NOT NULL, at DATETIME(6) NOT NULL, qty INT NOT NULL, note VARCHAR(20) NULL)",
    "postgres": f"CREATE TABLE {BIG} (id bigint PRIMARY KEY, name varchar(40) NOT NULL, "
    "amount numeric(12,2) NOT NULL, at timestamp NOT NULL, qty integer NOT NULL, note varchar(20) NULL)",
}


def _big_rows(n: int) -> list[tuple[Any, ...]]:
    start = dt.datetime(2024, 1, 1)
    return [
        (
            2 * i,  # even keys: an inserted odd key lands between two existing ones
            f"name {i} {'ü' if i % 13 == 0 else ''}",
            Decimal(i % 100_000) / 100,
            start + dt.timedelta(seconds=i, microseconds=i % 1_000_000),
            i % 977 - 400,
            None if i % 5 == 0 else f"note {i % 50}",
        )
        for i in range(1, n + 1)
    ]


def test_100k_rows_a_change_a_delete_and_an_insert_are_found(
    mariadb_db: TestDatabase, postgres_db: TestDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = _big_rows(100_000)
    for db, kind in ((mariadb_db, "mariadb"), (postgres_db, "postgres")):
        _run(db.url, BIG_DDL[kind])
        _load(db.url, BIG, rows)
    assert verify(mariadb_db.url, postgres_db.url, [TablePair(BIG)]).equal

    _run(
        postgres_db.url,
        f"UPDATE {BIG} SET amount = amount + 0.01 WHERE id = 62674",
        f"DELETE FROM {BIG} WHERE id = 155554",
        f"INSERT INTO {BIG} VALUES (100001, 'new', 1.00, '2024-01-01', 1, NULL)",
    )
    report = verify(mariadb_db.url, postgres_db.url, [TablePair(BIG)])
    table = report.tables[0]
    assert table.rows_compared == 100_000
    assert table.different == [RowDifference({"id": 62674}, ["amount"])]
    assert table.missing == [{"id": 155554}]
    assert table.extra == [{"id": 100001}]
    assert table.warnings == []
    assert report.to_json()["tables"][0]["different"] == [{"key": {"id": 62674}, "columns": ["amount"]}]

    # the other way round, the same three (missing and extra swap); with a first pass of only 8
    # segments, so that the differing ones are bisected (12,500 rows -> 8 x ~1,560) before the fetch
    monkeypatch.setattr(verify_engine, "_MOST_ARITHMETIC", 8)
    monkeypatch.setattr(verify_engine, "_MOST_TREE", 8)
    events: list[ProgressEvent] = []
    back = verify(postgres_db.url, mariadb_db.url, [TablePair(BIG)], progress=events.append).tables[0]
    monkeypatch.undo()
    assert (back.missing, back.extra, back.different) == (
        [{"id": 100001}],
        [{"id": 155554}],
        [RowDifference({"id": 62674}, ["amount"])],
    )
    assert [(e.round, e.segments, e.differing) for e in events if e.stage == "checksum"] == [
        (1, 8, 3),
        (2, 24, 3),
    ]

    # re-checking the reported keys (their JSON form), before and after the target catches up
    keys = [
        *report.to_json()["tables"][0]["missing"],
        *report.to_json()["tables"][0]["extra"],
        {"id": "62674"},
    ]
    again = verify_keys(mariadb_db.url, postgres_db.url, TablePair(BIG), keys)
    assert (again.missing, again.extra, again.different, again.rows_compared) == (
        table.missing,
        table.extra,
        table.different,
        3,
    )
    _run(
        postgres_db.url,
        f"UPDATE {BIG} SET amount = amount - 0.01 WHERE id = 62674",
        f"DELETE FROM {BIG} WHERE id = 100001",
    )
    _load(postgres_db.url, BIG, [rows[77776]])
    assert verify_keys(mariadb_db.url, postgres_db.url, TablePair(BIG), keys).equal


# --- keys --------------------------------------------------------------------------------------

REGIONS = ["Zürich", "zeta", "Alpha", "beta", "Éclair", "delta", "B-side", "日本", "ω", "a", "Z"]


@pytest.mark.parametrize("pairing", ["mariadb->postgres", "postgres->mariadb"])
def test_composite_string_keys_bisect_in_binary_order(
    sides: dict[str, TestDatabase], pairing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ddl = {
        "mariadb": "CREATE TABLE ck (region VARCHAR(20) COLLATE utf8mb4_unicode_ci, n INT, v VARCHAR(20), "
        "PRIMARY KEY (region, n)) CHARACTER SET utf8mb4",
        "postgres": "CREATE TABLE ck (region text, n integer, v text, PRIMARY KEY (region, n))",
    }
    rows = [(r, n, f"{r}-{n}") for r in REGIONS for n in range(300)]
    source, target = _pairing(sides, pairing)
    for db, kind in zip((source, target), pairing.split("->"), strict=True):
        _run(db.url, ddl[kind])
        _load(db.url, "ck", rows)
    # a case- and accent-insensitive collation must not hide these, nor put rows in the wrong range
    _run(
        target.url,
        "UPDATE ck SET v = 'changed' WHERE region = 'Éclair' AND n = 17",
        "DELETE FROM ck WHERE region = 'zeta' AND n = 5",
        "INSERT INTO ck VALUES ('Alpha', 999, 'new')",
    )
    # a first pass of 4 segments, each split in at most 4: bisection over sampled boundaries, round
    # after round, down to segments of at most 40 rows
    monkeypatch.setattr(verify_engine, "_MOST_TREE", 4)
    events: list[ProgressEvent] = []
    report = verify(
        source.url, target.url, [TablePair("ck")], segments=3, fetch_threshold=40, progress=events.append
    )
    table = report.tables[0]
    assert table.key_columns == ["region", "n"]
    assert table.different == [RowDifference({"region": "Éclair", "n": 17}, ["v"])]
    assert table.missing == [{"region": "zeta", "n": 5}]
    assert table.extra == [{"region": "Alpha", "n": 999}]
    assert table.rows_compared == len(rows)
    assert max(e.round for e in events) > 1  # really bisected, not fetched whole


def test_a_single_string_key(mariadb_db: TestDatabase, postgres_db: TestDatabase) -> None:
    keys = [
        f"{prefix}{i}" for prefix in ("k-", "L-", "ä-", "a") for i in range(500)
    ]  # distinct in any collation
    _run(mariadb_db.url, "CREATE TABLE sk (k VARCHAR(20) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT)")
    _run(postgres_db.url, "CREATE TABLE sk (k varchar(20) PRIMARY KEY, v integer)")
    for db in (mariadb_db, postgres_db):
        _load(db.url, "sk", [(k, i) for i, k in enumerate(keys)])
    _run(postgres_db.url, "UPDATE sk SET v = -1 WHERE k = 'ä-250'")
    table = verify(mariadb_db.url, postgres_db.url, [TablePair("sk")], fetch_threshold=100).tables[0]
    assert (table.missing, table.extra) == ([], [])
    assert table.different == [RowDifference({"k": "ä-250"}, ["v"])]


def test_integer_and_numeric_keys_compare_by_value(
    mariadb_db: TestDatabase, postgres_db: TestDatabase
) -> None:
    _run(
        mariadb_db.url,
        "CREATE TABLE t (id INT PRIMARY KEY, v DECIMAL(6,2))",
        "INSERT INTO t VALUES (1, 1.50), (7, 2)",
    )
    _run(
        postgres_db.url,
        "CREATE TABLE t (id numeric(20,0) PRIMARY KEY, v integer)",
        "INSERT INTO t VALUES (1, 2), (7, 2)",
    )
    table = verify(mariadb_db.url, postgres_db.url, [TablePair("t")]).tables[0]
    assert table.different == [RowDifference({"id": 1}, ["v"])]
    assert (table.missing, table.extra) == ([], [])


def test_a_numeric_key_against_a_string_key_is_an_error(
    mariadb_db: TestDatabase, postgres_db: TestDatabase
) -> None:
    _run(mariadb_db.url, "CREATE TABLE t (id BIGINT PRIMARY KEY, v INT)")
    _run(postgres_db.url, "CREATE TABLE t (id varchar(20) PRIMARY KEY, v integer)")
    with pytest.raises(VerifyError) as err:
        verify(mariadb_db.url, postgres_db.url, [TablePair("t")])
    message = str(err.value)
    assert "key column id" in message and "source" in message and "target" in message
    assert "bigint" in message and "character varying" in message


def test_a_table_without_primary_key_is_compared_as_a_multiset(
    mariadb_db: TestDatabase, postgres_db: TestDatabase
) -> None:
    _run(
        mariadb_db.url,
        "CREATE TABLE log (a INT, b VARCHAR(10))",
        "INSERT INTO log VALUES (1, 'x'), (1, 'x'), (2, 'y'), (3, NULL), (5, 'same')",
    )
    _run(
        postgres_db.url,
        "CREATE TABLE log (a integer, b text)",
        "INSERT INTO log VALUES (1, 'x'), (2, 'y'), (3, NULL), (4, NULL), (5, 'same')",
    )
    table = verify(mariadb_db.url, postgres_db.url, [TablePair("log")]).tables[0]
    assert table.key_columns == []
    assert table.missing == [{"a": "1", "b": "x"}]  # one of the two duplicates
    assert table.extra == [{"a": "4", "b": None}]
    assert table.different == []
    assert table.rows_compared == 5
    assert any("no primary key" in w for w in table.warnings)


# --- errors --------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def dead_port() -> Iterator[int]:
    yield _free_port()


def test_an_unreachable_database_is_named_without_its_password(dead_port: int) -> None:
    maria = f"mysql+pymysql://sluice:s3cret-pw@127.0.0.1:{dead_port}/nowhere"
    pg = f"postgresql+psycopg://sluice:s3cret-pw@127.0.0.1:{dead_port}/nowhere"
    with pytest.raises(VerifyError) as err:
        verify(maria, pg, [TablePair("t")])
    assert f"source database 127.0.0.1:{dead_port}/nowhere" in str(err.value)
    assert "s3cret-pw" not in str(err.value)
    with pytest.raises(VerifyError) as err:
        verify(
            f"jdbc:postgresql://127.0.0.1:{dead_port}/nowhere?user=u&password=s3cret-pw",
            maria,
            [TablePair("t")],
        )
    assert f"source database 127.0.0.1:{dead_port}/nowhere" in str(err.value)
    assert "s3cret-pw" not in str(err.value)


def test_missing_tables_and_columns_are_named(mariadb_db: TestDatabase, postgres_db: TestDatabase) -> None:
    _run(mariadb_db.url, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 5), (2, 6)")
    _run(
        postgres_db.url,
        "CREATE TABLE t (id integer PRIMARY KEY, w integer)",
        "INSERT INTO t VALUES (1, 5), (2, 6)",
    )
    where = f"{make_url(postgres_db.url).host}:{make_url(postgres_db.url).port}/{postgres_db.name}"
    cases = [
        (TablePair("t", "nope"), ["target table nope", where]),
        (TablePair("nope"), ["source table nope", mariadb_db.name]),
        (TablePair("t", key_columns=("k",)), ["key column k", "source table t"]),
        (TablePair("t", columns={"id": "id", "v": "v"}), ["target table t", "no column v"]),
    ]
    for pair, parts in cases:
        with pytest.raises(VerifyError) as err:
            verify(mariadb_db.url, postgres_db.url, [pair])
        assert all(p in str(err.value) for p in parts), (str(err.value), parts)
    # without a mapping, the columns one side lacks are named in warnings, the rest compared
    table = verify(mariadb_db.url, postgres_db.url, [TablePair("t")]).tables[0]
    assert table.equal
    assert table.warnings == [
        "columns not in the target, not compared: v",
        "columns only in the target, not compared: w",
    ]
    # with one, target names may differ from the source's
    table = verify(mariadb_db.url, postgres_db.url, [TablePair("t", columns={"id": "id", "v": "w"})]).tables[
        0
    ]
    assert table.equal and table.warnings == []
