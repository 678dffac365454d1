"""A private MariaDB server in the state folder, from Debian's packages (the MySQL-compatible source).

Like PostgreSQL, no system service is assumed: the datadir is created under ``<state>/mariadb``
with ``mariadb-install-db`` and ``mariadbd`` runs on 127.0.0.1 only. As root the server runs as
Debian's ``mysql`` user. Binary logging is on in ROW format with full row images and full row
metadata, which change data capture needs (column names and types in every row event), and the
server speaks UTF-8 (utf8mb4, so characters beyond the BMP) in UTC.

Sluice's user (``sluice``/``sluice`` by default, StackConfig) has every privilege, replication
included; it is a local development credential on a loopback-only server.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.process import ManagedProcess, StackError, apt_install, ensure_port_free, wait_until

SERVICE = "mariadb"
SERVER: Final = Path("/usr/sbin/mariadbd")
INSTALL_DB: Final = Path("/usr/bin/mariadb-install-db")
CLIENT: Final = Path("/usr/bin/mariadb")


def ensure_installed() -> None:
    """Install Debian's ``mariadb-server`` when missing (root only)."""
    if SERVER.exists() and INSTALL_DB.exists() and CLIENT.exists():
        return
    apt_install(SERVICE, "mariadb-server", "mariadb")
    if not SERVER.exists():
        raise StackError(f"mariadb: apt-get installed mariadb-server but {SERVER} is missing")


def _as_root() -> bool:
    return os.geteuid() == 0


def _chown_to_mysql(path: Path) -> None:
    if _as_root():
        entry = pwd.getpwnam("mysql")
        for p in [path, *path.rglob("*")]:
            os.chown(p, entry.pw_uid, entry.pw_gid)


class MariaDB:
    """The stack's server; ``server_id`` and ``extra_args`` let tests run a replica of it
    (tests/cdc/replica.py) from the same code."""

    def __init__(self, cfg: StackConfig, server_id: int = 1, extra_args: Sequence[str] = ()) -> None:
        self.cfg = cfg
        self.server_id = server_id
        self.extra_args = list(extra_args)
        self.base = cfg.state_dir / "mariadb"
        self.data_dir = self.base / "data"
        self.socket = self.base / "mariadb.sock"
        self.proc = ManagedProcess(SERVICE, cfg.state_dir)

    def _install_db(self) -> None:
        if (self.data_dir / "mysql").exists():
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for folder in (self.cfg.state_dir, self.base):
            folder.chmod(folder.stat().st_mode | 0o711)
        _chown_to_mysql(self.base)
        argv = [
            str(INSTALL_DB),
            "--no-defaults",
            f"--datadir={self.data_dir}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
        ]
        if _as_root():
            argv.append("--user=mysql")
        result = subprocess.run(argv, capture_output=True, text=True)
        if result.returncode != 0:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            raise StackError(f"mariadb: mariadb-install-db failed: {result.stderr.strip()[-800:]}")

    def server_argv(self) -> list[str]:
        argv = [
            str(SERVER),
            "--no-defaults",
            f"--datadir={self.data_dir}",
            f"--socket={self.socket}",
            f"--pid-file={self.base / 'mariadbd.pid'}",
            f"--port={self.cfg.mariadb_port}",
            f"--bind-address={self.cfg.host}",
            "--skip-name-resolve",
            f"--server-id={self.server_id}",
            f"--log-bin={self.data_dir / 'binlog'}",
            "--binlog-format=ROW",
            "--binlog-row-image=FULL",
            "--binlog-row-metadata=FULL",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_unicode_ci",
            "--default-time-zone=+00:00",
            "--local-infile=1",
            "--max-connections=300",
            "--innodb-buffer-pool-size=256M",
            "--innodb-flush-log-at-trx-commit=1",
            *self.extra_args,
        ]
        if _as_root():
            argv.append("--user=mysql")
        return argv

    def start(self) -> None:
        if self.healthy():
            return
        ensure_installed()
        ensure_port_free(SERVICE, self.cfg.host, self.cfg.mariadb_port, "SLUICE_MARIADB_PORT")
        self._install_db()
        self.proc.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.proc.start(self.server_argv())
        wait_until(self._root_answers, service=SERVICE, proc=self.proc, timeout_s=60)
        self._ensure_user_and_database()
        wait_until(self.healthy, service=SERVICE, proc=self.proc, timeout_s=30)

    def _root_sql(self, sql: str) -> subprocess.CompletedProcess[str]:
        """Run SQL as MariaDB's root over the socket (root may only log in locally)."""
        return subprocess.run(
            [str(CLIENT), "--no-defaults", f"--socket={self.socket}", "-uroot", "-N", "-B", "-e", sql],
            capture_output=True,
            text=True,
            timeout=30,
        )

    def _root_answers(self) -> bool:
        return self._root_sql("SELECT 1").stdout.strip() == "1"

    def _ensure_user_and_database(self) -> None:
        user, password, db = self.cfg.mariadb_user, self.cfg.mariadb_password, self.cfg.mariadb_database
        sql = (
            f"CREATE USER IF NOT EXISTS '{user}'@'%' IDENTIFIED BY '{password}'; "
            f"GRANT ALL PRIVILEGES ON *.* TO '{user}'@'%' WITH GRANT OPTION; "
            f"CREATE DATABASE IF NOT EXISTS `{db}`; FLUSH PRIVILEGES;"
        )
        result = self._root_sql(sql)
        if result.returncode != 0:
            raise StackError(
                f"mariadb: creating user {user!r}: {result.stderr.strip()}; see {self.proc.log_file}"
            )

    def healthy(self) -> bool:
        """A real query as Sluice's user over TCP, the way connectors connect."""
        if not self.proc.is_running():
            return False
        try:
            import pymysql  # here, not at the top: without PyMySQL the check falls back (below)
        except ImportError:  # the stack scripts run before the venv has it only in odd set-ups
            return self._root_answers()
        try:
            conn = pymysql.connect(
                host=self.cfg.host,
                port=self.cfg.mariadb_port,
                user=self.cfg.mariadb_user,
                password=self.cfg.mariadb_password,
                database=self.cfg.mariadb_database,
                connect_timeout=3,
            )
        except pymysql.MySQLError:
            return False
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT 1")
                return cur.fetchone() == (1,)
        finally:
            conn.close()

    def stop(self) -> None:
        # SIGTERM is mariadbd's clean shutdown (flushes InnoDB, closes the binlog).
        self.proc.stop(timeout_s=60)
