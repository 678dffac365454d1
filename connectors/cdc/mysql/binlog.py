"""The server side of MySQL/MariaDB change capture: checks, tables, binlog files, and the stream.

The binary log is read over the replication protocol (``pymysqlreplication``'s
``BinLogStreamReader``, in non-blocking mode: the server sends what it has and then EOF, so a
read always ends) from a ``file + position`` — the classic ``COM_BINLOG_DUMP``, which MariaDB
serves too (the reader's MariaDB GTID mode would ignore the position). Only the captured
databases' row events are decoded. Queries run over PyMySQL, in UTC.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sluice.connectors import pymysql_connections
from sluice.connectors.cdc.mysql.changes import COMMIT, GTID, ROWS, BinlogEvent, file_index
from sluice.connectors.cdc.mysql.truncate import truncated_table
from sluice.connectors.jdbc.read import ConnectParams
from sluice.connectors.jdbc.urls import Dialect

#: Privileges on ``*.*`` that let a user read the binary log and list its files.
_READ_LOG: Final = ("REPLICATION SLAVE", "ALL PRIVILEGES")
_LIST_LOGS: Final = ("REPLICATION CLIENT", "BINLOG MONITOR", "SUPER", "ALL PRIVILEGES")


@dataclass(frozen=True)
class Params:
    host: str
    port: int
    user: str
    password: str

    def __repr__(self) -> str:  # never the password
        return f"Params({self.host}:{self.port}, user={self.user})"

    @property
    def place(self) -> str:
        return f"{self.host}:{self.port} as {self.user!r}"

    def reads(self) -> ConnectParams:
        """The same server as the JDBC source's reads take it (a snapshot chunk's rows)."""
        return ConnectParams(Dialect.MYSQL, self.host, self.port, self.user, self.password, "")

    def settings(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "connect_timeout": 10,
            "init_command": "SET time_zone = '+00:00'",
        }


def connect(params: Params, where: str) -> Any:
    """An autocommit PyMySQL session in UTC; a failure names the connector and the server."""
    try:
        return pymysql_connections.connect(**params.settings(), autocommit=True, charset="utf8mb4")
    except Exception as exc:
        detail = str(exc).replace(params.password, "********") if params.password else str(exc)
        raise ConnectionError(
            f"{where}: cannot connect to MySQL/MariaDB {params.place}: {detail[:300]}"
        ) from None


def fetch(conn: Any, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    with contextlib.closing(conn.cursor()) as cur:
        cur.execute(sql, args)
        return [tuple(r) for r in cur.fetchall()] if cur.description else []


def _variables(conn: Any, *names: str) -> dict[str, str]:
    rows = fetch(
        conn, f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({', '.join(['%s'] * len(names))})", names
    )
    return {str(k).lower(): str(v) for k, v in rows}


def server_problems(conn: Any, replica_id: int, params_user: str) -> list[tuple[str, str]]:
    """What keeps this server from being captured, as (config field, message with the fix)."""
    v = _variables(conn, "log_bin", "binlog_format", "binlog_row_image", "server_id")
    out = []
    if v.get("log_bin", "OFF").upper() not in ("ON", "1"):
        out.append(
            (
                "database.hostname",
                "database.hostname: the server's binary log is off: start it with log_bin (e.g. "
                "log-bin=binlog in my.cnf), binlog_format=ROW and binlog_row_image=FULL",
            )
        )
    elif v.get("binlog_format", "").upper() != "ROW":
        out.append(
            (
                "database.hostname",
                f"database.hostname: binlog_format is {v.get('binlog_format')!r}: change data capture "
                "needs row events; SET GLOBAL binlog_format=ROW (and in my.cnf)",
            )
        )
    elif v.get("binlog_row_image", "FULL").upper() != "FULL":
        out.append(
            (
                "database.hostname",
                f"database.hostname: binlog_row_image is {v.get('binlog_row_image')!r}: updates and "
                "deletes would miss columns; SET GLOBAL binlog_row_image=FULL (and in my.cnf)",
            )
        )
    if v.get("server_id") and int(v["server_id"]) == replica_id:
        out.append(
            (
                "database.server.id",
                f"database.server.id={replica_id} is the server's own server_id: choose another "
                "(unique among its replicas and connectors)",
            )
        )
    grants = [str(r[0]).upper() for r in fetch(conn, "SHOW GRANTS FOR CURRENT_USER()")]
    global_grants = " ".join(g for g in grants if " ON *.* " in g)
    missing = [
        name
        for name, accepted in (("REPLICATION SLAVE", _READ_LOG), ("REPLICATION CLIENT", _LIST_LOGS))
        if not any(p in global_grants for p in accepted)
    ]
    if missing:
        out.append(
            (
                "database.user",
                f"database.user {params_user!r} lacks {' and '.join(missing)} (to read the binary log): "
                f"GRANT {', '.join(missing)} ON *.* TO <user>",
            )
        )
    return out


def list_tables(conn: Any) -> dict[str, tuple[str, ...]]:
    """Every base table as ``db.table`` -> its primary-key columns (empty: none), in name order."""
    rows = fetch(
        conn,
        "SELECT t.table_schema, t.table_name, k.column_name FROM information_schema.tables t "
        "LEFT JOIN information_schema.key_column_usage k ON k.table_schema = t.table_schema "
        "AND k.table_name = t.table_name AND k.constraint_name = 'PRIMARY' "
        "WHERE t.table_type = 'BASE TABLE' ORDER BY t.table_schema, t.table_name, k.ordinal_position",
    )
    out: dict[str, tuple[str, ...]] = {}
    for db, table, column in rows:
        name = f"{db}.{table}"
        out[name] = out.get(name, ()) + ((str(column),) if column is not None else ())
    return out


def column_names(conn: Any, db: str, table: str) -> list[str]:
    rows = fetch(
        conn,
        "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
        "AND table_name = %s ORDER BY ordinal_position",
        (db, table),
    )
    return [str(r[0]) for r in rows]


def binary_logs(conn: Any) -> list[str]:
    """The binlog files the server still has, oldest first."""
    return [str(r[0]) for r in fetch(conn, "SHOW BINARY LOGS")]


def binlog_end(conn: Any) -> tuple[str, int]:
    """Where the server's binary log ends now (file, position): always between two transactions."""
    for sql in ("SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"):  # MySQL 8.4 dropped the first
        try:
            rows = fetch(conn, sql)
        except Exception:  # noqa: BLE001 - the other spelling
            continue
        if rows:
            return str(rows[0][0]), int(rows[0][1])
    raise LookupError("the server reports no binary log position (is log_bin on?)")


def events(
    params: Params, replica_id: int, file: str, position: int, schemas: Sequence[str]
) -> Generator[BinlogEvent, None, None]:
    """The binlog's GTID, rows and commit events from ``file:position`` to the server's end now."""
    # pymysqlreplication: config validation imports this module (the mysql-cdc class)
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import GtidEvent, MariadbGtidEvent, QueryEvent, XidEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    stream = BinLogStreamReader(
        connection_settings=params.settings(),
        server_id=replica_id,
        log_file=file,
        log_pos=position,
        resume_stream=True,
        blocking=False,
        only_schemas=list(schemas),
        only_events=[
            GtidEvent,
            MariadbGtidEvent,
            QueryEvent,
            XidEvent,
            WriteRowsEvent,
            UpdateRowsEvent,
            DeleteRowsEvent,
        ],
        enable_logging=False,
        pymysql_wrapper=pymysql_connections.connection_class(),
    )
    try:
        for ev in stream:
            end = int(ev.packet.log_pos)
            if end == 0:
                continue  # a fake event the server sends at the start of a stream
            name = str(stream.log_file)
            start = end - int(ev.packet.event_size)  # the header's size: the whole event
            payload: Any
            if isinstance(ev, GtidEvent | MariadbGtidEvent):
                kind, payload = GTID, str(ev.gtid)
            elif isinstance(ev, XidEvent):
                kind, payload = COMMIT, None
            elif isinstance(ev, QueryEvent):
                query = ev.query.strip().upper() if isinstance(ev.query, str) else ""
                if query == "BEGIN" or query.startswith("XA "):
                    continue
                # a DDL statement, or COMMIT of a non-transactional change; a TRUNCATE names its table
                kind, payload = COMMIT, truncated_table(ev.query, ev.schema)
            else:
                kind, payload = ROWS, ev
            yield BinlogEvent(
                file_index(name), start, end, kind, int(ev.timestamp), payload, int(ev.packet.server_id), name
            )
    finally:
        stream.close()
