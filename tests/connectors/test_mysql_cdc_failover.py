"""mysql-cdc across a real failover: capture from the stack's MariaDB, commit some batches, then
point the connector at a GTID replica of it (tests/cdc/replica.py: another server, its own binlog
files and positions) and go on — the planner relocates the committed positions by their GTID sets
(connectors.cdc.mysql.failover), and every change written is read exactly once, in order; a batch
planned on the old server and never committed is re-read on the new one with the same records. A
GTID set the new server has purged is data loss naming it."""

from __future__ import annotations

import uuid

import pytest

from sluice.connectors.cdc.mysql.source import MySqlCdcConnector, MySqlCdcTask
from sluice.connectors.data_loss import DataLossError
from sluice.connectors.model import BatchPlan
from sluice.connectors.planner import PlanRequest, plan_next, view_of
from sluice.connectors.positions import PartitionKey, Position
from tests.cdc.mysql import source_config
from tests.cdc.replica import Replica, mariadb_replica
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase

Event = tuple[str | None, int, str | None]  # (op, id, v after); op None: a tombstone


def _task(raw: dict[str, str], replica: Replica | None = None) -> MySqlCdcTask:
    if replica is not None:  # the same connector, reconfigured to the new server
        raw = {**raw, "database.hostname": replica.host, "database.port": str(replica.port)}
    connector = MySqlCdcConnector()
    assert connector.validate(raw) == []
    config = connector.parse(raw)
    connector.start(config)
    return MySqlCdcTask(config, 0)


class Capture:
    """The runtime's part, against an in-memory store: plan (relocation first, moved positions
    stored before the plan), read, commit."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.committed: dict[PartitionKey, Position] = {}
        self.batch = 0

    def plan(self, task: MySqlCdcTask) -> BatchPlan | None:
        decision = plan_next(PlanRequest(self.name, 0, self.batch, dict(self.committed)), view_of(task))
        self.committed.update(decision.moved)
        return decision.plan

    def commit(self, plan: BatchPlan) -> None:
        self.committed.update({PartitionKey(r.partition): r.end for r in plan.ranges})
        self.batch = plan.batch_id + 1

    def run(self, task: MySqlCdcTask, want: int) -> list[Event]:
        """Batches until ``want`` records are read, then one more that must read none. (Other
        tests write to the shared server too, so the log's end keeps moving: "until no plan"
        would not end.)"""
        out: list[Event] = []
        for _ in range(500):
            plan = self.plan(task)
            if plan is not None:
                out += read(task, plan)
                self.commit(plan)
            if len(out) >= want:
                extra = self.plan(task)
                if extra is not None:
                    out += read(task, extra)
                    self.commit(extra)
                return out
        raise AssertionError(f"capture read {len(out)} of {want} records")


def read(task: MySqlCdcTask, plan: BatchPlan) -> list[Event]:
    """What the batch's records say (the changes ``read`` makes its frame of; the frame itself is
    tested in test_mysql_cdc.py — no Spark here, to keep this test fast)."""
    out: list[Event] = []
    for r in plan.ranges:
        for change in task.changes_of(r):
            doc, key = change.record.value, change.record.key
            if doc is None:
                out.append((None, key["id"], None))
            elif doc["op"] == "d":
                out.append(("d", doc["before"]["id"], None))
            else:
                out.append((doc["op"], doc["after"]["id"], doc["after"]["v"]))
    return out


class Writer:
    """Writes changes to the primary and what capture must read of them."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.expected: list[Event] = []

    def insert(self, *ids: int) -> None:
        for i in ids:
            self.db.run(f"INSERT INTO t VALUES ({i}, 'v{i}')")
            self.expected.append(("c", i, f"v{i}"))

    def update(self, i: int, v: str) -> None:
        self.db.run(f"UPDATE t SET v = '{v}' WHERE id = {i}")
        self.expected.append(("u", i, v))

    def delete(self, i: int) -> None:
        self.db.run(f"DELETE FROM t WHERE id = {i}")
        self.expected += [("d", i, None), (None, i, None)]


def _servers(capture: Capture) -> set[str]:
    return {p.get("server") for p in capture.committed.values()}


def _capturing(db: TestDatabase, **extra: str) -> tuple[dict[str, str], MySqlCdcTask, Capture, Writer]:
    """Table ``t`` in ``db``, a task capturing it from now on (nothing read yet), and its writer."""
    src = Db.of(db)
    src.run("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    raw = {"name": f"cdc-{uuid.uuid4().hex[:6]}", **source_config(db, "shop", **extra)}
    task = _task(raw)
    capture = Capture(raw["name"])
    assert capture.plan(task) is None  # capture starts here
    return raw, task, capture, Writer(src)


def test_failover_to_a_replica_reads_every_change_exactly_once(mariadb_db: TestDatabase) -> None:
    with mariadb_replica(mariadb_db) as replica:
        raw, primary, capture, writes = _capturing(mariadb_db, **{"batch.max.records": "2"})
        writes.insert(1, 2, 3, 4, 5)
        writes.update(2, "two")
        writes.delete(1)
        got: list[Event] = []
        for _ in range(2):  # some batches commit on the primary
            plan = capture.plan(primary)
            assert plan is not None
            got += read(primary, plan)
            capture.commit(plan)
        assert _servers(capture) == {"server_id 1"}
        assert all(p.get("gtids").startswith("0-") for p in capture.committed.values())
        pending = capture.plan(primary)  # planned and read, then the primary fails before the commit
        assert pending is not None
        sent = read(primary, pending)
        primary.close()

        replica.caught_up()
        standby = _task(raw, replica)
        assert read(standby, pending) == sent  # the re-run on the new server: same records
        got += sent
        capture.commit(pending)
        writes.insert(6, 7)  # written on the primary, read from the replica's binlog
        writes.update(6, "six")
        writes.delete(4)
        replica.caught_up()
        got += capture.run(standby, len(writes.expected) - len(got))
        standby.close()
        assert _servers(capture) == {"server_id 2"}  # relocated onto the replica's binlog
        assert got == writes.expected


def test_a_gtid_set_the_new_server_purged_is_data_loss_naming_it(mariadb_db: TestDatabase) -> None:
    with mariadb_replica(mariadb_db) as replica:
        raw, primary, capture, writes = _capturing(mariadb_db)
        writes.insert(1)
        assert capture.run(primary, len(writes.expected)) == writes.expected
        (committed,) = capture.committed.values()
        primary.close()
        writes.insert(2, 3)  # replicated, then purged from the replica's binlog
        replica.caught_up()
        replica.purge_binlogs()
        standby = _task(raw, replica)
        with pytest.raises(DataLossError, match=f"GTID set '{committed.get('gtids')}'") as lost:
            capture.plan(standby)
        assert "server_id 2" in str(lost.value) and "were purged there" in str(lost.value)
        standby.close()


def test_the_set_a_batch_carries_is_the_servers_own_and_old_positions_get_theirs(
    mariadb_db: TestDatabase,
) -> None:
    """The set is computed from what the batch read; it must be what MariaDB itself says the GTID
    position is at that binlog position. A position stored before sets were kept (no meta) gets its
    set at the next planning, and the planner stores that move."""
    _, task, capture, writes = _capturing(mariadb_db)
    writes.insert(1, 2)
    writes.delete(2)
    assert capture.run(task, len(writes.expected)) == writes.expected
    (key, end), base = next(iter(capture.committed.items())), task._base
    (server_says,) = writes.db.run(f"SELECT BINLOG_GTID_POS('{base}.{end.key[0]:06d}', {end.key[1]})")
    assert end.get("gtids") == server_says[0] and end.get("server") == "server_id 1"

    capture.committed = {key: Position(end.key)}  # as stored by a Sluice before GTID positions
    writes.insert(3)
    plan = capture.plan(task)
    assert capture.committed[key] == end  # stamped and stored before the plan
    assert plan is not None and read(task, plan) == [("c", 3, "v3")]
    task.close()


def test_gtid_source_excludes_leaves_out_the_new_servers_own_domain(mariadb_db: TestDatabase) -> None:
    """Writes made on the replica itself (its own domain 5) are in no position the primary gave:
    once the replica purged the files before them, its binlog starts at a set the position lacks
    — data loss — unless ``gtid.source.excludes`` leaves that domain out (Debezium's key)."""
    with mariadb_replica(mariadb_db) as replica:
        raw, primary, capture, writes = _capturing(mariadb_db)
        writes.insert(1)
        assert capture.run(primary, 1) == writes.expected
        primary.close()
        replica.caught_up()
        replica.run(
            "SET SESSION gtid_domain_id = 5",
            "CREATE DATABASE replica_local",
            "CREATE TABLE replica_local.x (id INT PRIMARY KEY)",
            "INSERT INTO replica_local.x VALUES (1)",
        )
        replica.purge_binlogs()
        standby = _task(raw, replica)
        with pytest.raises(DataLossError, match="5-2-"):
            capture.plan(standby)
        standby.close()

        writes.insert(2)
        replica.caught_up()
        standby = _task({**raw, "gtid.source.excludes": "5"}, replica)
        assert capture.run(standby, 1) == [("c", 2, "v2")]
        assert _servers(capture) == {"server_id 2"}
        standby.close()
