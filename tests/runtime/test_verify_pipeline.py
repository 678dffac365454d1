"""`sluice verify SOURCE SINK` on a running pipeline (MariaDB -> jdbc-source -> RocketMQ -> jdbc-sink ->
PostgreSQL, Confluent's configs with a router and a rename): followed from the connectors' configs
(secrets sealed in them): equal while rows are inserted during the compare (in flight: checked again
once the pipeline caught up), then every row changed behind the pipeline's back is found by key,
with the column, and nothing else (exit 1)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from sluice.worker.cli import main
from tests.connectors.jdbc_dbs import Db
from tests.databases import TestDatabase
from tests.rest.conftest import make_http
from tests.runtime.helpers import FAST_HEARTBEAT, wait_for
from tests.runtime.test_jdbc_pipeline_faults import MARIADB_ORDERS, _insert, _rows, _sink, _source


async def _verify(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    """The CLI in a thread (it runs its own event loop), its exit code and JSON answer."""
    capsys.readouterr()
    code = await asyncio.to_thread(main, ["verify", *args, "--output", "json"])
    out = capsys.readouterr()
    return code, json.loads(out.out) if code in (0, 1) else out.err


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_verify_follows_a_running_pipeline_and_finds_what_was_changed_behind_it(
    start_worker, sluice, mariadb_db: TestDatabase, postgres_db: TestDatabase,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setenv("SLUICE_TASK_QUEUE", sluice.task_queue)
    src = Db.of(mariadb_db)
    src.run(MARIADB_ORDERS)
    _insert(src, range(1, 3001))
    prefix, name = f"V{uuid.uuid4().hex[:6]}-", f"verify-{uuid.uuid4().hex[:8]}"
    start_worker()
    await sluice.create(f"{name}-src", {**_source(src, prefix, "incrementing"), **FAST_HEARTBEAT})
    sink = _sink(postgres_db, prefix, "upsert", **FAST_HEARTBEAT)
    sink["transforms"] = "route,rename"  # the sink's table calls `note` `remark`
    sink |= {"transforms.rename.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
             "transforms.rename.renames": "note:remark"}  # fmt: skip
    await sluice.create(f"{name}-sink", sink)
    await wait_for(lambda: len(_rows(postgres_db.url)) >= 3000, 300, "every row in PostgreSQL")

    # Rows inserted while the compare runs are in flight, not differences: checked again once the
    # pipeline has caught up with where the source was when the compare began (worker.verify.live).
    stop = threading.Event()

    def load() -> None:
        next_id = 3001
        while not stop.is_set():
            _insert(src, range(next_id, next_id + 50))
            next_id += 50
            time.sleep(0.05)

    loader = threading.Thread(target=load)
    loader.start()
    try:
        await asyncio.sleep(1)
        code, report = await _verify(capsys, f"{name}-src", f"{name}-sink")
    finally:
        stop.set()
        loader.join()
    assert code == 0, report
    await wait_for(lambda: _rows(postgres_db.url) == _rows(src.url), 300, "the copy caught up after the load")
    code, report = await _verify(capsys, f"{name}-src", f"{name}-sink", "--no-live")
    assert code == 0, report
    [table] = report["tables"]
    assert (table["source_table"], table["target_table"]) == ("orders", "orders") and table[
        "rows_compared"
    ] > 3000
    assert report["equal"] and table["missing"] == table["extra"] == table["different"] == []

    target = create_engine(postgres_db.url)
    with target.begin() as conn:  # behind the pipeline's back: it copies new ids only
        conn.execute(text("DELETE FROM orders WHERE id IN (17, 2999)"))
        conn.execute(text("UPDATE orders SET remark = 'changed' WHERE id = 1234"))
        conn.execute(text("UPDATE orders SET amount = amount + 0.01 WHERE id = 2000"))
        conn.execute(text("INSERT INTO orders (id, customer, amount, remark, updated_at) "
                          "VALUES (999999, 'x', 1, NULL, now())"))  # fmt: skip
    target.dispose()
    code, report = await _verify(capsys, f"{name}-src", f"{name}-sink")
    assert code == 1, report
    [table] = report["tables"]
    assert table["missing"] == [{"id": 17}, {"id": 2999}] and table["extra"] == [{"id": 999999}]
    assert table["different"] == [{"key": {"id": 1234}, "columns": ["note"]},
                                   {"key": {"id": 2000}, "columns": ["amount"]}]  # fmt: skip

    code, error = await _verify(capsys, f"{name}-src")  # not a direct pipeline: its sink is needed
    assert code == 2 and "is not a direct pipeline" in error and "Traceback" not in error

    # the same compare as a REST call and a client call (the server's and the caller's process)
    async with make_http(sluice) as http:
        answer = await http.post(
            "/sluice/verify", json={"connector": f"{name}-src", "sink_connector": f"{name}-sink"}
        )
        assert answer.status_code == 200 and answer.json() == {**report, "tables": answer.json()["tables"]}
        assert [(t["missing"], t["extra"], t["different"]) for t in answer.json()["tables"]] == [
            (table["missing"], table["extra"], table["different"])
        ]
        by_urls = {"source": mariadb_db.url, "target": postgres_db.url, "tables": ["orders"]}
        answer = await http.post("/sluice/verify", json=by_urls)  # `remark` is no column of the source's
        assert answer.status_code == 200 and answer.json()["tables"][0]["missing"] == [
            {"id": 17},
            {"id": 2999},
        ]
        answer = await http.post("/sluice/verify", json={**by_urls, "tables": ["nope"]})
        assert answer.status_code == 400 and "nope" in answer.text
    direct = await sluice.verify(f"{name}-src", f"{name}-sink")
    assert [d.key for d in direct.tables[0].different] == [{"id": 1234}, {"id": 2000}]

    # --repair writes the differing rows as the source has them (and deletes the extra one)
    code, report = await _verify(capsys, f"{name}-src", f"{name}-sink", "--repair")
    assert code == 0 and report["equal"], report
    assert _rows(postgres_db.url) == _rows(src.url)
    await sluice.delete(f"{name}-sink")
    await sluice.delete(f"{name}-src")
