"""Every built-in connector runs the standard contract suite (tests/connectors/contract.py)."""

from __future__ import annotations

from pathlib import Path

from sluice.connectors.dummy import DummySinkConnector, DummySourceConnector
from sluice.connectors.file.sink import FileSinkConnector
from sluice.connectors.file.source import FileSourceConnector
from sluice.connectors.jdbc.sink import JdbcSinkConnector
from sluice.connectors.postgres import PostgresSinkConnector
from tests.connectors.contract import SinkCase, SinkEnv, SourceCase, sink_test_class, source_test_class


def _write_files(tmp: Path) -> None:
    (tmp / "a.txt").write_bytes(b"alpha\nbeta\r\ngamma\npartial")
    (tmp / "b.txt").write_bytes("één\ntwee\n".encode())


def _grow_files(tmp: Path) -> None:
    with open(tmp / "a.txt", "ab") as fh:
        fh.write(b" line\ndelta\n")


def _read_lines(env: SinkEnv) -> str:
    path = env.tmp / "out.txt"
    return path.read_text(encoding="utf-8") if path.exists() else ""


def _half_line(env: SinkEnv) -> None:
    with open(env.tmp / "out.txt", "ab") as fh:
        fh.write(b"line-3\nline-")


def _table_rows(env: SinkEnv) -> list[tuple[object, ...]]:
    from sqlalchemy import create_engine, text

    engine = create_engine(env.database_url)
    try:
        with engine.connect() as conn:
            exists = conn.execute(text("SELECT to_regclass(:t)"), {"t": f'"{env.schema}".out'}).scalar()
            if exists is None:
                return []
            sql = f'SELECT topic, partition, "offset", value FROM "{env.schema}".out ORDER BY "offset"'
            return [tuple(r) for r in conn.execute(text(sql))]
    finally:
        engine.dispose()


def _jdbc_config(env: SinkEnv) -> dict[str, str]:
    """Keyless inserts of the records' coordinates into table ``out`` of the case's own database:
    a duplicate row would show, so repeatability rests on the sink's ledger alone."""
    return {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "topics": "t",
        "connection.url": env.target.jdbc_url,
        "connection.user": env.target.user,
        "connection.password": env.target.password,
        "table.name.format": "out",
        "auto.create": "true",
    }


def _target_rows(env: SinkEnv) -> list[tuple[object, ...]]:
    from sqlalchemy import create_engine, text

    mysql = env.target.url.startswith("mysql")
    engine = create_engine(env.target.url)
    q = (lambda n: f"`{n}`") if mysql else (lambda n: f'"{n}"')
    here = "DATABASE()" if mysql else "'public'"
    try:
        with engine.connect() as conn:
            exists = conn.execute(
                text(f"SELECT count(*) FROM information_schema.tables WHERE table_schema = {here} "
                     "AND table_name = 'out'")
            ).scalar()
            if not exists:
                return []
            offset = q("offset")
            sql = f"SELECT topic, {q('partition')}, {offset}, value FROM {q('out')} ORDER BY {offset}"
            return [tuple(r) for r in conn.execute(text(sql))]
    finally:
        engine.dispose()


TestFileSourceContract = source_test_class(
    SourceCase(
        "file-source",
        FileSourceConnector,
        lambda tmp: {
            "connector.class": "file-source",
            "topic": "t",
            "files": f"{tmp / 'a.txt'},{tmp / 'b.txt'}",
        },
        setup=_write_files,
        grow=_grow_files,
    )
)

TestDummySourceContract = source_test_class(
    SourceCase(
        "dummy-source",
        DummySourceConnector,
        lambda tmp: {
            "connector.class": "dummy-source",
            "topic": "t",
            "partitions": "2",
            "records.per.partition": "7",
        },
    )
)

TestFileSinkContract = sink_test_class(
    SinkCase(
        "file-sink",
        FileSinkConnector,
        lambda env: {"connector.class": "file-sink", "topics": "t", "file": str(env.tmp / "out.txt")},
        read_back=_read_lines,
        half_write=_half_line,
    )
)

TestDummySinkContract = sink_test_class(
    SinkCase(
        "dummy-sink",
        DummySinkConnector,
        lambda env: {"connector.class": "dummy-sink", "topics": "t", "file": str(env.tmp / "out.txt")},
        read_back=_read_lines,
        half_write=_half_line,
    )
)

TestPostgresSinkContract = sink_test_class(
    SinkCase(
        "postgres-sink",
        PostgresSinkConnector,
        lambda env: {
            "connector.class": "postgres-sink",
            "topics": "t",
            "connection.url": env.database_url,
            "schema": env.schema,
            "table": "out",
            "auto.create": "true",
        },
        read_back=_table_rows,
        needs_database=True,
    )
)

TestJdbcSinkMariaDBContract = sink_test_class(
    SinkCase(
        "jdbc-sink[mariadb]",
        JdbcSinkConnector,
        _jdbc_config,
        read_back=_target_rows,
        needs_database=True,
        target_fixture="mariadb_db",
    )
)

TestJdbcSinkPostgresContract = sink_test_class(
    SinkCase(
        "jdbc-sink[postgresql, another database]",
        JdbcSinkConnector,
        _jdbc_config,
        read_back=_target_rows,
        needs_database=True,
        target_fixture="postgres_db",
    )
)
