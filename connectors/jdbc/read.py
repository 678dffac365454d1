"""The read path of the JDBC source: DB-API connections, the catalogue, and ranges read as Arrow.

Sluice reads with the Python drivers it already ships (PyMySQL, psycopg 3) *inside Spark tasks*,
one task per key range (the source's read is ``ArrowSplits`` of ``read_split``, which the runtime's
Spark binding runs with ``mapInArrow``; ``SourceRead.to_table`` runs it in-process), each building
Arrow record batches with the exact types of ``sluice.connectors.jdbc.types`` and framing them as
records there (connectors.jdbc.records). No PySpark here. A large range (the initial load) is
split into sub-ranges of ``read.split.rows`` rows found with the planner's own ``ORDER BY key
LIMIT 1 OFFSET n`` query, so splits hold equal row counts even across key gaps, and are read by
parallel Spark tasks.

Measured (bench/jdbc_read_bench.py, 100,000 rows of ~100 bytes, local[2] on this shared 2-core
machine under load, so figures are noisy): rows/s MariaDB driver-only 37k, in Spark one split 22k,
two splits 13k; PostgreSQL driver-only 179k, Spark 49k / 45k, ``COPY … TO STDOUT`` (bytes only,
unparsed) 208k. So on one small machine the Spark hop costs 2-4x over a driver-side read and the
split gains nothing (both cores are busy anyway); PyMySQL, pure Python, is MariaDB's limit. Why
this path all the same: it is the one that scales out (each split runs on any executor of a
``spark://``/``k8s://`` cluster, the driver never holds the rows), it keeps the type mapping in
one place and needs nothing new. Spark's JDBC reader would need driver jars from Maven Central
when a worker's one SparkSession starts (``spark.jars.packages``) and maps types by JDBC's rules
(unsigned BIGINT, MySQL TIMESTAMP zones) rather than the table's; connectorx is not a dependency.
Since then the MySQL read leaves numbers, decimals and date-times as text for Arrow to cast a
column at a time (``_text_decoders``: about 2x PyMySQL's own conversion, driver-side).
In the whole pipeline the read is now a small share (``bench/db_profile.py``): the JSON converter
and the RocketMQ hop cost more. PyMySQL's row parsing was still the largest part of a split's task
in the side-by-side job (py-spy, #18), so the splits now read through asyncmy, the same protocol
and decoders compiled (``_mysql_fetches``).

Each connection sets the session zone to UTC (MySQL ``TIMESTAMP`` values arrive as UTC) and reads
unbuffered (an asyncmy ``SSCursor``: PyMySQL's protocol compiled, ``_mysql_fetches``; a psycopg
server-side cursor), so a task's memory is one Arrow batch. Errors never contain the URL's
password: they name connector, table and column.
"""

from __future__ import annotations

import contextlib
import functools
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from sluice.connectors import pymysql_connections
from sluice.connectors.config import ConfigError, FieldError
from sluice.connectors.jdbc.queries import Sql, columns_query
from sluice.connectors.jdbc.records import RecordShape, to_records
from sluice.connectors.jdbc.types import (
    ColumnInfo,
    MappedColumn,
    UnsupportedColumnType,
    arrow_type,
    map_column,
    mysql_info_from_field,
    postgres_info_from_oid,
)
from sluice.connectors.jdbc.urls import Dialect

if TYPE_CHECKING:
    import pyarrow as pa
    from sqlalchemy.engine import URL

FETCH_ROWS: Final = 10_000
EPOCH: Final = datetime(1970, 1, 1)


class JdbcAuthError(PermissionError):
    """The database refused the credentials (retried a few times, then the task FAILS)."""


class JdbcSourceConfigError(ConfigError):
    """A missing table, an unknown column, a type Sluice cannot carry: configuration, not retried."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__([FieldError(field, message)])


@dataclass(frozen=True)
class ConnectParams:
    """What a DB-API connect needs (picklable: it travels into Spark tasks, never into logs)."""

    dialect: Dialect
    host: str
    port: int
    user: str
    password: str
    database: str

    def __repr__(self) -> str:  # a ConnectParams in a traceback must not show the password
        return f"ConnectParams({self.dialect}, {self.host}:{self.port}/{self.database}, user={self.user})"

    @classmethod
    def of(cls, url: URL) -> ConnectParams:
        dialect = Dialect.MYSQL if url.drivername.startswith("mysql") else Dialect.POSTGRESQL
        port = url.port or (3306 if dialect is Dialect.MYSQL else 5432)
        return cls(
            dialect, url.host or "localhost", port, url.username or "", url.password or "", url.database or ""
        )


def _is_auth_failure(exc: BaseException) -> bool:
    text = str(exc).lower()
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    return code in (1044, 1045, 1698) or "password authentication failed" in text or "access denied" in text


def _text_decoders() -> dict[int, Any]:
    """PyMySQL's decoders minus those of the types ``rows_to_batch`` parses column-wise in Arrow.

    PyMySQL, pure Python, turns every DECIMAL into a ``Decimal``, every DATETIME into a
    ``datetime`` (a regex and a constructor per value) and every BIGINT into an ``int``; Arrow casts
    the same text a whole column at a time. Measured on this machine (100,000 rows of the bench
    table, one connection): 59-65k rows/s with the decoders, 113-132k rows/s without.
    """
    # pymysql: only MySQL needs it; config validation imports this module (jdbc-source)
    from pymysql.constants import FIELD_TYPE
    from pymysql.converters import conversions

    as_text = (FIELD_TYPE.NEWDECIMAL, FIELD_TYPE.DECIMAL, FIELD_TYPE.DATETIME, FIELD_TYPE.TIMESTAMP,
               FIELD_TYPE.DATE, FIELD_TYPE.LONG, FIELD_TYPE.LONGLONG, FIELD_TYPE.INT24)  # fmt: skip
    return {k: v for k, v in conversions.items() if k not in as_text}


def connect(params: ConnectParams, where: str) -> Any:
    """An autocommit DB-API connection with the session zone set to UTC (planning's: Python values;
    the split reads have their own, ``_mysql_fetches`` and ``_postgres_fetches``)."""
    try:
        if params.dialect is Dialect.MYSQL:
            return pymysql_connections.connect(**_mysql_settings(params))
        # psycopg: only PostgreSQL needs it; config validation imports this module (jdbc-source)
        import psycopg

        return psycopg.connect(
            host=params.host,
            port=params.port,
            user=params.user,
            password=params.password or None,
            dbname=params.database,
            autocommit=True,
            connect_timeout=10,
            options="-c TimeZone=UTC",
        )
    except Exception as exc:
        raise _connect_failure(params, where, exc) from None


def _mysql_settings(params: ConnectParams) -> dict[str, Any]:
    """A MySQL connection's settings, as PyMySQL and asyncmy both take them: autocommit, UTC."""
    return {
        "host": params.host, "port": params.port, "user": params.user, "password": params.password,
        "database": params.database or None, "charset": "utf8mb4", "autocommit": True,
        "init_command": "SET time_zone = '+00:00'", "connect_timeout": 10,
    }  # fmt: skip


def _connect_failure(params: ConnectParams, where: str, exc: Exception) -> Exception:
    """What a failed connect raises: the place and the reason, never the password."""
    place = f"{params.host}:{params.port}/{params.database} as {params.user!r}"
    detail = str(exc).replace(params.password, "********") if params.password else str(exc)
    if _is_auth_failure(exc):
        return JdbcAuthError(f"{where}: the database refused the credentials for {place}")
    return ConnectionError(f"{where}: cannot connect to {place}: {detail[:300]}")


def fetch_all(conn: Any, sql: Sql) -> list[tuple[Any, ...]]:
    with contextlib.closing(conn.cursor()) as cur:
        cur.execute(sql.text, sql.params)
        return [tuple(r) for r in cur.fetchall()]


def table_columns(
    conn: Any, dialect: Dialect, table: str, where: str
) -> tuple[list[MappedColumn], list[str]]:
    """The table's columns mapped to Spark types, and its primary-key columns."""
    rows = fetch_all(conn, columns_query(dialect, table))
    if not rows:
        raise JdbcSourceConfigError(
            "table.whitelist", f"{where}: table {table!r} does not exist (or the user cannot see it)"
        )
    mapped, keys = [], []
    for name, kind, full, precision, scale, nullable, key in rows:
        info = ColumnInfo(
            str(name),
            str(kind),
            str(full or ""),
            None if precision is None else int(precision),
            None if scale is None else int(scale),
            str(nullable).upper() == "YES",
        )
        try:
            mapped.append(map_column(dialect, info, f"{where} table {table!r}"))
        except UnsupportedColumnType as exc:
            raise JdbcSourceConfigError("table.whitelist", str(exc)) from None
        if key == "PRI":
            keys.append(str(name))
    return mapped, keys


def query_columns(conn: Any, dialect: Dialect, query: str, where: str) -> list[MappedColumn]:
    """A custom query's result columns, from the driver's description of a zero-row run."""
    with contextlib.closing(conn.cursor()) as cur:
        cur.execute(f"SELECT * FROM ({query.replace('%', '%%')}) sluice_q WHERE 1 = 0", ())
        description = cur.description or []
        if dialect is Dialect.MYSQL:
            fields = cur._result.fields
            infos = [
                mysql_info_from_field(f.name, f.type_code, f.length, f.scale, f.flags, f.charsetnr)
                for f in fields
            ]
        else:
            infos = [postgres_info_from_oid(d.name, d.type_code, d.precision, d.scale) for d in description]
    out = []
    for info in infos:
        try:
            out.append(map_column(dialect, info, f"{where} query"))
        except UnsupportedColumnType as exc:
            raise JdbcSourceConfigError("query", str(exc)) from None
    return out


# ---- positions <-> column values -----------------------------------------------------------------
def ts_micros(value: Any) -> int:
    """A timestamp column value as microseconds since the epoch (aware: UTC; naive: its wall clock)."""
    if not isinstance(value, datetime):
        raise TypeError(f"expected a timestamp, got {type(value).__name__}")
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return (value - EPOCH) // timedelta(microseconds=1)


def ts_param(micros: int, dialect: Dialect, zoned: bool) -> datetime:
    """The query parameter for a timestamp position: PostgreSQL ``timestamptz`` gets an aware UTC
    value; MySQL ``TIMESTAMP`` a naive UTC one (the session zone is UTC); local ones naive."""
    value = EPOCH + timedelta(microseconds=micros)
    return value.replace(tzinfo=UTC) if zoned and dialect is Dialect.POSTGRESQL else value


# ---- values -> Arrow -----------------------------------------------------------------------------
def _fix(values: Sequence[Any], ddl: str) -> Sequence[Any]:
    """Driver values Arrow would not take as they are (MySQL BIT as bytes, memoryviews)."""
    if ddl == "BOOLEAN" and any(isinstance(v, bytes) for v in values):
        return [
            None if v is None else (int.from_bytes(v, "big") != 0 if isinstance(v, bytes) else bool(v))
            for v in values
        ]
    if ddl == "BINARY" and any(isinstance(v, memoryview | bytearray) for v in values):
        return [None if v is None else bytes(v) for v in values]
    return values


def _column(values: Sequence[Any], ddl: str) -> pa.Array:
    """One column as Arrow; values that arrive as text (``_text_decoders``) for a
    non-string column are cast by Arrow, which refuses what does not fit (no rounding: a decimal
    with more digits than the scale fails, as ``pa.array`` of ``Decimal`` values does)."""
    # pyarrow: config validation imports this module (the jdbc-source class)
    import pyarrow as pa
    import pyarrow.compute as pc

    target = arrow_type(ddl)
    if ddl in ("STRING", "BINARY") or not isinstance(next((v for v in values if v is not None), None), str):
        return pa.array(_fix(values, ddl), type=target)
    text = pa.array(values, type=pa.string())
    if ddl == "TIMESTAMP":  # MySQL TIMESTAMP text is UTC (the session zone): naive, then UTC
        return pc.cast(pc.cast(text, pa.timestamp("us")), target)
    return pc.cast(text, target)


def rows_to_batch(
    rows: Sequence[Sequence[Any]], columns: Sequence[MappedColumn], where: str
) -> pa.RecordBatch:
    """One Arrow batch of driver rows; a value that does not fit its column names the column."""
    import pyarrow as pa  # pyarrow: config validation imports this module (the jdbc-source class)

    arrays = []
    by_column = list(zip(*rows, strict=True)) if rows else [() for _ in columns]
    for col, values in zip(columns, by_column, strict=True):
        try:
            arrays.append(_column(values, col.spark_ddl))
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            bad = next((v for v in values if v is not None), None)
            raise JdbcSourceConfigError(
                col.name,
                f"{where} column {col.name!r} ({col.db_type} -> {col.spark_ddl}): value of type "
                f"{type(bad).__name__} cannot be carried: {str(exc)[:200]}",
            ) from None
    return pa.RecordBatch.from_arrays(arrays, names=[c.name for c in columns])


@dataclass(frozen=True)
class ReadSpec:
    """Everything a Spark task needs to read a split of one range (pickled into the task)."""

    params: ConnectParams
    columns: tuple[MappedColumn, ...]
    schema: pa.Schema  # the records' (connectors.jdbc.records.record_schema)
    shape: RecordShape
    where: str


def read_split(spec: ReadSpec, sql: Sql) -> Iterator[pa.RecordBatch]:
    """The records of one split (the ``read`` of the source's ``ArrowSplits``), a batch of at most
    ``FETCH_ROWS`` rows at a time."""
    fetches = (
        _mysql_fetches(spec, sql) if spec.params.dialect is Dialect.MYSQL else _postgres_fetches(spec, sql)
    )
    for rows in fetches:
        yield to_records(rows_to_batch(rows, spec.columns, spec.where), spec.schema, spec.shape)


def _postgres_fetches(spec: ReadSpec, sql: Sql) -> Iterator[Sequence[tuple[Any, ...]]]:
    conn = connect(spec.params, spec.where)
    try:
        conn.autocommit = False  # a server-side cursor lives in a transaction
        with contextlib.closing(conn.cursor(name="sluice_read")) as cur:
            cur.execute(sql.text, sql.params)
            while rows := cur.fetchmany(FETCH_ROWS):
                yield rows
    finally:
        conn.close()


@functools.cache
def offers_tls(host: str, port: int) -> bool:
    """Whether the MySQL server offers TLS (``CLIENT_SSL`` in its greeting), asked once per process.

    asyncmy given a TLS context always upgrades, where PyMySQL's PREFERRED mode upgrades only when
    the server offers it: this keeps the PREFERRED behaviour (a server without TLS, as the local
    stack's, is read in plain; one that requires it gets it). The greeting is the first packet a
    server sends; the probe reads it and closes."""
    with socket.create_connection((host, port), timeout=10) as sock:
        head = _received(sock, 4)
        greeting = _received(sock, int.from_bytes(head[:3], "little"))
    if greeting[:1] == b"\xff":  # an error packet (too many connections, host blocked)
        raise ConnectionError(greeting[3:].decode("utf-8", "replace"))
    # protocol version, server version (NUL-ended), thread id (4), scramble (8), filler (1), flags
    flags_at = greeting.index(b"\0", 1) + 1 + 4 + 8 + 1
    return bool(int.from_bytes(greeting[flags_at : flags_at + 2], "little") & _CLIENT_SSL)


_CLIENT_SSL: Final = 0x0800


def _received(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the server closed the connection during its greeting")
        data += chunk
    return data


def _mysql_fetches(spec: ReadSpec, sql: Sql) -> Iterator[Sequence[tuple[Any, ...]]]:
    """The split's rows through ``mysql_fetches``, numbers and date-times as text for Arrow to cast
    (``_text_decoders``)."""
    return mysql_fetches(spec.params, spec.where, sql, _text_decoders())


def mysql_fetches(
    params: ConnectParams, where: str, sql: Sql, decoders: dict[int, Any] | None = None
) -> Iterator[Sequence[tuple[Any, ...]]]:
    """The rows of ``sql``, unbuffered, ``FETCH_ROWS`` at a time, through asyncmy: PyMySQL's
    protocol and decoders compiled with Cython, so the rows are the values PyMySQL gives with the
    same ``decoders`` (its own when None; the same map, called the same way) at 3-10 times its
    rate: 270-440k rows/s of the bench table on one connection with ``_text_decoders``, against
    65-88k; 0.9 against 6.5-7 µs a row with PyMySQL's own decoders (a CDC snapshot chunk).
    PyMySQL parsed every row packet in the interpreter, the larger part of a JDBC source's Spark
    tasks (#18) and a third of a CDC snapshot's time holding the interpreter lock (py-spy).

    asyncmy is asyncio's: the read runs on an event loop of its own, only inside each fetch, so
    this generator may wait between batches (a Spark task's, or ``SourceRead.to_table``'s thread;
    never one running a loop already). TLS as PyMySQL's PREFERRED mode: when the server offers it
    (``offers_tls``).
    """
    import asyncio

    # asyncmy: only MySQL needs it; config validation imports this module (jdbc-source)
    import asyncmy
    from asyncmy.cursors import SSCursor

    loop = asyncio.new_event_loop()
    try:
        try:
            offered = offers_tls(params.host, params.port)
            tls = pymysql_connections.preferred_tls_context() if offered else None
            conn = loop.run_until_complete(asyncmy.connect(**_mysql_settings(params), conv=decoders, ssl=tls))
        except Exception as exc:
            raise _connect_failure(params, where, exc) from None
        try:
            cur = conn.cursor(SSCursor)
            loop.run_until_complete(cur.execute(sql.text, sql.params))
            while rows := loop.run_until_complete(cur.fetchmany(FETCH_ROWS)):
                yield rows
        finally:  # a read left early is not drained (PyMySQL's SSCursor.close would read it all)
            conn.close()
            loop.run_until_complete(asyncio.sleep(0))  # the transport's own closing callbacks
    finally:
        loop.close()
