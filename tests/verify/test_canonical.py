"""The SQL `sluice verify` sends, as text (no services): canonical column texts per dialect and kind,
key comparisons, literals, and the checksum statements; and the report's JSON form.

That both databases print the *same* text for these expressions is proven against the real
databases in test_verify_databases.py; here each rule is pinned so a change to one is deliberate.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal
from typing import Any

import pytest

from sluice.connectors.jdbc.urls import Dialect
from sluice.worker.verify.bisection import Checksum, Segment
from sluice.worker.verify.canonical import (
    Column,
    Kind,
    kind_of,
    marked,
    quote,
    row_sql,
    table_sql,
    unmark,
    value_sql,
)
from sluice.worker.verify.checksums import SideSql, checksums, hash_sql, key_sql, literal
from sluice.worker.verify.model import RowDifference, TableReport, VerifyReport

M, P = Dialect.MYSQL, Dialect.POSTGRESQL


@pytest.mark.parametrize(
    ("dialect", "data_type", "kind"),
    [
        (M, "tinyint", Kind.INTEGER),  # BOOL is TINYINT(1)
        (M, "bigint", Kind.INTEGER),
        (M, "bit", Kind.INTEGER),
        (M, "year", Kind.INTEGER),
        (M, "decimal", Kind.DECIMAL),
        (M, "float", Kind.FLOAT),
        (M, "double", Kind.DOUBLE),
        (M, "datetime", Kind.INSTANT),
        (M, "timestamp", Kind.INSTANT),
        (M, "date", Kind.DATE),
        (M, "time", Kind.TIME),
        (M, "varbinary", Kind.BINARY),
        (M, "longblob", Kind.BINARY),
        (M, "varchar", Kind.TEXT),
        (M, "longtext", Kind.TEXT),  # MariaDB's JSON is LONGTEXT in information_schema
        (M, "enum", Kind.TEXT),
        (P, "boolean", Kind.INTEGER),
        (P, "integer", Kind.INTEGER),
        (P, "numeric", Kind.DECIMAL),
        (P, "real", Kind.FLOAT),
        (P, "double precision", Kind.DOUBLE),
        (P, "timestamp with time zone", Kind.INSTANT),
        (P, "timestamp without time zone", Kind.INSTANT),
        (P, "date", Kind.DATE),
        (P, "time without time zone", Kind.TIME),
        (P, "bytea", Kind.BINARY),
        (P, "jsonb", Kind.JSON),
        (P, "character varying", Kind.TEXT),
        (P, "uuid", Kind.TEXT),
        (P, "USER-DEFINED", Kind.TEXT),
    ],
)
def test_kind_of(dialect: Dialect, data_type: str, kind: Kind) -> None:
    assert kind_of(dialect, data_type) is kind


_TRIM = "TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM `c`))"


@pytest.mark.parametrize(
    ("dialect", "column", "kind", "sql"),
    [
        # integers: as printed; PostgreSQL booleans and MariaDB BITs as 0/1
        (M, Column("c", "int"), Kind.INTEGER, "CAST(`c` AS CHAR)"),
        (M, Column("c", "bit"), Kind.INTEGER, "CAST(CAST(`c` AS UNSIGNED) AS CHAR)"),
        (P, Column("c", "bigint"), Kind.INTEGER, '"c"::text'),
        (P, Column("c", "boolean"), Kind.INTEGER, '"c"::int::text'),
        # decimals: trailing zeros (and a trailing '.') dropped; a scale-0 DECIMAL has none to drop
        (M, Column("c", "decimal", scale=2), Kind.DECIMAL, _TRIM),
        (M, Column("c", "decimal", scale=0), Kind.DECIMAL, "CAST(`c` AS CHAR)"),
        (P, Column("c", "numeric", scale=2), Kind.DECIMAL, 'trim_scale("c")::text'),
        # a source decimal read from a target integer, and the other way round: same text rules
        (P, Column("c", "integer"), Kind.DECIMAL, '"c"::text'),
        (M, Column("c", "decimal", scale=3), Kind.INTEGER, _TRIM),
        # instants: six fraction digits, UTC sessions
        (M, Column("c", "datetime"), Kind.INSTANT, "CAST(CAST(`c` AS DATETIME(6)) AS CHAR)"),
        (
            P,
            Column("c", "timestamp with time zone"),
            Kind.INSTANT,
            "to_char(\"c\", 'YYYY-MM-DD HH24:MI:SS.US')",
        ),
        (P, Column("c", "date"), Kind.INSTANT, "to_char(\"c\"::timestamp, 'YYYY-MM-DD HH24:MI:SS.US')"),
        (M, Column("c", "date"), Kind.DATE, "DATE_FORMAT(`c`, '%Y-%m-%d')"),
        (P, Column("c", "date"), Kind.DATE, "to_char(\"c\"::timestamp, 'YYYY-MM-DD')"),
        (M, Column("c", "time"), Kind.TIME, "TIME_FORMAT(`c`, '%H:%i:%s.%f')"),
        (P, Column("c", "time without time zone"), Kind.TIME, "to_char(\"c\"::interval, 'HH24:MI:SS.US')"),
        # bytes: lower-case hex
        (M, Column("c", "varbinary"), Kind.BINARY, "LOWER(HEX(`c`))"),
        (P, Column("c", "bytea"), Kind.BINARY, "encode(\"c\", 'hex')"),
        # text: UTF-8, one collation for every MariaDB text (no "illegal mix" in CONCAT_WS)
        (M, Column("c", "varchar", charset="utf8mb4"), Kind.TEXT, "`c` COLLATE utf8mb4_bin"),
        (
            M,
            Column("c", "varchar", charset="latin1"),
            Kind.TEXT,
            "CONVERT(`c` USING utf8mb4) COLLATE utf8mb4_bin",
        ),
        (M, Column("c", "longtext"), Kind.JSON, "CONVERT(`c` USING utf8mb4) COLLATE utf8mb4_bin"),
        (P, Column("c", "jsonb"), Kind.JSON, '"c"::text'),
        (P, Column("c", "uuid"), Kind.TEXT, '"c"::text'),
        (P, Column("c", "bytea"), Kind.TEXT, "convert_from(\"c\", 'UTF8')"),
        # identifiers are quoted with their quote doubled
        (M, Column("a`b", "int"), Kind.INTEGER, "CAST(`a``b` AS CHAR)"),
        (P, Column('a"b', "integer"), Kind.INTEGER, '"a""b"::text'),
    ],
)
def test_value_sql(dialect: Dialect, column: Column, kind: Kind, sql: str) -> None:
    assert value_sql(dialect, column, kind) == sql


@pytest.mark.parametrize(
    ("column", "kind", "fetched", "in_row"),
    [
        (Column("c", "int"), Kind.INTEGER, "CAST(`c` AS CHAR)", "`c`"),
        (Column("c", "bit"), Kind.INTEGER, "CAST(CAST(`c` AS UNSIGNED) AS CHAR)", "CAST(`c` AS UNSIGNED)"),
        (
            Column("c", "datetime"),
            Kind.INSTANT,
            "CAST(CAST(`c` AS DATETIME(6)) AS CHAR)",
            "CAST(`c` AS DATETIME(6))",
        ),
        (Column("c", "decimal", scale=2), Kind.DECIMAL, _TRIM, _TRIM),  # text already
        (Column("c", "varbinary"), Kind.BINARY, "LOWER(HEX(`c`))", "LOWER(HEX(`c`))"),
    ],
)
def test_mariadb_prints_numbers_and_dates_itself_inside_a_row(
    column: Column, kind: Kind, fetched: str, in_row: str
) -> None:
    assert value_sql(M, column, kind) == fetched
    assert value_sql(M, column, kind, in_text=True) == in_row
    assert value_sql(P, Column("c", "integer"), kind, in_text=True) == value_sql(
        P, Column("c", "integer"), kind
    )


@pytest.mark.parametrize(
    ("dialect", "column", "kind", "parts"),
    [
        # floats: rounded to 6 / 15 significant digits, zero apart (no logarithm of 0)
        (M, Column("c", "double"), Kind.DOUBLE, ["WHEN `c` = 0 THEN '0'", "14 - FLOOR(LOG10(ABS(`c`)))"]),
        (M, Column("c", "float"), Kind.FLOAT, ["5 - FLOOR(LOG10(ABS(`c`)))"]),
        (P, Column("c", "double precision"), Kind.DOUBLE, ['WHEN "c" = 0', "14 - floor(log(abs(", "'NaN'"]),
        (P, Column("c", "real"), Kind.FLOAT, ["5 - floor(log(abs("]),
        # a float target read for a source decimal: the float's own precision, then trimmed
        (P, Column("c", "double precision"), Kind.DECIMAL, ['trim_scale("c"::numeric)::text']),
    ],
)
def test_float_sql(dialect: Dialect, column: Column, kind: Kind, parts: list[str]) -> None:
    sql = value_sql(dialect, column, kind)
    assert all(p in sql for p in parts), sql


def test_null_marks_and_row_text() -> None:
    assert marked(M, "x") == "COALESCE(CONCAT('=', x), '~')"
    assert marked(P, "x") == "COALESCE('=' || x, '~')"
    assert row_sql(M, ["a", "b"]) == "CONCAT_WS('\x1f', a, b)"
    assert row_sql(P, ["a"]) == "concat_ws('\x1f', a)"
    assert [unmark(v) for v in ("~", "=", "=~", "==x")] == [None, "", "~", "=x"]


def test_quoting() -> None:
    assert quote(M, "t") == "`t`"
    assert table_sql(M, "db.t") == "`db`.`t`"
    assert table_sql(P, "public.My Table") == '"public"."My Table"'


def test_hash_sql_is_the_documented_60_bits() -> None:
    assert hash_sql(M, "s") == "CAST(CONV(SUBSTRING(MD5(s), 18, 15), 16, 10) AS UNSIGNED)"
    assert hash_sql(P, "s") == "('x' || substr(md5(s), 18, 15))::bit(60)::bigint"


@pytest.mark.parametrize(
    ("dialect", "data_type", "sql"),
    [
        (M, "varchar", "CAST(CONVERT(`k` USING utf8mb4) AS BINARY)"),
        (P, "text", '("k" COLLATE "C")'),
        (M, "bigint", "`k`"),
        (P, "uuid", '"k"'),  # ordered as its text already; COLLATE does not apply
    ],
)
def test_string_keys_compare_in_binary_order(dialect: Dialect, data_type: str, sql: str) -> None:
    assert key_sql(dialect, "k", data_type) == sql


@pytest.mark.parametrize(
    ("dialect", "value", "binary", "sql"),
    [
        (M, 5, True, "5"),
        (P, -5, True, "-5"),
        (M, Decimal("10.50"), True, "10.50"),
        (M, True, True, "1"),
        (P, True, True, "TRUE"),
        (M, "a'b\\", True, "X'6127625c'"),  # hex: nothing to escape
        (M, "é", False, "_utf8mb4 X'c3a9'"),  # equality on the column's own collation
        (P, "a'b\\", True, "'a''b\\'"),  # standard_conforming_strings on
        (M, b"\x00\xff", True, "X'00ff'"),
        (P, b"\x00\xff", True, "decode('00ff', 'hex')"),
        (M, dt.datetime(2024, 1, 2, 3, 4, 5), True, "'2024-01-02 03:04:05.000000'"),
        (P, dt.date(2024, 1, 2), True, "'2024-01-02'"),
    ],
)
def test_literal(dialect: Dialect, value: Any, binary: bool, sql: str) -> None:
    assert literal(dialect, value, binary=binary) == sql


def _side(dialect: Dialect, keys: tuple[str, ...], cmp: tuple[str, ...] | None = None) -> SideSql:
    q = tuple(quote(dialect, k) for k in keys)
    return SideSql(dialect, quote(dialect, "t"), q, cmp or q, ("v",), integer_key=True)


def test_arithmetic_checksums_group_by_segment_number() -> None:
    # MariaDB, one plain key: an aggregate per key range, read by range from the key's index
    [mariadb] = _side(M, ("id",)).arithmetic_checksums(origin=-10, width=100, lo=90, hi=500)
    parts = mariadb.split(" UNION ALL ")
    assert [p.split(",")[0] for p in parts] == ["SELECT 1", "SELECT 2", "SELECT 3", "SELECT 4", "SELECT 5"]
    assert parts[0].startswith("SELECT 1, COUNT(*), SUM(CAST(CONV(")
    assert parts[0].endswith("FROM `t` WHERE `id` >= 90 AND `id` < 190")
    assert parts[-1].endswith("FROM `t` WHERE `id` >= 490 AND `id` < 500")
    # more segments than one statement holds: several statements, every segment once
    many = _side(M, ("id",)).arithmetic_checksums(origin=0, width=1, lo=0, hi=2500)
    assert [len(m.split(" UNION ALL ")) for m in many] == [1024, 1024, 452]
    assert many[1].startswith("SELECT 1024, COUNT(*)") and many[2].endswith("`id` >= 2499 AND `id` < 2500")
    # PostgreSQL: one GROUP BY of the segment number
    [pg] = _side(P, ("id",)).arithmetic_checksums(origin=0, width=7, lo=0, hi=70)
    assert pg.startswith('SELECT ("id" - (0)) / 7, COUNT(*), SUM((')
    assert pg.endswith('FROM "t" WHERE "id" >= 0 AND "id" < 70 GROUP BY 1')


def test_segment_checksums_search_the_segment_of_each_row() -> None:
    segs = [Segment(None, ("b",)), Segment(("b",), ("d",)), Segment(("d",), ("f",)), Segment(("x",), None)]
    k = '("k" COLLATE "C")'
    [sql] = _side(P, ("k",), (k,)).segment_checksums(segs, offset=10)
    tree = (
        f"10 + CASE WHEN {k} < 'd' THEN CASE WHEN {k} < 'b' THEN 0 ELSE 1 END "
        f"ELSE CASE WHEN {k} < 'x' THEN 2 ELSE 3 END END"
    )
    assert sql.startswith(f"SELECT {tree}, COUNT(*), SUM(")
    # touching segments are one range; the gap between 'f' and 'x' is left out
    assert sql.endswith(f"WHERE ({k} < 'f') OR ({k} >= 'x') GROUP BY 1")
    # MariaDB, a string key in binary order: no index range, so the same search in one scan
    mk = "CAST(CONVERT(`k` USING utf8mb4) AS BINARY)"
    [msql] = _side(M, ("k",), (mk,)).segment_checksums(segs)
    assert msql.startswith(f"SELECT CASE WHEN {mk} < X'64' THEN") and msql.endswith("GROUP BY 1")


def test_composite_keys_compare_as_tuples() -> None:
    side = _side(M, ("a", "b"))
    assert (
        side.range_sql(Segment((1, "x"), (2, "y"))) == "(`a`, `b`) >= (1, X'78') AND (`a`, `b`) < (2, X'79')"
    )
    assert side.fetch_keys([(1, "x")]).endswith("WHERE (`a`, `b`) IN ((1, _utf8mb4 X'78'))")


def test_fetch_orders_by_key_position_or_binary_expression() -> None:
    plain = _side(P, ("id",)).fetch_rows([Segment((1,), (5,))])
    assert plain == 'SELECT "id", v FROM "t" WHERE "id" >= 1 AND "id" < 5 ORDER BY 1'
    text = _side(P, ("k",), ('("k" COLLATE "C")',)).fetch_rows([Segment(None, None)])
    assert text.endswith('WHERE 1 = 1 ORDER BY ("k" COLLATE "C")')


def test_checksum_rows() -> None:
    # MariaDB sums as DECIMAL, PostgreSQL as numeric; an empty sum is NULL
    assert checksums([(0, 2, Decimal("123")), (Decimal("3"), 1, None)]) == {
        0: Checksum(2, 123),
        3: Checksum(1, 0),
    }


def test_report_json_is_json_safe() -> None:
    table = TableReport(
        "s",
        "t",
        ["id", "at"],
        rows_compared=3,
        missing=[{"id": Decimal("1.50"), "at": dt.datetime(2024, 1, 2, 3, 4, 5)}],
        extra=[{"id": b"\x01\xab", "at": dt.date(2024, 1, 2)}],
        different=[RowDifference({"id": uuid.UUID(int=1), "at": None}, ["v"])],
    )
    report = VerifyReport([table])
    out = json.loads(json.dumps(report.to_json()))
    assert out["equal"] is False
    t = out["tables"][0]
    assert t["missing"] == [{"id": "1.50", "at": "2024-01-02 03:04:05.000000"}]
    assert t["extra"] == [{"id": "01ab", "at": "2024-01-02"}]
    assert t["different"] == [
        {"key": {"id": "00000000-0000-0000-0000-000000000001", "at": None}, "columns": ["v"]}
    ]
    assert VerifyReport([TableReport("s", "t")]).equal
