"""Which tables a pipeline copies and where each lands: `sluice verify CONNECTOR [SINK_CONNECTOR]`.

A pipeline is a source connector and the sink that reads its topics (or one direct pipeline,
``connector.direct.enable=true``, holding both). Its tables are followed as its records travel:

1. the source's tables and the topic each goes to, by the source's own naming (``jdbc-source``:
   ``topic.prefix`` + table, or ``topic``; the CDC sources: Debezium's ``<prefix>.<db>.<table>``);
2. each table's columns through the source's transforms, the pipeline's, then the sink's
   (``Transform.reshape``: renamed, dropped, inserted fields, routed topics; a transform that cannot
   be followed fails, named);
3. the sink's topics (``topics`` or ``topics.regex``) and ``table.name.format``: the target table.

``plan_pipeline`` is pure: it is given the configs (parsed, secrets resolved) and the source
database's tables with their columns, and answers the two database URLs and the table pairs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy.engine import URL

from sluice.connectors.cdc.topics import debezium_topic
from sluice.connectors.jdbc.config import topic_for
from sluice.connectors.jdbc.urls import engine_url
from sluice.connectors.transforms import NotFollowable, RecordShape, Transform, reshape_chain
from sluice.worker.verify.model import TablePair, VerifyError

#: The sources whose tables `sluice verify` follows, and the one sink it compares with.
SOURCES: Final = ("jdbc-source", "mysql-cdc", "postgres-cdc")
SINKS: Final = ("jdbc-sink",)


@dataclass(frozen=True)
class PipelineSide:
    """One side of a pipeline: its plugin name, its config (parsed: aliases resolved, defaults
    applied, secrets resolved) and its transforms."""

    plugin: str
    config: Mapping[str, Any]
    chain: Sequence[Transform] = ()


@dataclass(frozen=True)
class PipelinePlan:
    """What to compare: the two databases (URLs with their credentials: never printed) and each
    source table with its target; ``unread`` names the source tables whose topic the sink does not
    read (not compared)."""

    source_url: str
    target_url: str
    pairs: tuple[TablePair, ...]
    unread: tuple[str, ...] = ()
    #: the topics the sink reads the compared tables from (none for a direct pipeline's sink side,
    #: which reads the source's records, not a topic)
    topics: tuple[str, ...] = ()


def source_url(side: PipelineSide) -> str:
    """The source database's SQLAlchemy URL (credentials in it)."""
    c = side.config
    if side.plugin == "jdbc-source":
        return _rendered(
            engine_url(
                str(c["connection.url"]),
                c.get("connection.user") or None,
                c.get("connection.password") or None,
            )
        )
    if side.plugin in ("mysql-cdc", "postgres-cdc"):
        mysql = side.plugin == "mysql-cdc"
        return _rendered(
            URL.create(
                "mysql+pymysql" if mysql else "postgresql+psycopg",
                username=str(c["database.user"]),
                password=str(c.get("database.password") or "") or None,
                host=str(c["database.hostname"]),
                port=int(c["database.port"]),
                database=None if mysql else str(c["database.dbname"]),
            )
        )
    raise _unsupported(side, SOURCES)


def target_url(side: PipelineSide) -> str:
    """The sink database's SQLAlchemy URL (credentials in it)."""
    if side.plugin not in SINKS:
        raise _unsupported(side, SINKS)
    c = side.config
    return _rendered(
        engine_url(
            str(c["connection.url"]), c.get("connection.user") or None, c.get("connection.password") or None
        )
    )


def copied_tables(side: PipelineSide, tables: Sequence[str]) -> dict[str, str]:
    """Each table the source copies (of ``tables``: the source database's, as it names them) and
    its topic."""
    c = side.config
    if side.plugin == "jdbc-source":
        if str(c.get("query") or "").strip():
            raise VerifyError(
                f"source connector {c.get('name')!r} reads a query, not tables: give --source, --target "
                "and --table to compare the tables the query reads"
            )
        listed = [str(t) for t in c.get("table.whitelist") or []]
        excluded = {str(t) for t in c.get("table.blacklist") or []}
        chosen = listed or [t for t in tables if t not in excluded]
        prefix, topic = str(c.get("topic.prefix") or ""), str(c.get("topic") or "")
        return {t: topic_for(t, prefix, topic) for t in chosen}
    if side.plugin == "mysql-cdc":
        from sluice.connectors.cdc.mysql.config import select_tables as mysql_tables

        return {t: debezium_topic(str(c["topic.prefix"]), *t.split(".", 1)) for t in mysql_tables(c, tables)}
    if side.plugin == "postgres-cdc":
        from sluice.connectors.cdc.postgres.config import select_tables as postgres_tables

        return {
            t: debezium_topic(str(c["topic.prefix"]), *t.split(".", 1)) for t in postgres_tables(c, tables)
        }
    raise _unsupported(side, SOURCES)


def sink_reads(sink: PipelineSide) -> Callable[[str], bool]:
    """Whether the sink reads a topic (``topics``, else ``topics.regex``)."""
    topics = {str(t) for t in sink.config.get("topics") or []}
    if topics:
        return topics.__contains__
    pattern = re.compile(str(sink.config.get("topics.regex") or "(?!)"))
    return lambda topic: pattern.fullmatch(topic) is not None


def target_table(sink: PipelineSide, topic: str) -> str:
    """The sink's table for a topic (``table.name.format``, ``schema``), as ``[schema.]table``."""
    name = str(sink.config.get("table.name.format") or "${topic}").replace("${topic}", topic)
    schema = str(sink.config.get("schema") or "")
    return name if "." in name or not schema else f"{schema}.{name}"


def plan_pipeline(
    source: PipelineSide,
    sink: PipelineSide,
    tables: Mapping[str, Sequence[str]],
    between: Sequence[Transform] = (),
    *,
    direct: bool = False,
) -> PipelinePlan:
    """The pipeline's table pairs (module docstring). ``tables``: the source database's tables
    (named as its connector names them) and their columns; ``between``: a direct pipeline's own
    transforms, run after the source's and before the sink's (``direct``: no topic between)."""
    reads = sink_reads(sink)
    pairs, unread, topics = [], [], []
    for table, topic in copied_tables(source, list(tables)).items():
        if table not in tables:
            raise VerifyError(
                f"source table {table!r} named by connector {source.config.get('name')!r} does not exist"
            )
        shape = RecordShape(topic, tuple((c, c) for c in tables[table]))
        try:
            shape = reshape_chain([*source.chain, *between], shape)
            if not reads(shape.topic):
                unread.append(table)
                continue
            topics.append(shape.topic)
            shape = reshape_chain(sink.chain, shape)
        except NotFollowable as exc:
            raise VerifyError(f"table {table!r}: {exc}") from None
        columns = {origin: name for name, origin in shape.fields if origin is not None}
        pairs.append(TablePair(table, target_table(sink, shape.topic), columns=columns))
    return PipelinePlan(
        source_url(source),
        target_url(sink),
        tuple(pairs),
        tuple(unread),
        () if direct else tuple(sorted(set(topics))),
    )


def table_pairs(tables: Sequence[str], keys: Sequence[str]) -> list[TablePair]:
    """``SOURCE[=TARGET]`` each (``--table``), with the ``keys`` columns (comma-separated) for all."""
    key = tuple(k.strip() for k in ",".join(keys).split(",") if k.strip())
    out = []
    for spec in tables:
        source, _, target = spec.partition("=")
        if not source.strip():
            raise VerifyError(f"table {spec!r}: expected SOURCE or SOURCE=TARGET")
        out.append(TablePair(source.strip(), target.strip() or None, key_columns=key))
    return out


def _rendered(url: URL) -> str:
    return url.render_as_string(hide_password=False)


def _unsupported(side: PipelineSide, known: Sequence[str]) -> VerifyError:
    return VerifyError(
        f"connector {side.config.get('name')!r}: sluice verify compares tables copied by "
        f"{', '.join(SOURCES)} into {', '.join(SINKS)}, not by {side.plugin} (supported here: "
        f"{', '.join(known)}); give --source, --target and --table to compare its tables"
    )
