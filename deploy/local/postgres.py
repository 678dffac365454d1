"""A private PostgreSQL cluster in the state folder, from Debian's packages.

No system service is assumed: the cluster is initdb'ed under ``<state>/postgres`` and run with
``pg_ctl`` on 127.0.0.1 only. PostgreSQL refuses to run as root, so as root the server runs as the
``postgres`` system user (created by Debian's package) and owns only its own data folder.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
from pathlib import Path

from sluice.deploy.local.config import StackConfig
from sluice.deploy.local.process import ManagedProcess, StackError, apt_install, ensure_port_free, wait_until

SERVICE = "postgres"


def _bin_dir() -> Path | None:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=_version_key, reverse=True)
    return Path(candidates[0]).parent if candidates else None


def _version_key(path: str) -> int:
    try:
        return int(Path(path).parts[-3])
    except ValueError:
        return 0


def ensure_installed() -> Path:
    """Return PostgreSQL's bin folder, installing Debian's package when missing."""
    found = _bin_dir()
    if found:
        return found
    apt_install(SERVICE, "postgresql", "postgresql")
    found = _bin_dir()
    if not found:
        raise StackError(
            "postgres: apt-get installed postgresql but no pg_ctl was found under /usr/lib/postgresql"
        )
    return found


def _run_as() -> list[str]:
    """Prefix that runs a PostgreSQL command as a non-root user."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "postgres"], check=True)
    return ["runuser", "-u", "postgres", "--"]


def _chown_to_postgres(path: Path) -> None:
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        for p in [path, *path.rglob("*")]:
            os.chown(p, entry.pw_uid, entry.pw_gid)


class Postgres:
    def __init__(self, cfg: StackConfig) -> None:
        self.cfg = cfg
        self.data_dir = cfg.state_dir / "postgres" / "data"
        self.socket_dir = cfg.state_dir / "postgres" / "socket"
        self.proc = ManagedProcess(SERVICE, cfg.state_dir)

    def _initdb(self, bin_dir: Path) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        _chown_to_postgres(self.data_dir.parent)
        # The state folder must be traversable by the postgres user.
        for parent in (self.cfg.state_dir, self.data_dir.parent):
            parent.chmod(parent.stat().st_mode | 0o711)
        if os.geteuid() == 0:
            for ancestor in self.cfg.state_dir.parents:
                if not ancestor.stat().st_mode & 0o001:
                    raise StackError(
                        f"postgres: the server runs as user 'postgres', which cannot enter {ancestor}; "
                        f"choose a state folder elsewhere with SLUICE_STATE_DIR or `chmod o+x {ancestor}`"
                    )
        result = subprocess.run(
            [
                *_run_as(),
                str(bin_dir / "initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            raise StackError(f"postgres: initdb failed: {result.stderr.strip()[-800:]}")

    def start(self) -> None:
        if self.healthy():
            return
        bin_dir = ensure_installed()
        ensure_port_free(SERVICE, self.cfg.host, self.cfg.pg_port, "SLUICE_PG_PORT")
        self._initdb(bin_dir)
        self.proc.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.proc.start(
            [
                *_run_as(),
                str(bin_dir / "postgres"),
                "-D",
                str(self.data_dir),
                "-p",
                str(self.cfg.pg_port),
                "-c",
                f"listen_addresses={self.cfg.host}",
                "-c",
                f"unix_socket_directories={self.socket_dir}",
                "-c",
                "max_connections=200",
                "-c",
                "fsync=on",
                "-c",
                "shared_buffers=256MB",
                # Logical decoding (change data capture from PostgreSQL).
                "-c",
                "wal_level=logical",
                "-c",
                "max_replication_slots=20",
                "-c",
                "max_wal_senders=20",
            ],
        )
        wait_until(self._accepts_queries, service=SERVICE, proc=self.proc, timeout_s=60)
        self._ensure_role_and_database(bin_dir)

    def _psql(self, sql: str, database: str = "postgres") -> subprocess.CompletedProcess[str]:
        bin_dir = _bin_dir()
        psql = str(bin_dir / "psql") if bin_dir else "psql"
        return subprocess.run(
            [
                psql,
                "-h",
                self.cfg.host,
                "-p",
                str(self.cfg.pg_port),
                "-U",
                "postgres",
                "-d",
                database,
                "-v",
                "ON_ERROR_STOP=1",
                "-Atc",
                sql,
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )

    def _accepts_queries(self) -> bool:
        return self._psql("SELECT 1").stdout.strip() == "1"

    def _ensure_role_and_database(self, bin_dir: Path) -> None:
        user, db = self.cfg.pg_user, self.cfg.pg_database
        if self._psql(f"SELECT 1 FROM pg_roles WHERE rolname='{user}'").stdout.strip() != "1":
            self._check(self._psql(f'CREATE ROLE "{user}" LOGIN SUPERUSER'))
        if self._psql(f"SELECT 1 FROM pg_database WHERE datname='{db}'").stdout.strip() != "1":
            self._check(self._psql(f'CREATE DATABASE "{db}" OWNER "{user}"'))

    def _check(self, result: subprocess.CompletedProcess[str]) -> None:
        if result.returncode != 0:
            raise StackError(f"postgres: {result.stderr.strip()}; see {self.proc.log_file}")

    def healthy(self) -> bool:
        """A real query as the runtime's user against the runtime's database."""
        if not self.proc.is_running():
            return False
        result = self._psql("SELECT 1", database=self.cfg.pg_database)
        return result.returncode == 0 and result.stdout.strip() == "1"

    def stop(self) -> None:
        # SIGINT is PostgreSQL's "fast" shutdown: it does not wait for clients to disconnect.
        self.proc.stop(timeout_s=30, stop_signal=signal.SIGINT)
