"""`make bench-verify`: `sluice verify`'s engine on a million rows, MariaDB -> PostgreSQL, against the
row-by-row compare it replaces, in one run against the local stack (a benchmark: nothing is asserted).

1. ROWS rows (an integer key, every other integer, and six columns: text with some non-ASCII,
   DECIMAL(12,2), DATETIME(6)/timestamp, INT, a nullable text, a short category) are written once
   to a tab-separated file and loaded with LOAD DATA LOCAL INFILE into a fresh MariaDB database and
   COPY into a fresh PostgreSQL one; then ANALYZE on both.
2. The baseline: ``sluice.worker.demo.table_equality.compare_table``, which streams both tables
   into Python and compares row by row (MariaDB read through its C client when installed).
3. ``verify`` of the equal tables, three times: rows/s of the median run, and the ratio of (2)'s
   time to it.
4. Ten scattered differences made in the target (four updates of different columns, three
   deletes, three inserts at keys the source does not have), then ``verify`` three times: each run
   must find each of them, by key, with the right column for the updates, and nothing else; the
   median time against (3)'s.

ROWS: first argument or ``BENCH_ROWS`` (default 1,000,000). Prints as it goes; the last line is the
summary: ``bench verify: rows=… equal_rows_per_s=… vs_row_by_row_x=… differences_found=…/10
false_reports=… diff_vs_equal_x=…``. Targets (docs, not asserted): >= 500,000 rows/s equal, >= 5x the
row-by-row compare, differences in <= 2x the equal time.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
import pymysql
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, make_url

from sluice.deploy.local.config import StackConfig
from sluice.worker.demo.table_equality import compare_table
from sluice.worker.settings import settings_or_exit
from sluice.worker.verify.engine import verify
from sluice.worker.verify.model import ProgressEvent, TablePair, VerifyReport

TABLE = "verify_rows"
RUNS = 3  # runs of each verify measured; the summary uses their median
COLUMNS = "id, name, amount, created, qty, note, category"
MARIADB_DDL = (
    f"CREATE TABLE {TABLE} (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(64) NOT NULL, "
    "amount DECIMAL(12,2) NOT NULL, created DATETIME(6) NOT NULL, qty INT NOT NULL, "
    "note VARCHAR(32) NULL, category VARCHAR(8) NOT NULL)"
)
PG_DDL = (
    f"CREATE TABLE {TABLE} (id bigint NOT NULL PRIMARY KEY, name varchar(64) NOT NULL, "
    "amount numeric(12,2) NOT NULL, created timestamp NOT NULL, qty integer NOT NULL, "
    "note varchar(32) NULL, category varchar(8) NOT NULL)"
)
CATEGORIES = ("alpha", "beta", "gamma", "delta", "épsilon")


def write_rows(path: Path, rows: int) -> None:
    """``rows`` rows as tab-separated text both LOAD DATA and COPY read (``\\N``: NULL)."""
    with path.open("w", encoding="utf-8") as f:
        chunk: list[str] = []
        for i in range(1, rows + 1):
            key = 2 * i
            note = "\\N" if i % 7 == 0 else f"note {i % 1000}"
            at = f"2024-01-01 {i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}.{(i * 7919) % 1000000:06d}"
            chunk.append(
                f"{key}\tname-{i:07d}{'-ü' if i % 11 == 0 else ''}\t{(i * 37) % 100000}.{i % 100:02d}\t"
                f"{at}\t{i % 5000 - 2500}\t{note}\t{CATEGORIES[i % len(CATEGORIES)]}\n"
            )
            if len(chunk) == 50_000:
                f.writelines(chunk)
                chunk.clear()
        f.writelines(chunk)


def load_mariadb(url: URL, path: Path) -> None:
    conn = pymysql.connect(
        host=url.host,
        port=url.port or 3306,
        user=url.username,
        password=url.password or "",
        database=url.database,
        charset="utf8mb4",
        local_infile=True,
    )
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
            cur.execute(MARIADB_DDL)
            cur.execute(
                f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE {TABLE} CHARACTER SET utf8mb4 ({COLUMNS})"
            )
            conn.commit()
            cur.execute(f"ANALYZE TABLE {TABLE}")
            cur.fetchall()
    finally:
        conn.close()


def load_postgres(url: URL, path: Path) -> None:
    dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
        conn.execute(PG_DDL)
        with conn.cursor().copy(f"COPY {TABLE} ({COLUMNS}) FROM STDIN") as copy, path.open("rb") as f:
            while block := f.read(1 << 20):
                copy.write(block)
        conn.execute(f"VACUUM ANALYZE {TABLE}")


def _on_both(cfg: StackConfig, maria_sql: str, pg_sql: str) -> None:
    """One administrative statement on each server (outside a transaction: CREATE/DROP DATABASE)."""
    for url, sql in ((cfg.mariadb_url(), maria_sql), (cfg.database_url, pg_sql)):
        engine = create_engine(url, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(text(sql))
        engine.dispose()


def make_databases(cfg: StackConfig, run: str) -> tuple[URL, URL]:
    name = f"verify_{run}"
    _on_both(cfg, f"CREATE DATABASE {name} CHARACTER SET utf8mb4", f"CREATE DATABASE {name}")
    return make_url(cfg.mariadb_url(name)), make_url(cfg.database_url).set(database=name)


def drop_databases(cfg: StackConfig, run: str) -> None:
    name = f"verify_{run}"
    _on_both(cfg, f"DROP DATABASE IF EXISTS {name}", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def timed_verify(source: str, target: str, label: str) -> tuple[VerifyReport, float]:
    rounds: list[str] = []

    def progress(e: ProgressEvent) -> None:
        if e.stage == "checksum":
            rounds.append(f"round {e.round}: {e.segments} segments, {e.differing} differ ({e.seconds:.2f} s)")
        elif e.stage == "fetch":
            rounds.append(f"fetched {e.rows} rows of {e.segments} segments ({e.seconds:.2f} s)")

    t0 = time.perf_counter()
    report = verify(source, target, [TablePair(TABLE)], progress=progress)
    seconds = time.perf_counter() - t0
    table = report.tables[0]
    print(
        f"{label}: {seconds:.2f} s, {table.rows_compared / seconds:,.0f} rows/s, equal={report.equal}, "
        f"{table.segments_checksummed} segments; " + "; ".join(rounds),
        flush=True,
    )
    return report, seconds


def make_differences(target: URL, rows: int) -> dict[str, dict[int, str]]:
    """Ten differences in the target at scattered keys: {kind: {key: column or ''}}."""
    step = rows // 10
    keys = [2 * (step * n + 1 + n * 37) for n in range(10)]
    updates = {
        keys[0]: ("name", "name = 'changed'"),
        keys[3]: ("amount", "amount = amount + 0.01"),
        keys[6]: ("created", "created = created + interval '1 microsecond'"),
        keys[9]: ("note", "note = CASE WHEN note IS NULL THEN 'was null' ELSE NULL END"),
    }
    deletes = [keys[1], keys[4], keys[7]]
    inserts = [keys[2] + 1, keys[5] + 1, keys[8] + 1]  # odd: the source's keys are even
    dsn = target.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for key, (_, assignment) in updates.items():
            conn.execute(f"UPDATE {TABLE} SET {assignment} WHERE id = {key}")
        for key in deletes:
            conn.execute(f"DELETE FROM {TABLE} WHERE id = {key}")
        for key in inserts:
            conn.execute(
                f"INSERT INTO {TABLE} VALUES ({key}, 'inserted', 1.00, '2024-01-01', 1, NULL, 'alpha')"
            )
    return {
        "different": {k: c for k, (c, _) in updates.items()},
        "missing": dict.fromkeys(deletes, ""),
        "extra": dict.fromkeys(inserts, ""),
    }


def score(report: VerifyReport, expected: dict[str, dict[int, str]]) -> tuple[int, int]:
    """(differences found as expected, reports that are not one of them)."""
    table = report.tables[0]
    found = false = 0
    for key in table.missing:
        hit = key["id"] in expected["missing"]
        found, false = found + hit, false + (not hit)
    for key in table.extra:
        hit = key["id"] in expected["extra"]
        found, false = found + hit, false + (not hit)
    for diff in table.different:
        hit = expected["different"].get(diff.key["id"]) is not None and diff.columns == [
            expected["different"][diff.key["id"]]
        ]
        found, false = found + hit, false + (not hit)
    return found, false


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("BENCH_ROWS") or 1_000_000)
    cfg = settings_or_exit().stack
    run = uuid.uuid4().hex[:8]
    maria, pg = make_databases(cfg, run)
    source, target = maria.render_as_string(hide_password=False), pg.render_as_string(hide_password=False)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "rows.tsv"
            t0 = time.perf_counter()
            write_rows(path, rows)
            size_mb = path.stat().st_size / 1e6
            print(f"wrote {rows:,} rows ({size_mb:.0f} MB) in {time.perf_counter() - t0:.1f} s")
            t0 = time.perf_counter()
            load_mariadb(maria, path)
            print(f"MariaDB LOAD DATA LOCAL INFILE: {time.perf_counter() - t0:.1f} s", flush=True)
            t0 = time.perf_counter()
            load_postgres(pg, path)
            print(f"PostgreSQL COPY: {time.perf_counter() - t0:.1f} s", flush=True)

        # The row-by-row baseline first: it also lets both servers finish the work a bulk load
        # leaves behind (InnoDB's purge and page flushing, PostgreSQL's hint bits), which would
        # otherwise land on whichever run comes first.
        src_engine, tgt_engine = create_engine(maria), create_engine(pg)
        t0 = time.perf_counter()
        baseline = compare_table(src_engine, tgt_engine, TABLE)
        row_by_row_s = time.perf_counter() - t0
        src_engine.dispose()
        tgt_engine.dispose()
        rate = baseline.source_rows / row_by_row_s
        print(
            f"row-by-row compare_table: {row_by_row_s:.2f} s, {rate:,.0f} rows/s, equal={baseline.equal}",
            flush=True,
        )

        equal_runs = [timed_verify(source, target, f"verify equal (run {i + 1})") for i in range(RUNS)]
        equal_s = statistics.median(s for _, s in equal_runs)
        print(f"verify equal: median {equal_s:.2f} s of {RUNS} runs", flush=True)

        expected = make_differences(pg, rows)
        diff_runs = [
            timed_verify(source, target, f"verify with 10 differences (run {i + 1})") for i in range(RUNS)
        ]
        diff_s = statistics.median(s for _, s in diff_runs)
        print(f"verify with differences: median {diff_s:.2f} s of {RUNS} runs", flush=True)
        table = diff_runs[0][0].tables[0]
        print(f"  missing: {[k['id'] for k in table.missing]} (expected {sorted(expected['missing'])})")
        print(f"  extra: {[k['id'] for k in table.extra]} (expected {sorted(expected['extra'])})")
        print(
            f"  different: {[(d.key['id'], d.columns) for d in table.different]} "
            f"(expected {sorted(expected['different'].items())})"
        )
        # every run must find the same: the worst run is the one reported
        scores = [score(report, expected) for report, _ in diff_runs]
        found, false = min(f for f, _ in scores), max(f for _, f in scores)
        for report, _ in equal_runs:
            false += sum(len(t.missing) + len(t.extra) + len(t.different) for t in report.tables)
        print(
            f"bench verify: rows={rows} equal_rows_per_s={rows / equal_s:.0f} "
            f"vs_row_by_row_x={row_by_row_s / equal_s:.1f} differences_found={found}/10 "
            f"false_reports={false} diff_vs_equal_x={diff_s / equal_s:.2f}"
        )
    finally:
        drop_databases(cfg, run)


if __name__ == "__main__":
    main()
