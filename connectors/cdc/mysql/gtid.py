"""GTID sets, MariaDB's and MySQL's, as plain values: parse, format, add, contains, covers.

A mysql-cdc position carries the GTID set reached at it (position meta ``gtids``) so the connector
can find the same place on another server after a failover: binlog file names and byte positions
are one server's, GTIDs are the whole replication topology's.

The two servers mean different things by "a GTID set":

- **MariaDB** (``domain-server-seq``): within a replication domain sequence numbers only grow, so
  the state after a transaction is, per domain, the last GTID (``gtid_binlog_pos``,
  ``gtid_slave_pos``). A GTID ``d-s-n`` is contained in a set when the set's domain ``d`` is at
  ``n`` or beyond, whichever server wrote it — this is how a MariaDB replica decides what it already
  has. A binlog file's ``Gtid_list`` event (the binlog state: one entry per domain *and* server)
  reduces to the same per-domain form.
- **MySQL** (``uuid:1-100:105``): every transaction's number is kept, as intervals per source
  server UUID (``gtid_executed``, ``Previous_gtids``); containment is exact.

A set is of one flavour; the empty set is both (it is what a server without transactions has).
Everything here is pure and table-tested (tests/connectors/test_mysql_cdc_gtid.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

_MARIADB: Final = re.compile(r"^(\d+)-(\d+)-(\d+)$")
_MYSQL: Final = re.compile(r"^([0-9a-fA-F-]{36}):(\d+)$")


class GtidFormatError(ValueError):
    """Text that is not a GTID or GTID set of either flavour."""


@dataclass(frozen=True)
class MariaGtid:
    domain: int
    server: int
    seq: int

    def __str__(self) -> str:
        return f"{self.domain}-{self.server}-{self.seq}"


@dataclass(frozen=True)
class MysqlGtid:
    uuid: str
    number: int

    def __str__(self) -> str:
        return f"{self.uuid}:{self.number}"


Gtid = MariaGtid | MysqlGtid


def parse_gtid(text: str) -> Gtid:
    """One GTID: ``0-1-42`` (MariaDB) or ``3e11fa47-71ca-11e1-9e33-c80aa9429562:23`` (MySQL)."""
    text = text.strip()
    m = _MARIADB.match(text)
    if m:
        return MariaGtid(int(m[1]), int(m[2]), int(m[3]))
    m = _MYSQL.match(text)
    if m:
        return MysqlGtid(m[1].lower(), int(m[2]))
    raise GtidFormatError(f"{text!r} is not a GTID (domain-server-seq or uuid:number)")


Intervals = tuple[tuple[int, int], ...]  # inclusive, sorted, disjoint, not adjacent


def _merge(intervals: Iterable[tuple[int, int]]) -> Intervals:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(intervals):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


@dataclass(frozen=True)
class GtidSet:
    """A GTID set (see the module docstring). ``domains``: MariaDB, the last GTID of each domain,
    by domain; ``uuids``: MySQL, each source UUID's transaction numbers as inclusive intervals."""

    domains: tuple[MariaGtid, ...] = field(default=())
    uuids: tuple[tuple[str, Intervals], ...] = field(default=())

    # ---- text --------------------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> GtidSet:
        """``0-1-42,1-2-7`` or ``[0-1-42]`` (a Gtid_list event's text) or MySQL's
        ``uuid:1-5:7,uuid2:1-3`` (line breaks allowed, as MySQL prints long sets); ``""`` is empty."""
        body = text.strip().strip("[]").replace("\n", "").strip()
        if not body:
            return cls()
        parts = [p.strip() for p in body.split(",") if p.strip()]
        if all(_MARIADB.match(p) for p in parts):
            out = cls()
            for p in parts:
                out = out.add(p)
            return out
        uuids: dict[str, list[tuple[int, int]]] = {}
        for part in parts:
            uuid, _, ranges = part.partition(":")
            if len(uuid) != 36 or not ranges:
                raise GtidFormatError(f"{text!r} is not a GTID set: {part!r}")
            for r in ranges.split(":"):
                lo, _, hi = r.partition("-")
                if not lo.isdigit() or (hi and not hi.isdigit()):
                    raise GtidFormatError(f"{text!r} is not a GTID set: interval {r!r}")
                uuids.setdefault(uuid.lower(), []).append((int(lo), int(hi or lo)))
        return cls(uuids=tuple(sorted((u, _merge(iv)) for u, iv in uuids.items())))

    def __str__(self) -> str:
        if self.domains:
            return ",".join(str(g) for g in self.domains)
        return ",".join(
            u + "".join(f":{lo}" if lo == hi else f":{lo}-{hi}" for lo, hi in iv) for u, iv in self.uuids
        )

    def __bool__(self) -> bool:
        return bool(self.domains or self.uuids)

    # ---- arithmetic ----------------------------------------------------------------------------
    def _domain(self, domain: int) -> MariaGtid | None:
        return next((g for g in self.domains if g.domain == domain), None)

    def add(self, gtid: str | Gtid) -> GtidSet:
        """The set after the transaction ``gtid`` (MariaDB: its domain moves to it when it is newer)."""
        g = parse_gtid(gtid) if isinstance(gtid, str) else gtid
        if isinstance(g, MariaGtid):
            if self.uuids:
                raise GtidFormatError(f"MariaDB GTID {g} added to MySQL GTID set {self}")
            now = self._domain(g.domain)
            if now is not None and now.seq >= g.seq:
                return self
            kept = [d for d in self.domains if d.domain != g.domain]
            return GtidSet(domains=tuple(sorted([*kept, g], key=lambda d: d.domain)))
        if self.domains:
            raise GtidFormatError(f"MySQL GTID {g} added to MariaDB GTID set {self}")
        table = dict(self.uuids)
        table[g.uuid] = _merge([*table.get(g.uuid, ()), (g.number, g.number)])
        return GtidSet(uuids=tuple(sorted(table.items())))

    def union(self, other: GtidSet) -> GtidSet:
        out = self
        for g in other.domains:
            out = out.add(g)
        for uuid, iv in other.uuids:
            table = dict(out.uuids)
            table[uuid] = _merge([*table.get(uuid, ()), *iv])
            out = GtidSet(domains=out.domains, uuids=tuple(sorted(table.items())))
        return out

    def contains(self, gtid: str | Gtid) -> bool:
        """Whether the transaction ``gtid`` is already in this set (read before, or replicated)."""
        g = parse_gtid(gtid) if isinstance(gtid, str) else gtid
        if isinstance(g, MariaGtid):
            now = self._domain(g.domain)
            return now is not None and now.seq >= g.seq
        return any(lo <= g.number <= hi for lo, hi in dict(self.uuids).get(g.uuid, ()))

    def covers(self, other: GtidSet) -> bool:
        """Whether every transaction of ``other`` is in this set."""
        return all(self.contains(g) for g in other.domains) and all(
            any(lo <= a and b <= hi for lo, hi in dict(self.uuids).get(uuid, ()))
            for uuid, iv in other.uuids
            for a, b in iv
        )

    def beyond(self, other: GtidSet) -> str:
        """What ``other`` holds that this set lacks, as text for an error (MariaDB: the domains
        ``other`` is further in; MySQL: the UUIDs with transactions missing here)."""
        if other.domains:
            return ",".join(str(g) for g in other.domains if not self.contains(g))
        return ",".join(u for u, iv in other.uuids if not self.covers(GtidSet(uuids=((u, iv),))))

    def only(self, keep: Callable[[str], bool]) -> GtidSet:
        """The set restricted to the sources ``keep`` accepts (``source_filter``)."""
        return GtidSet(
            domains=tuple(g for g in self.domains if keep(str(g.domain))),
            uuids=tuple((u, iv) for u, iv in self.uuids if keep(u)),
        )


def source_of(gtid: str) -> str:
    """A transaction's source as ``gtid.source.includes`` names it: a MariaDB domain id, a MySQL
    server UUID."""
    g = parse_gtid(gtid)
    return str(g.domain) if isinstance(g, MariaGtid) else g.uuid


def source_filter(includes: Iterable[str] = (), excludes: Iterable[str] = ()) -> Callable[[str], bool]:
    """Debezium's ``gtid.source.includes``/``excludes``: regular expressions of sources whose
    transactions count when a position is found again on another server (none given: all)."""
    wanted = [re.compile(p) for p in includes]
    unwanted = [re.compile(p) for p in excludes]

    def keep(source: str) -> bool:
        if wanted and not any(p.fullmatch(source) for p in wanted):
            return False
        return not any(p.fullmatch(source) for p in unwanted)

    return keep
