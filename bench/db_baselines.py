"""The databases' own bulk paths, alone: the physical limit `make bench-db` compares Sluice with.

Each path moves the same table the pipeline moves (``bench_rows``: about 100 bytes a row as text)
from one database into another table, streaming, without Sluice, Spark or RocketMQ:

- PostgreSQL ``COPY (SELECT …) TO STDOUT`` piped into ``COPY … FROM STDIN`` (psycopg 3, two
  connections, chunks handed over as they arrive);
- MariaDB ``SELECT`` through its C client in batch mode (tab-separated, backslash escapes) piped into
  ``LOAD DATA LOCAL INFILE '/dev/stdin'`` of a second client;
- MariaDB ``SELECT`` (same client) piped into PostgreSQL ``COPY FROM STDIN``: the heterogeneous
  migration's own limit (both speak the same tab-separated text with ``\\`` escapes; the bench
  table has no NULLs, which the MariaDB client would print as ``NULL``).

Passwords go to the MariaDB client through ``MYSQL_PWD``, never on a command line.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass

import psycopg
from sqlalchemy.engine import URL

BENCH_TABLE = "bench_rows"
MARIADB_DDL = (
    f"CREATE TABLE {BENCH_TABLE} (id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL, "
    "amount DECIMAL(12,2) NOT NULL, created DATETIME(6) NOT NULL, payload VARCHAR(64) NOT NULL)"
)
PG_DDL = (
    f"CREATE TABLE {BENCH_TABLE} (id bigint NOT NULL PRIMARY KEY, k integer NOT NULL, "
    "amount numeric(12,2) NOT NULL, created timestamp NOT NULL, payload varchar(64) NOT NULL)"
)
COLUMNS = "id, k, amount, created, payload"


@dataclass(frozen=True)
class Timed:
    rows: int
    seconds: float

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("nan")


def _mariadb_client(url: URL, *args: str) -> tuple[list[str], dict[str, str]]:
    command = [
        "mariadb", f"--host={url.host}", f"--port={url.port or 3306}", f"--user={url.username}",
        "--batch", "--skip-column-names", "--quick", "--default-character-set=utf8mb4",
        "--init-command=SET time_zone = '+00:00'", str(url.database), *args,
    ]  # fmt: skip
    return command, {**os.environ, "MYSQL_PWD": url.password or ""}


def fill_mariadb(url: URL, rows: int, table: str = BENCH_TABLE) -> None:
    """``rows`` rows made by the server itself (MariaDB's sequence engine: no client in the way)."""
    sql = (
        f"DROP TABLE IF EXISTS {table}; {MARIADB_DDL.replace(BENCH_TABLE, table)}; "
        f"INSERT INTO {table} SELECT seq, seq % 1000, seq / 100, "
        f"TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq SECOND, RPAD(MD5(seq), 64, 'x') FROM seq_1_to_{rows};"
    )
    command, env = _mariadb_client(url, "-e", sql)
    subprocess.run(command, env=env, check=True, capture_output=True)


def fill_postgres(url: URL, rows: int, table: str = BENCH_TABLE) -> None:
    with psycopg.connect(pg_dsn(url), autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(PG_DDL.replace(BENCH_TABLE, table))
        conn.execute(
            f"INSERT INTO {table} SELECT g, g % 1000, g / 100.0, "
            "timestamp '2024-01-01' + g * interval '1 second', rpad(md5(g::text), 64, 'x') "
            f"FROM generate_series(1, {rows}) g"
        )
        conn.execute(f"VACUUM ANALYZE {table}")


def pg_dsn(url: URL) -> str:
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


def count_rows(dsn: str, table: str) -> int:
    """Rows in ``table`` of a PostgreSQL database (0 while a sink has not created it yet)."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()
            return int(row[0]) if row else 0
    except psycopg.errors.UndefinedTable:
        return 0


def postgres_copy(source: URL, target: URL) -> Timed:
    """COPY out of ``source`` into a fresh table of ``target``, streamed chunk by chunk."""
    with psycopg.connect(pg_dsn(target), autocommit=True) as dst:
        dst.execute(f"DROP TABLE IF EXISTS {BENCH_TABLE}_copy")
        dst.execute(PG_DDL.replace(BENCH_TABLE, f"{BENCH_TABLE}_copy"))
    t0 = time.perf_counter()
    with psycopg.connect(pg_dsn(source)) as src, psycopg.connect(pg_dsn(target)) as dst:
        with (
            src.cursor().copy(f"COPY (SELECT {COLUMNS} FROM {BENCH_TABLE}) TO STDOUT") as out,
            dst.cursor().copy(f"COPY {BENCH_TABLE}_copy FROM STDIN") as into,
        ):
            for chunk in out:
                into.write(chunk)
        dst.commit()
        rows = dst.execute(f"SELECT COUNT(*) FROM {BENCH_TABLE}_copy").fetchone()
    return Timed(int(rows[0]) if rows else 0, time.perf_counter() - t0)


def mariadb_select_load(source: URL, target: URL) -> Timed:
    """SELECT through MariaDB's client piped into LOAD DATA LOCAL INFILE of a second client."""
    create, env = _mariadb_client(
        target,
        "-e",
        f"DROP TABLE IF EXISTS {BENCH_TABLE}_copy; {MARIADB_DDL.replace(BENCH_TABLE, BENCH_TABLE + '_copy')}",
    )
    subprocess.run(create, env=env, check=True, capture_output=True)
    select, src_env = _mariadb_client(source, "-e", f"SELECT {COLUMNS} FROM {BENCH_TABLE}")
    load, dst_env = _mariadb_client(
        target,
        "--local-infile=1",
        "-e",
        f"LOAD DATA LOCAL INFILE '/dev/stdin' INTO TABLE {BENCH_TABLE}_copy CHARACTER SET utf8mb4 "
        f"({COLUMNS}); "
        f"SELECT COUNT(*) FROM {BENCH_TABLE}_copy",
    )
    t0 = time.perf_counter()
    with subprocess.Popen(select, stdout=subprocess.PIPE, env=src_env) as reader:
        loaded = subprocess.run(load, stdin=reader.stdout, env=dst_env, check=True, capture_output=True)
    return Timed(int(loaded.stdout.split()[-1]), time.perf_counter() - t0)


def mariadb_to_postgres(source: URL, target: URL) -> Timed:
    """SELECT through MariaDB's client piped into PostgreSQL COPY FROM STDIN."""
    with psycopg.connect(pg_dsn(target), autocommit=True) as dst:
        dst.execute(f"DROP TABLE IF EXISTS {BENCH_TABLE}_copy")
        dst.execute(PG_DDL.replace(BENCH_TABLE, f"{BENCH_TABLE}_copy"))
    select, env = _mariadb_client(source, "-e", f"SELECT {COLUMNS} FROM {BENCH_TABLE}")
    t0 = time.perf_counter()
    with (
        subprocess.Popen(select, stdout=subprocess.PIPE, env=env) as reader,
        psycopg.connect(pg_dsn(target)) as dst,
    ):
        assert reader.stdout is not None
        with dst.cursor().copy(f"COPY {BENCH_TABLE}_copy FROM STDIN") as into:
            while chunk := reader.stdout.read(1 << 20):
                into.write(chunk)
        dst.commit()
        rows = dst.execute(f"SELECT COUNT(*) FROM {BENCH_TABLE}_copy").fetchone()
    return Timed(int(rows[0]) if rows else 0, time.perf_counter() - t0)
