"""Proof that a source table and its copy hold the same rows, by content, across databases.

Two databases never print the same text for the same data: MariaDB's DECIMAL(10,2) ``10.50`` may
come back from a PostgreSQL NUMERIC as ``10.5``, an instant is ``2024-01-02 03:04:05.000000`` in one
and ``2024-01-02 03:04:05+00`` in the other, a BOOLEAN is ``1`` or ``t``. Each value is read as text
(both sessions at UTC) and normalised by its *source* column's kind (``Kind``) to one canonical text:
exact decimals without trailing zeros, instants with six fraction digits, booleans as 0/1, bytes as
lower-case hex. Nothing is rounded: a decimal that lost a digit or an instant that moved by a
microsecond is a difference.

Rows are streamed from both sides ordered by the (integer) key and merged, so memory stays flat
for any table size; the result counts missing, extra and differing rows, keeps the first few
examples, and carries a SHA-256 digest of each side's canonical rows (equal digests: the one-line
proof). MariaDB is read through its C client in batch mode when it is installed: PyMySQL decodes
values in pure Python, an order of magnitude slower on a busy 2-core machine.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum

from sqlalchemy import text
from sqlalchemy.engine import Engine

_FETCH = 10_000
_EXAMPLES = 5
Row = tuple[str | None, ...]


class Kind(StrEnum):
    INTEGER = "integer"
    DECIMAL = "decimal"
    INSTANT = "instant"  # DATETIME, TIMESTAMP (with or without a zone)
    BINARY = "binary"
    TEXT = "text"  # everything else compares as printed (dates, strings, JSON text)


_MARIADB_KINDS = {
    **dict.fromkeys(("tinyint", "smallint", "mediumint", "int", "bigint", "year", "bit"), Kind.INTEGER),
    **dict.fromkeys(("decimal", "float", "double"), Kind.DECIMAL),
    **dict.fromkeys(("datetime", "timestamp"), Kind.INSTANT),
    **dict.fromkeys(("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"), Kind.BINARY),
}
_PG_KINDS = {
    **dict.fromkeys(("smallint", "integer", "bigint", "boolean"), Kind.INTEGER),
    **dict.fromkeys(("numeric", "real", "double precision"), Kind.DECIMAL),
    **dict.fromkeys(("timestamp without time zone", "timestamp with time zone"), Kind.INSTANT),
    "bytea": Kind.BINARY,
}
_BOOLEAN_TEXT = {"t": "1", "f": "0", "true": "1", "false": "0"}


def _integer(v: str) -> str:
    return _BOOLEAN_TEXT.get(v, v)


def _decimal(v: str) -> str:
    if "e" in v or "E" in v:
        v = format(Decimal(v), "f")
    if "." in v:
        v = v.rstrip("0").rstrip(".")
    return "0" if v in ("-0", "") else v


def _instant(v: str) -> str:
    if v.endswith("+00"):  # PostgreSQL's timestamptz in a UTC session
        v = v[:-3]
    elif v.endswith("+00:00"):
        v = v[:-6]
    v = v.replace("T", " ")
    if len(v) == 19:
        return v + ".000000"
    return v.ljust(26, "0") if len(v) < 26 else v


def _binary(v: str) -> str:
    return v[2:].lower() if v.startswith("\\x") else v.lower()


def _same(v: str) -> str:
    return v


NORMALISERS: dict[Kind, Callable[[str], str]] = {
    Kind.INTEGER: _integer,
    Kind.DECIMAL: _decimal,
    Kind.INSTANT: _instant,
    Kind.BINARY: _binary,
    Kind.TEXT: _same,
}


def canonical(value: str | None, kind: Kind) -> str | None:
    """The canonical text of a value a database printed for a column of ``kind``."""
    return None if value is None else NORMALISERS[kind](value)


@dataclass
class TableComparison:
    """The verdict for one table; ``equal`` only when both sides have exactly the same rows."""

    table: str
    columns: list[str]
    source_rows: int = 0
    target_rows: int = 0
    missing: int = 0  # in the source, not in the target
    extra: int = 0  # in the target, not in the source
    differing: int = 0  # same key, different content
    problem: str = ""  # the comparison could not be made (e.g. a column missing in the target)
    examples: list[str] = field(default_factory=list)
    source_digest: str = ""
    target_digest: str = ""

    @property
    def equal(self) -> bool:
        return not self.problem and self.missing == self.extra == self.differing == 0

    def summary(self) -> str:
        if self.problem:
            return f"{self.table}: NOT COMPARABLE — {self.problem}"
        if self.equal:
            return (
                f"{self.table}: EQUAL — {self.source_rows:,} rows × {len(self.columns)} columns, "
                f"sha256 {self.source_digest[:16]}… on both sides"
            )
        return (
            f"{self.table}: DIFFERENT — source {self.source_rows:,} rows, target {self.target_rows:,}; "
            f"{self.missing:,} missing, {self.extra:,} extra, {self.differing:,} differing"
        )


def _columns(engine: Engine, table: str) -> dict[str, str]:
    """Column name -> data type, in table order (information_schema works on both databases)."""
    schema = "DATABASE()" if _is_mariadb(engine) else "current_schema()"
    with engine.connect() as conn:
        return dict(
            conn.execute(
                text(
                    "SELECT column_name, data_type FROM information_schema.columns "
                    f"WHERE table_schema = {schema} AND table_name = :t ORDER BY ordinal_position"
                ),
                {"t": table},
            ).all()
        )


def _is_mariadb(engine: Engine) -> bool:
    return engine.url.get_backend_name() in ("mysql", "mariadb")


def _rows(
    engine: Engine, table: str, columns: Sequence[str], kinds: Sequence[Kind], key: str
) -> Iterator[Row]:
    """Canonical rows ordered by ``key``: every value read as text, then normalised by ``kinds``."""
    norms = [NORMALISERS[k] for k in kinds]
    if _is_mariadb(engine) and shutil.which("mariadb"):
        yield from _mariadb_client_rows(engine, table, columns, kinds, key, norms)
        return
    quote = engine.dialect.identifier_preparer.quote
    if _is_mariadb(engine):
        exprs = [
            f"HEX({quote(c)})" if k is Kind.BINARY else f"CAST({quote(c)} AS CHAR)"
            for c, k in zip(columns, kinds, strict=True)
        ]
    else:
        exprs = [f"{quote(c)}::text" for c in columns]
    # Qualified: an output column named like the key (``id::text`` is named ``id``) would sort as text.
    sql = f"SELECT {', '.join(exprs)} FROM {quote(table)} ORDER BY {quote(table)}.{quote(key)}"
    with engine.connect().execution_options(stream_results=True, max_row_buffer=_FETCH) as conn:
        for part in conn.exec_driver_sql(sql).partitions(_FETCH):
            for row in part:
                yield tuple([None if v is None else f(v) for f, v in zip(norms, row, strict=True)])


def _unescape(v: str) -> str:
    """Undo the client's batch-mode escaping of tab, newline, NUL and backslash."""
    out, i = [], 0
    while i < len(v):
        c = v[i]
        if c == "\\" and i + 1 < len(v):
            i += 1
            c = {"n": "\n", "t": "\t", "0": "\0"}.get(v[i], v[i])
        out.append(c)
        i += 1
    return "".join(out)


def _mariadb_client_rows(
    engine: Engine,
    table: str,
    columns: Sequence[str],
    kinds: Sequence[Kind],
    key: str,
    norms: Sequence[Callable[[str], str]],
) -> Iterator[Row]:
    """MariaDB's C client in batch mode. Each value is printed as ``=value`` or ``NULL`` (so a NULL
    is never confused with the text 'NULL'), binary columns as hex; the password goes through the
    environment, never the command line."""
    exprs = [
        f"IFNULL(CONCAT('=', {'HEX(`' + c + '`)' if k is Kind.BINARY else '`' + c + '`'}), 'NULL')"
        for c, k in zip(columns, kinds, strict=True)
    ]
    url = engine.url
    command = [
        "mariadb", f"--host={url.host or '127.0.0.1'}", f"--port={url.port or 3306}",
        f"--user={url.username}", "--batch", "--skip-column-names", "--quick",
        "--default-character-set=utf8mb4", "--init-command=SET time_zone = '+00:00'", str(url.database),
        "-e", f"SELECT {', '.join(exprs)} FROM `{table}` ORDER BY `{table}`.`{key}`",
    ]  # fmt: skip
    env = {**os.environ, "MYSQL_PWD": url.password or ""}
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            fields = line.decode("utf-8").rstrip("\n").split("\t")
            yield tuple(
                [
                    None if v == "NULL" else f(_unescape(v[1:]) if "\\" in v else v[1:])
                    for f, v in zip(norms, fields, strict=True)
                ]
            )
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode:
        raise RuntimeError(f"reading {table} from MariaDB database {url.database} failed: {err.strip()}")


def _key(row: Row, index: int) -> tuple[int, int]:
    value = row[index]
    return (0, 0) if value is None else (1, int(value))


def column_kinds(engine: Engine, table: str) -> dict[str, Kind]:
    """``table``'s columns in order, each with the kind its type in ``engine``'s database compares as
    (empty when the table does not exist)."""
    kind_map = _MARIADB_KINDS if _is_mariadb(engine) else _PG_KINDS
    return {c: kind_map.get(t.lower(), Kind.TEXT) for c, t in _columns(engine, table).items()}


def canonical_rows(
    engine: Engine, table: str, columns: Sequence[str], kinds: Sequence[Kind], key: str = "id"
) -> Iterator[Row]:
    """``table``'s rows of ``engine`` as canonical text (``columns`` read as ``kinds``), ordered by
    the integer ``key``: one side of :func:`compare_rows`."""
    return _rows(engine, table, columns, kinds, key)


def compare_table(source: Engine, target: Engine, table: str, key: str = "id") -> TableComparison:
    """Compare ``table`` in ``source`` and ``target`` row by row on the source's columns."""
    src_kinds = column_kinds(source, table)
    if not src_kinds:
        raise ValueError(f"table {table} does not exist in the source database {source.url.database}")
    src_cols, kinds = list(src_kinds), list(src_kinds.values())
    tgt_cols = _columns(target, table)
    if not tgt_cols:
        return TableComparison(table, src_cols, problem="the table does not exist in the target")
    absent = [c for c in src_cols if c not in tgt_cols]
    if absent:
        return TableComparison(table, src_cols, problem=f"columns missing in the target: {', '.join(absent)}")
    return compare_rows(
        table,
        src_cols,
        key,
        _rows(source, table, src_cols, kinds, key),
        _rows(target, table, src_cols, kinds, key),
    )


def compare_rows(
    table: str, columns: Sequence[str], key: str, source: Iterator[Row], target: Iterator[Row]
) -> TableComparison:
    """Merge two streams of canonical rows, each ordered by the integer ``key`` column, into the
    verdict: missing, extra and differing rows with examples, and each side's digest. The target
    may be any store whose values were made canonical the same way (`make demo-search`: documents)."""
    src_cols = list(columns)
    result = TableComparison(table, src_cols)
    k = src_cols.index(key)
    src_hash, tgt_hash = hashlib.sha256(), hashlib.sha256()
    src_it, tgt_it = source, target
    s, t = next(src_it, None), next(tgt_it, None)

    def example(text: str) -> None:
        if len(result.examples) < _EXAMPLES:
            result.examples.append(text)

    while s is not None or t is not None:
        take_source = t is None or (s is not None and _key(s, k) <= _key(t, k))
        take_target = s is None or (t is not None and _key(t, k) <= _key(s, k))
        if take_source and take_target:
            assert s is not None and t is not None
            if s != t:
                result.differing += 1
                diffs = [f"{c}: {a!r} != {b!r}" for c, a, b in zip(src_cols, s, t, strict=True) if a != b]
                example(f"{table} {key}={s[k]}: " + "; ".join(diffs))
        elif take_source:
            assert s is not None
            result.missing += 1
            example(f"{table} {key}={s[k]}: missing in the target")
        else:
            assert t is not None
            result.extra += 1
            example(f"{table} {key}={t[k]}: in the target only")
        if take_source:
            assert s is not None
            src_hash.update(repr(s).encode())
            result.source_rows += 1
            s = next(src_it, None)
        if take_target:
            assert t is not None
            tgt_hash.update(repr(t).encode())
            result.target_rows += 1
            t = next(tgt_it, None)
    result.source_digest, result.target_digest = src_hash.hexdigest(), tgt_hash.hexdigest()
    return result


def compare_tables(
    source: Engine, target: Engine, tables: Sequence[str], key: str = "id"
) -> list[TableComparison]:
    return [compare_table(source, target, t, key) for t in tables]
