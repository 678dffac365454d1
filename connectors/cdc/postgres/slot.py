"""The SQL side of PostgreSQL logical decoding: checks, publication, slot, peek and advance.

Everything goes through the SQL functions (psycopg 3 has no replication protocol): a batch peeks
``pg_logical_slot_peek_binary_changes`` up to a pinned LSN, which returns the same changes on every
call until the slot is advanced, and ``pg_replication_slot_advance`` moves the slot only after
the batch's positions are committed. LSNs are plain integers here (``hi << 32 | lo``).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from sluice.connectors.data_loss import DataLossError

PLUGIN: Final = "pgoutput"
_SESSION: Final = "-c TimeZone=UTC -c DateStyle=ISO -c bytea_output=hex -c extra_float_digits=3"


class SlotMissing(LookupError):
    """The replication slot does not exist (dropped while its connector ran: data loss)."""


def lsn_int(text: str) -> int:
    hi, _, lo = str(text).partition("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def lsn_text(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def default_name(connector: str) -> str:
    """A slot/publication name from the connector's name: PostgreSQL allows lower-case letters,
    digits and ``_`` in slot names, at most 63 characters."""
    return ("sluice_" + re.sub(r"[^a-z0-9_]", "_", connector.lower()))[:63]


@dataclass(frozen=True)
class Params:
    host: str
    port: int
    user: str
    password: str
    dbname: str

    def __repr__(self) -> str:  # never the password
        return f"Params({self.host}:{self.port}/{self.dbname}, user={self.user})"

    @property
    def place(self) -> str:
        return f"{self.host}:{self.port}/{self.dbname} as {self.user!r}"


def connect(params: Params, where: str) -> Any:
    """An autocommit session whose text output pgoutput values follow (UTC, ISO dates, hex bytea)."""
    import psycopg  # psycopg: config validation imports this module (the postgres-cdc class)

    try:
        return psycopg.connect(
            host=params.host,
            port=params.port,
            user=params.user,
            password=params.password or None,
            dbname=params.dbname,
            autocommit=True,
            connect_timeout=10,
            options=_SESSION,
        )
    except Exception as exc:
        detail = str(exc).replace(params.password, "********") if params.password else str(exc)
        place = params.place
        raise ConnectionError(f"{where}: cannot connect to PostgreSQL {place}: {detail[:300]}") from None


def fetch(conn: Any, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    with contextlib.closing(conn.cursor()) as cur:
        cur.execute(sql, params)
        return [tuple(r) for r in cur.fetchall()] if cur.description else []


# ---- checks ----------------------------------------------------------------------------------
def server_problems(conn: Any) -> list[tuple[str, str]]:
    """(field, message) for a server that cannot do logical decoding for this user."""
    out = []
    wal_level = fetch(conn, "SHOW wal_level")[0][0]
    if wal_level != "logical":
        out.append(
            (
                "database.hostname",
                f"wal_level is {wal_level!r}; logical decoding needs wal_level=logical "
                "(set it in postgresql.conf and restart PostgreSQL)",
            )
        )
    rep, sup = fetch(conn, "SELECT rolreplication, rolsuper FROM pg_roles WHERE rolname = current_user")[0]
    if not (rep or sup):
        out.append(
            (
                "database.user",
                "the user has no REPLICATION privilege (ALTER ROLE <user> WITH REPLICATION, "
                "or connect as a user that has it)",
            )
        )
    return out


@dataclass(frozen=True)
class TableFacts:
    name: str  # schema.table
    primary_key: tuple[str, ...]
    replica_identity: str  # d default, n nothing, f full, i index


def list_tables(conn: Any) -> list[TableFacts]:
    """Every ordinary or partitioned table outside the system schemas, with its primary key."""
    rows = fetch(
        conn,
        """
        SELECT n.nspname || '.' || c.relname, c.relreplident,
               COALESCE((SELECT array_agg(a.attname::text ORDER BY k.ord)
                         FROM pg_index i
                         CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
                         JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
                         WHERE i.indrelid = c.oid AND i.indisprimary), '{}')
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
          AND n.nspname NOT LIKE 'pg_toast%%' AND n.nspname NOT LIKE 'pg_temp%%'
        ORDER BY 1
        """,
    )
    return [TableFacts(str(name), tuple(keys or ()), str(ident)) for name, ident, keys in rows]


# ---- publication and slot --------------------------------------------------------------------
def _quoted(table: str) -> str:
    schema, _, name = table.partition(".")
    return '"' + schema.replace('"', '""') + '"."' + name.replace('"', '""') + '"'


def ensure_publication(conn: Any, name: str, mode: str, tables: Sequence[str]) -> None:
    """The publication exists (``disabled``: must already), for all tables or exactly ``tables``
    (``filtered``: an existing one is set to them, as Debezium does)."""
    exists = bool(fetch(conn, "SELECT 1 FROM pg_publication WHERE pubname = %s", (name,)))
    ident = '"' + name.replace('"', '""') + '"'
    listed = ", ".join(_quoted(t) for t in tables)
    if mode == "disabled":
        if not exists:
            raise LookupError(
                f"publication {name!r} does not exist and publication.autocreate.mode is disabled "
                f"(CREATE PUBLICATION {name} FOR TABLE ... or set publication.autocreate.mode=filtered)"
            )
        return
    if mode == "all_tables" and not exists:
        fetch(conn, f"CREATE PUBLICATION {ident} FOR ALL TABLES")
    elif mode == "filtered" and not exists:
        fetch(conn, f"CREATE PUBLICATION {ident} FOR TABLE {listed}")
    elif mode == "filtered":
        fetch(conn, f"ALTER PUBLICATION {ident} SET TABLE {listed}")


def slot_lost(where: str, slot: str, first: str) -> DataLossError:
    """The data loss of a slot dropped while positions (``first``: the oldest) were committed."""
    return DataLossError(
        f"{where} replication slot {slot!r}",
        f"changes from position {first}",
        "are gone: the slot was dropped while positions were committed (PostgreSQL keeps WAL "
        "for a logical consumer only while its slot exists)",
    )


@dataclass(frozen=True)
class SlotInfo:
    plugin: str
    database: str
    confirmed_flush: int


def slot_info(conn: Any, slot: str) -> SlotInfo | None:
    rows = fetch(
        conn,
        "SELECT plugin, database, confirmed_flush_lsn::text FROM pg_replication_slots "
        "WHERE slot_name = %s AND slot_type = 'logical'",
        (slot,),
    )
    if not rows:
        return None
    plugin, database, confirmed = rows[0]
    return SlotInfo(str(plugin), str(database), lsn_int(confirmed) if confirmed else 0)


def create_slot(conn: Any, slot: str) -> int:
    """Create the slot with pgoutput; returns its consistent point."""
    rows = fetch(conn, "SELECT lsn::text FROM pg_create_logical_replication_slot(%s, %s)", (slot, PLUGIN))
    return lsn_int(rows[0][0])


def flush_lsn(conn: Any) -> int:
    return lsn_int(fetch(conn, "SELECT pg_current_wal_flush_lsn()::text")[0][0])


def peek(
    conn: Any, slot: str, publication: str, upto_lsn: int, upto_changes: int | None
) -> list[tuple[int, bytes]]:
    """``(lsn, pgoutput message)`` rows of the slot's changes up to ``upto_lsn`` (and about
    ``upto_changes`` rows, whole transactions), without consuming them."""
    try:
        rows = fetch(
            conn,
            "SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes("
            "%s, %s::pg_lsn, %s, 'proto_version', '1', 'publication_names', %s)",
            (slot, lsn_text(upto_lsn), upto_changes, publication),
        )
    except Exception as exc:
        if "does not exist" in str(exc) and "slot" in str(exc):
            raise SlotMissing(slot) from None
        raise
    return [(lsn_int(lsn), bytes(data)) for lsn, data in rows]


def advance(conn: Any, slot: str, lsn: int) -> None:
    """Move the slot's confirmed position to ``lsn`` when it is behind (never backwards)."""
    info = slot_info(conn, slot)
    if info is None:
        raise SlotMissing(slot)
    if lsn > info.confirmed_flush:
        fetch(conn, "SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (slot, lsn_text(lsn)))
