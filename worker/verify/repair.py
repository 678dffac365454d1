"""`sluice verify --repair`: the differing rows written to the target as the source holds them now.

For each table that differs, in one target transaction: the target's rows of the missing and
different keys are replaced by the source's current rows (delete, then insert: no unique constraint
needed on the target), and its extra keys deleted. Only the compared columns are written, under
their target names (``TablePair.columns``, else the columns both tables share); a column only the
target has keeps its default. The keys are then checked again (``engine.verify_keys``): the report
returned is the one after the repair.

The rows are written beside the pipeline, not through it: on a running pipeline, compare ``--live``
first (the default), so a key still in flight is not "repaired" with a row the pipeline is about to
write anyway. A table compared without a key (no primary key) cannot be repaired by key: it is left
as it is, with a warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import bindparam, inspect, text
from sqlalchemy.engine import Engine

from sluice.connectors.jdbc.urls import Dialect
from sluice.worker.verify.canonical import quote, table_sql
from sluice.worker.verify.engine import open_database, verify_keys
from sluice.worker.verify.model import RowKey, TablePair, TableReport, VerifyError, VerifyReport


def _names(engine: Engine, table: str) -> list[str]:
    """The table's column names (``schema.table`` or ``table``, as ``canonical.table_sql`` splits it)."""
    schema, _, name = table.rpartition(".")
    return [c["name"] for c in inspect(engine).get_columns(name, schema=schema or None)]


def column_mapping(
    pair: TablePair, source_columns: Sequence[str], target_columns: Sequence[str]
) -> dict[str, str]:
    """Source column -> target column written: the pair's, else those both share (by name, any case)."""
    if pair.columns:
        return dict(pair.columns)
    by_lower = {c.lower(): c for c in target_columns}
    return {c: by_lower[c.lower()] for c in source_columns if c.lower() in by_lower}


def _where_keys(dialect: Dialect, columns: Sequence[str], count: int) -> str:
    one = " AND ".join(f"{quote(dialect, c)} = :k{i}_{{n}}" for i, c in enumerate(columns))
    return " OR ".join(f"({one.format(n=n)})" for n in range(count))


def _key_params(key_columns: Sequence[str], keys: Sequence[RowKey]) -> dict[str, Any]:
    return {f"k{i}_{n}": key[c] for n, key in enumerate(keys) for i, c in enumerate(key_columns)}


def repair_table(source_url: str, target_url: str, pair: TablePair, table: TableReport) -> int:
    """Write ``table``'s differing keys (module docstring); how many rows were written or deleted."""
    if table.equal:
        return 0
    if not table.key_columns:
        table.warnings.append("not repaired: compared without a key, its rows can't be rewritten by key")
        return 0
    source_db, target_db = open_database("source", source_url), open_database("target", target_url)
    source, s_dialect = source_db.engine, source_db.dialect  # sessions at UTC, as the compare's
    target, t_dialect = target_db.engine, target_db.dialect
    try:
        mapping = column_mapping(pair, _names(source, pair.source_table), _names(target, pair.target))
        keys = table.key_columns
        target_keys = [mapping.get(k, k) for k in keys]
        rewrite = [*table.missing, *(d.key for d in table.different)]
        rows: list[Mapping[str, Any]] = []
        if rewrite:
            with source.connect() as conn:
                cols = ", ".join(quote(s_dialect, c) for c in mapping)
                where = _where_keys(s_dialect, keys, len(rewrite))
                sql = f"SELECT {cols} FROM {table_sql(s_dialect, pair.source_table)} WHERE {where}"
                rows = [dict(r._mapping) for r in conn.execute(text(sql), _key_params(keys, rewrite))]
        gone = [*rewrite, *table.extra]
        with target.begin() as conn:
            where = _where_keys(t_dialect, target_keys, len(gone))
            conn.execute(
                text(f"DELETE FROM {table_sql(t_dialect, pair.target)} WHERE {where}"),
                _key_params(keys, gone),
            )
            if rows:
                names = list(mapping)
                insert = text(
                    f"INSERT INTO {table_sql(t_dialect, pair.target)} "
                    f"({', '.join(quote(t_dialect, mapping[c]) for c in names)}) "
                    f"VALUES ({', '.join(f':v{i}' for i in range(len(names)))})"
                ).bindparams(*(bindparam(f"v{i}") for i in range(len(names))))
                conn.execute(insert, [{f"v{i}": row[c] for i, c in enumerate(names)} for row in rows])
        return len(gone) - len(rewrite) + len(rows)
    except VerifyError:
        raise
    except Exception as exc:  # noqa: BLE001 - one line naming the table, never a traceback
        first = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        raise VerifyError(f"repair of target table {pair.target}: {first}") from None
    finally:
        source_db.close()
        target_db.close()


def repair(
    source_url: str, target_url: str, pairs: Sequence[TablePair], report: VerifyReport
) -> VerifyReport:
    """Every differing table of ``report`` repaired, then its keys checked again: the report after."""
    by_table = {p.source_table: p for p in pairs}
    after = []
    for t in report.tables:
        pair = by_table[t.source_table]
        written = repair_table(source_url, target_url, pair, t)
        if not written:
            after.append(t)
            continue
        keys = [*t.missing, *t.extra, *(d.key for d in t.different)]
        again = verify_keys(source_url, target_url, pair, keys)
        after.append(replace(
            again, rows_compared=t.rows_compared, seconds=t.seconds + again.seconds,
            segments_checksummed=t.segments_checksummed,
            warnings=[*t.warnings, f"repaired: {written} row(s) written or deleted in the target",
                      *again.warnings],
        ))  # fmt: skip
    return replace(report, tables=after)
