"""GTID sets at mysql-cdc positions, and finding a position again on another server (failover).

A position's key ``(file index, byte position, seq)`` is only meaningful on the server that wrote
that binlog. So when the server has GTIDs (MariaDB always; MySQL with ``gtid_mode=ON``) every
position also carries, as meta (connectors.positions: meta travels without ordering):

- ``gtids``: the GTID set reached at the position (connectors.cdc.mysql.gtid), carried forward
  by the scan over every transaction read — computed from the log itself, so a re-read gives it
  again;
- ``server``: whose binlog the key is in (``server_id N`` for MariaDB, ``server_uuid U`` for
  MySQL: a replica must have its own, so a different value is a different server's log).

Relocation (``Gtids.relocate``, called by the task's ``relocate`` before the planner's data-loss
checks, which stores what moved before it records a plan):
  1. A committed position of another server, or whose binlog file is gone, with a known set ``T``.
  2. On the connected server, the newest binlog file whose start state (its ``Gtid_list`` /
     ``Previous_gtids`` event) is within ``T``; none: transactions missing from ``T`` were purged
     here — the data-loss error names ``T`` and what the server's oldest file starts at.
  3. In that file (and later ones), the first transaction not in ``T``: the position is where its
     GTID event starts (the log's end when there is none), with meta ``gtids=T``.
  4. Reading from there skips transactions already in ``T`` (connectors.cdc.mysql.changes.scan),
     so transactions that follow in another order on this server are neither lost nor read twice.
Steps 2-3 count only the sources ``gtid.source.includes``/``excludes`` accept (Debezium's keys):
a new server's own writes in its own domain are in no position the old server gave. The server is
asked with ``SHOW BINLOG EVENTS`` (paged) and MariaDB's ``BINLOG_GTID_POS``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sluice.connectors.cdc.mysql.binlog import fetch
from sluice.connectors.cdc.mysql.changes import file_index, file_name
from sluice.connectors.cdc.mysql.gtid import GtidSet, source_filter, source_of
from sluice.connectors.data_loss import DataLossError
from sluice.connectors.positions import Position

log = logging.getLogger(__name__)

GTIDS: Final = "gtids"
SERVER: Final = "server"
FIRST_EVENT: Final = 4  # a binlog file's first event follows its 4-byte magic number
PAGE: Final = 5000
_MARIADB_GTID: Final = re.compile(r"GTID (\d+-\d+-\d+)")
_MYSQL_GTID: Final = re.compile(r"'([0-9a-fA-F-]{36}:\d+)'")


@dataclass(frozen=True)
class Server:
    """The connected server: its flavour, identity (meta ``server``) and whether it has GTIDs."""

    flavor: str  # "mariadb" or "mysql"
    identity: str
    has_gtids: bool


def server_of(conn: Any) -> Server:
    version = str(fetch(conn, "SELECT @@version")[0][0])
    if "mariadb" in version.lower():
        return Server("mariadb", f"server_id {fetch(conn, 'SELECT @@server_id')[0][0]}", True)
    uuid = str(fetch(conn, "SELECT @@server_uuid")[0][0])
    try:
        mode = str(fetch(conn, "SELECT @@gtid_mode")[0][0])
    except Exception:  # noqa: BLE001 - a server too old to know GTIDs
        mode = "OFF"
    return Server("mysql", f"server_uuid {uuid}", mode.upper() == "ON")


def gtid_of(kind: str, info: str) -> str | None:
    """The GTID a ``SHOW BINLOG EVENTS`` row starts (MariaDB ``BEGIN GTID 0-1-5``, MySQL
    ``SET @@SESSION.GTID_NEXT= 'uuid:5'``); None for other events."""
    if kind != "Gtid":
        return None
    m = _MARIADB_GTID.search(info) or _MYSQL_GTID.search(info)
    return m[1] if m else None


def _events(conn: Any, file: str, start: int = FIRST_EVENT) -> Iterator[tuple[int, int, str, str]]:
    """``(position, end, type, info)`` of ``file``'s events from ``start``, a page at a time."""
    pos = start
    while True:
        rows = fetch(conn, f"SHOW BINLOG EVENTS IN %s FROM {int(pos)} LIMIT {PAGE}", (file,))
        for _, at, kind, _, end, info in rows:
            yield int(at), int(end), str(kind), str(info or "")
        if len(rows) < PAGE:
            return
        pos = int(rows[-1][4])


def file_start(conn: Any, file: str) -> GtidSet:
    """The GTID set before ``file``'s first transaction (its Gtid_list / Previous_gtids event)."""
    for _, _, kind, info in fetch_head(conn, file):
        if kind in ("Gtid_list", "Previous_gtids"):
            return GtidSet.parse(info)
    return GtidSet()


def fetch_head(conn: Any, file: str) -> list[tuple[int, int, str, str]]:
    rows = fetch(conn, "SHOW BINLOG EVENTS IN %s LIMIT 4", (file,))
    return [(int(r[1]), int(r[4]), str(r[2]), str(r[5] or "")) for r in rows]


def gtids_at(conn: Any, server: Server, file: str, pos: int) -> GtidSet:
    """The GTID set at ``file:pos`` of the connected server (MariaDB computes it; otherwise the
    file's start set plus the GTIDs of the file before ``pos``)."""
    if server.flavor == "mariadb":
        rows = fetch(conn, "SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
        if rows and rows[0][0] is not None:
            return GtidSet.parse(str(rows[0][0]))
    out = file_start(conn, file)
    for at, _, kind, info in _events(conn, file):
        if at >= pos:
            break
        gtid = gtid_of(kind, info)
        if gtid:
            out = out.add(gtid)
    return out


def locate(
    conn: Any, logs: Sequence[str], target: GtidSet, keep: Callable[[str], bool] = lambda _: True
) -> tuple[str, int] | None:
    """Where on the connected server reading resumes after ``target`` (steps 2-3 of the module
    docstring), counting only transactions of the sources ``keep`` accepts
    (``gtid.source.includes``/``excludes``); None when the server purged transactions ``target``
    lacks."""
    chosen = next(
        (i for i in range(len(logs) - 1, -1, -1) if target.covers(file_start(conn, logs[i]).only(keep))), None
    )
    if chosen is None:
        return None
    last = (logs[chosen], FIRST_EVENT)
    for name in logs[chosen:]:
        for at, end, kind, info in _events(conn, name):
            gtid = gtid_of(kind, info)
            if gtid is not None and keep(source_of(gtid)) and not target.contains(gtid):
                return name, at
            last = (name, end)
    return last


class Gtids:
    """A task's GTID bookkeeping: ``run(fn, *args)`` calls ``fn(conn, *args)`` on the task's
    connection (rebuilt after a failure), ``where`` names the connector in errors."""

    def __init__(
        self,
        run: Callable[..., Any],
        where: str,
        skip_loss: bool,
        includes: Sequence[str] = (),
        excludes: Sequence[str] = (),
    ) -> None:
        self.run = run
        self.where = where
        self.skip_loss = skip_loss
        self.keep = source_filter(includes, excludes)
        self._server: Server | None = None
        self._stamps: dict[tuple[Any, ...], Position] = {}

    def server(self) -> Server:
        if self._server is None:
            self._server = self.run(server_of)
        return self._server

    def forget_server(self) -> None:
        """The connection closed: the next one may be another server (a failover)."""
        self._server = None

    def start_set(self, pos: Position) -> GtidSet | None:
        """The set a read from ``pos`` carries forward (None: the server has no GTIDs)."""
        if not self.server().has_gtids:
            return None
        return GtidSet.parse(pos.get(GTIDS)) if pos.get(GTIDS) or pos.get(SERVER) else None

    def at(self, key: tuple[int, int, int], gtids: GtidSet | None) -> Position:
        """A position on the connected server with its meta."""
        if gtids is None:
            return Position(key)
        return Position(key, ((GTIDS, str(gtids)), (SERVER, self.server().identity)))

    def stamp(self, pos: Position, base: str, logs: Sequence[str]) -> Position:
        """``pos`` with the set reached there, when the server has GTIDs and ``pos`` (a position
        stored before GTIDs were kept, or a capture start) has none and its file is still here."""
        server = self.server()
        if not server.has_gtids or pos.get(SERVER) or file_name(base, int(pos.key[0])) not in logs:
            return pos
        cache = (server.identity, *pos.key)
        if cache not in self._stamps:
            gtids = self.run(gtids_at, server, file_name(base, int(pos.key[0])), int(pos.key[1]))
            self._stamps[cache] = Position(pos.key, pos.meta).with_meta(
                **{GTIDS: str(gtids), SERVER: server.identity}
            )
        return self._stamps[cache]

    def foreign(self, pos: Position, base: str, logs: Sequence[str]) -> bool:
        """Whether ``pos`` must be found again by its GTID set: another server's, or its file gone."""
        if not self.server().has_gtids or not pos.get(SERVER):
            return False
        return pos.get(SERVER) != self.server().identity or file_name(base, int(pos.key[0])) not in logs

    def relocate(self, pos: Position, logs: Sequence[str]) -> Position:
        """``pos`` found on the connected server by its GTID set (module docstring)."""
        target = GtidSet.parse(pos.get(GTIDS))
        cache = (self.server().identity, "relocate", str(target))
        if cache in self._stamps:
            return self._stamps[cache]
        found = self.run(locate, logs, target, self.keep)
        if found is None:
            oldest = self.run(file_start, logs[0]).only(self.keep)
            error = DataLossError(
                f"{self.where} binary log",
                f"changes after GTID set {str(target)!r} (position {pos})",
                f"are gone on {self.server().identity}: its oldest binlog file {logs[0]!r} starts at "
                f"GTID set {str(oldest)!r} (transactions up to {target.beyond(oldest) or str(oldest)!r} "
                "were purged there); keep binlog files longer than a connector may be stopped",
            )
            if not self.skip_loss:
                raise error
            log.warning("%s; data.loss=skip: continuing at the oldest binlog file", error)
            found = (logs[0], FIRST_EVENT)
        moved = self.at((file_index(found[0]), found[1], 0), target)
        log.info("%s: position %s relocated by its GTID set to %s", self.where, pos, moved)
        self._stamps[cache] = moved
        return moved
