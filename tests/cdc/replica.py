"""A second MariaDB server, a GTID replica of the stack's, for failover tests.

It runs from deploy.local.mariadb's own code (install, start, stop) in a private state folder on a
free port, with ``server_id`` 2, ``log_slave_updates`` (replicated transactions reach its own
binlog, with their GTIDs) and ``MASTER_USE_GTID=slave_pos`` from the primary's position at start.
Only the test's database is replicated (``replicate_wild_do_table``): other tests write to the
shared primary at the same time and their databases do not exist here.
"""

from __future__ import annotations

import dataclasses
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql

from sluice.connectors.cdc.mysql.gtid import GtidSet
from sluice.deploy.local.mariadb import MariaDB
from sluice.worker.settings import settings
from tests.databases import TestDatabase


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Replica:
    host: str
    port: int
    user: str
    password: str
    primary: dict[str, Any]

    def connect(self, **kw: Any) -> Any:
        return pymysql.connect(
            host=self.host, port=self.port, user=self.user, password=self.password, autocommit=True, **kw
        )

    def run(self, *statements: str) -> list[tuple[Any, ...]]:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                for sql in statements:
                    cur.execute(sql)
                return list(cur.fetchall()) if cur.description else []
        finally:
            conn.close()

    def caught_up(self, timeout_s: float = 30.0) -> None:
        """Wait until the replica has applied everything the primary has logged by now."""
        conn = pymysql.connect(**self.primary, autocommit=True)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT @@gtid_binlog_pos")
                wanted = GtidSet.parse(str(cur.fetchone()[0]))
        finally:
            conn.close()
        deadline = time.monotonic() + timeout_s
        while True:
            pos, io, sql_running, error = self.status()
            if GtidSet.parse(pos).covers(wanted):
                return
            if time.monotonic() > deadline or error:
                raise AssertionError(
                    f"replica not caught up with {wanted}: at {pos} ({io}/{sql_running}) {error}"
                )
            time.sleep(0.1)

    def purge_binlogs(self, timeout_s: float = 20.0) -> str:
        """Start a new binlog file and purge every older one (MariaDB keeps a file until its binlog
        checkpoint has moved past it, so this retries); the remaining file's name."""
        self.run("FLUSH BINARY LOGS")
        newest = str(self.run("SHOW BINARY LOGS")[-1][0])
        deadline = time.monotonic() + timeout_s
        while len(self.run("SHOW BINARY LOGS")) > 1:
            if time.monotonic() > deadline:
                raise AssertionError(f"the replica kept binlog files older than {newest}")
            self.run(f"PURGE BINARY LOGS TO '{newest}'")
            time.sleep(0.2)
        return newest

    def status(self) -> tuple[str, str, str, str]:
        conn = self.connect(cursorclass=pymysql.cursors.DictCursor)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT @@gtid_slave_pos AS pos")
                pos = str(cur.fetchone()["pos"])
                cur.execute("SHOW SLAVE STATUS")
                row = cur.fetchone() or {}
        finally:
            conn.close()
        error = str(row.get("Last_SQL_Error") or row.get("Last_IO_Error") or "")
        return pos, str(row.get("Slave_IO_Running")), str(row.get("Slave_SQL_Running")), error


@contextmanager
def mariadb_replica(db: TestDatabase, extra_args: Sequence[str] = ()) -> Iterator[Replica]:
    """A running replica of the stack's MariaDB replicating ``db`` (created on it first)."""
    stack = settings().stack
    state = Path(tempfile.mkdtemp(prefix="sluice-replica-"))
    cfg = dataclasses.replace(stack, state_dir=state, mariadb_port=_free_port())
    args = ["--log-slave-updates=ON", f"--replicate-wild-do-table={db.name}.%", "--skip-slave-start"]
    server = MariaDB(cfg, server_id=2, extra_args=[*args, *extra_args])
    primary = {
        "host": stack.host,
        "port": stack.mariadb_port,
        "user": stack.mariadb_user,
        "password": stack.mariadb_password,
    }
    try:
        server.start()
        replica = Replica(cfg.host, cfg.mariadb_port, cfg.mariadb_user, cfg.mariadb_password, primary)
        conn = pymysql.connect(**primary)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT @@gtid_binlog_pos")
                start = str(cur.fetchone()[0])
        finally:
            conn.close()
        replica.run(
            "SET SESSION sql_log_bin = 0",
            f"CREATE DATABASE IF NOT EXISTS `{db.name}`",
            f"SET GLOBAL gtid_slave_pos = '{start}'",
            f"CHANGE MASTER TO MASTER_HOST='{stack.host}', MASTER_PORT={stack.mariadb_port}, "
            f"MASTER_USER='{stack.mariadb_user}', MASTER_PASSWORD='{stack.mariadb_password}', "
            "MASTER_USE_GTID=slave_pos",
            "START SLAVE",
        )
        yield replica
    finally:
        server.stop()
        shutil.rmtree(state, ignore_errors=True)
