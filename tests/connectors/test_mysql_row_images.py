"""connectors.cdc.mysql.row_images against pymysqlreplication, on the local MariaDB: every row image
of every supported column type (edges: NULLs, extremes of each integer, negative and wide
decimals, multi-byte and latin1 text, binary bytes, long strings with two-byte lengths, zero
dates, each DATETIME precision) decodes to the same values of the same Python types, for writes,
updates and deletes; a table with a type it does not decode is left to pymysqlreplication."""

from __future__ import annotations

import contextlib
from typing import Any

from sqlalchemy.engine import make_url

from sluice.connectors.cdc.mysql import binlog
from sluice.connectors.cdc.mysql.changes import ROWS
from sluice.connectors.cdc.mysql.row_images import row_images
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase

COLUMNS = (
    "ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED, mi MEDIUMINT, "
    "miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED, f FLOAT, d DOUBLE, "
    "d1 DECIMAL(5,0), d2 DECIMAL(12,2), d3 DECIMAL(30,10), d4 DECIMAL(65,30), d5 DECIMAL(10,9), "
    "c CHAR(3), c2 CHAR(100), vc VARCHAR(20), vl VARCHAR(300) CHARACTER SET latin1, vb VARBINARY(8), "
    "bn BINARY(4), tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lb LONGBLOB, da DATE, t0 DATETIME, "
    "t1 DATETIME(1), t3 DATETIME(3), t6 DATETIME(6)"
)
LOW = (
    "-128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0, -1.5e-30, -2.2e-308, "
    "-99999, -9999999999.99, -12345678901234567890.0123456789, "
    "-12345678901234567890123456789012345.123456789012345678901234567891, -0.000000001, "
    "'', '', '', '', x'', x'00', '', '', '', x'', '1000-01-01', '1000-01-01 00:00:00', "
    "'1000-01-01 00:00:00.1', '1000-01-01 00:00:00.001', '1000-01-01 00:00:00.000001'"
)
HIGH = (
    "127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807, "
    "18446744073709551615, 3.25e38, 1.7e308, 99999, 9999999999.99, 99999999999999999999.9999999999, "
    "99999999999999999999999999999999999.999999999999999999999999999999, 9.999999999, "
    "'a😀b', REPEAT('é', 100), 'zürich 😀', REPEAT('ÿ', 300), x'00ff7f80', x'ff00', REPEAT('t', 255), "
    "REPEAT('x😀', 3000), REPEAT('m', 70000), x'00010203fffefd', '9999-12-31', '9999-12-31 23:59:59', "
    "'9999-12-31 23:59:59.9', '2024-02-29 12:34:56.789', '2024-02-29 12:34:56.000123'"
)


def _pymysqlreplication(ev: Any) -> list[tuple[Any, Any]]:
    names = [c.name for c in ev.columns]
    deletes = type(ev).__name__.startswith("Delete")
    out = []
    for item in ev.rows:
        if "values" in item:
            image = tuple(item["values"][n] for n in names)
            out.append((image, None) if deletes else (None, image))
        else:
            out.append(tuple(tuple(item[k][n] for n in names) for k in ("before_values", "after_values")))
    return out


def _typed(images: list[tuple[Any, Any]]) -> list[Any]:
    return [tuple(None if im is None else tuple((type(v), v) for v in im) for im in pair) for pair in images]


def test_every_supported_type_decodes_as_pymysqlreplication_does(mariadb_db: TestDatabase) -> None:
    src = Db.of(mariadb_db)
    src.run(
        f"CREATE TABLE every (id INT PRIMARY KEY, {COLUMNS}) CHARACTER SET utf8mb4",
        "CREATE TABLE other (id INT PRIMARY KEY, at TIMESTAMP(3) NULL, e ENUM('a', 'b'))",
    )
    url = make_url(mariadb_db.url)
    params = binlog.Params(str(url.host), int(url.port or 3306), mariadb_db.user, mariadb_db.password)
    with contextlib.closing(src.connect()) as conn:
        start = binlog.binlog_end(conn)
        with contextlib.closing(conn.cursor()) as cur:
            cur.execute("SET SESSION sql_mode = ''")  # zero dates, as old data has them
            for sql in (
                f"INSERT INTO every VALUES (1, {LOW}), (2, {HIGH})",
                "INSERT INTO every (id) VALUES (3)",
                "INSERT INTO every (id, da, t0, t3) VALUES (4, '0000-00-00', '0000-00-00 00:00:00', "
                "'2024-00-10 00:00:00.000')",
                "UPDATE every SET vc = CONCAT(vc, '!'), d2 = -d2, t6 = NULL WHERE id IN (1, 2)",
                "UPDATE every SET ti = 1, vb = x'01' WHERE id = 3",
                "DELETE FROM every WHERE id IN (2, 4)",
                "INSERT INTO other VALUES (1, '2024-05-06 07:08:09.123', 'b')",
            ):
                cur.execute(sql)
    decoded: dict[str, int] = {}
    for ev in binlog.events(params, 0x5B1D5, start[0], start[1], [mariadb_db.name]):
        if ev.kind != ROWS:
            continue
        rows_event = ev.payload
        fast = row_images(rows_event)
        kind = type(rows_event).__name__
        if rows_event.table == "other":
            assert fast is None  # TIMESTAMP and ENUM: pymysqlreplication decodes the event
            decoded["fallback"] = decoded.get("fallback", 0) + 1
            continue
        assert fast is not None, kind
        assert _typed(fast) == _typed(_pymysqlreplication(rows_event)), kind
        decoded[kind] = decoded.get(kind, 0) + len(fast)
    assert decoded == {"WriteRowsEvent": 4, "UpdateRowsEvent": 3, "DeleteRowsEvent": 2, "fallback": 1}
