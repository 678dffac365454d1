"""`sluice connector backfill` before anything runs: a request checked against the connector's own
tasks and grouped (worker.backfills), its errors (one line, exit code, HTTP status), how requests
and their progress are shown, and the REST routes over a client that needs no services."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import httpx
import pytest
from sqlalchemy.exc import ProgrammingError

from sluice.connectors.backfills import Backfill
from sluice.connectors.key_chunks import Chunk, encode_key, partition_of
from sluice.connectors.positions import PartitionKey
from sluice.worker import cli_render as render
from sluice.worker.backfills import (
    BackfillAsk,
    BackfillStatus,
    backfill_statuses,
    cancel_backfill,
    planned_requests,
    request_backfill,
)
from sluice.worker.cli import main
from sluice.worker.client import SluiceClient
from sluice.worker.errors import (
    BackfillNotFoundError,
    BackfillRequestError,
    ConnectorConfigError,
    ConnectorNotFoundError,
)
from sluice.worker.rest.app import create_app
from sluice.worker.rest.deps import RestSettings
from sluice.worker.rest.errors import status_of
from tests.worker.backfill_fakes import FakeBackfillTask, MemoryStore, config

TABLES = ("shop.events", "shop.items", "shop.orders")  # sorted: the order of "every table"


@pytest.fixture(autouse=True)
def _no_tasks_left_open() -> Iterator[None]:
    FakeBackfillTask.opened.clear()
    yield
    assert all(t.closed for t in FakeBackfillTask.opened), "every task opened to check is closed"


def _store(*registered: str) -> MemoryStore:
    return MemoryStore(registered=set(registered))


# --- requests: grouping ------------------------------------------------------------------------------


def test_a_condition_is_one_request_of_every_table_the_tasks_read() -> None:
    store = _store("src")
    created = request_backfill(store, "src", config(*TABLES, tasks=2), BackfillAsk(where="id > 10"))
    assert [(r.tables, r.condition) for r in created] == [(TABLES, "id > 10")]
    assert len(FakeBackfillTask.opened) == 2  # each task asked about its own tables
    assert store.backfills("src") == created


def test_named_tables_keep_their_order_once_each() -> None:
    ask = BackfillAsk(("shop.events", "shop.orders", "shop.events"), where="1=1")
    planned = planned_requests("src", config(*TABLES), ask)
    assert planned == [(("shop.events", "shop.orders"), "1=1")]


def test_a_range_makes_one_request_per_distinct_condition() -> None:
    """orders and items share a default column (one request); events has another (its own)."""
    planned = planned_requests("src", config(*TABLES), BackfillAsk(low="2024-05-01"))
    assert planned == [
        (("shop.events",), "id >= '2024-05-01'"),
        (("shop.items", "shop.orders"), "created_at >= '2024-05-01'"),
    ]
    on_column = planned_requests("src", config(*TABLES), BackfillAsk(column="updated", low="1", high="9"))
    assert on_column == [(TABLES, "updated >= '1' AND updated < '9'")]


# --- requests: errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({}, "say what to re-read: a condition (where) or a range of a column (from/to)"),
        ({"column": "id"}, "a range needs from, to or both"),
        ({"where": "id > 1", "low": "1"}, "give a condition (where) or a range (from/to), not both"),
        ({"where": "  "}, "the condition is empty (to re-read every row, write 1=1)"),
    ],
)
def test_a_request_without_one_clear_range_is_refused(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(BackfillRequestError, match="^connector src: ") as caught:
        planned_requests("src", config(*TABLES), BackfillAsk(**kwargs))
    assert fragment in str(caught.value)
    assert FakeBackfillTask.opened == []  # refused before the source was asked


def test_an_unknown_table_is_named_with_the_connectors_tables() -> None:
    with pytest.raises(BackfillRequestError) as caught:
        planned_requests("src", config(*TABLES), BackfillAsk(("shop.orders", "shop.ordres"), where="1=1"))
    assert str(caught.value) == (
        "connector src does not read 'shop.ordres'; its tables: shop.events, shop.items, shop.orders"
    )


def test_a_long_table_list_is_cut() -> None:
    many = [f"t{i:03d}" for i in range(25)]
    with pytest.raises(BackfillRequestError, match=r"its tables: t000, .*, t019 and 5 more$"):
        planned_requests("src", config(*many), BackfillAsk(("nope",), where="1=1"))


def test_the_sources_objections_name_connector_and_table_all_at_once() -> None:
    with pytest.raises(BackfillRequestError) as caught:
        planned_requests("src", config("shop.orders", "shop.log", "misc.notes"), BackfillAsk(low="5"))
    assert str(caught.value) == (
        "connector src: table misc.notes: it has no timestamp, incrementing or one-column key column: "
        "name one (column); connector src: table shop.log: it has no primary key, so it cannot be read "
        "in key chunks"
    )
    with pytest.raises(BackfillRequestError) as caught:
        planned_requests("src", config("shop.orders"), BackfillAsk(where="(("))
    assert str(caught.value) == "connector 'src' table 'shop.orders': the condition '((' cannot be used"


def test_a_connector_whose_tasks_cannot_backfill_is_named() -> None:
    dummy = {"connector.class": "dummy-source", "topic": "t"}
    with pytest.raises(BackfillRequestError) as caught:
        planned_requests("src", dummy, BackfillAsk(where="1=1"))
    assert str(caught.value).startswith("connector src (dummy-source) cannot be backfilled: ")
    assert str(caught.value).endswith(" can)")  # the connectors that can, found, not listed by hand
    sink = {"connector.class": "dummy-sink", "topics": "t", "file": "/dev/null"}
    with pytest.raises(BackfillRequestError, match=r"connector sink \(dummy-sink\) cannot be backfilled"):
        planned_requests("sink", sink, BackfillAsk(where="1=1"))


def test_a_config_that_no_longer_validates_is_a_config_error() -> None:
    with pytest.raises(ConnectorConfigError, match="connector src has an invalid configuration"):
        planned_requests("src", {"connector.class": "no-such-connector"}, BackfillAsk(where="1=1"))
    unresolved = config(*TABLES, extra="${env:SLUICE_TEST_NO_SUCH_VARIABLE}")
    with pytest.raises(ConnectorConfigError, match="environment variable 'SLUICE_TEST_NO_SUCH_VARIABLE'"):
        planned_requests("src", unresolved, BackfillAsk(where="1=1"))


def test_a_store_that_does_not_know_the_connector_stores_nothing() -> None:
    """The store is found from this process's settings: the wrong one would keep requests no worker
    reads, so a connector it never registered is refused, naming the settings to check."""
    store = _store("other")
    with pytest.raises(BackfillRequestError, match="SLUICE_DATABASE_URL and SLUICE_STORE_SCHEMA") as caught:
        request_backfill(store, "src", config(*TABLES), BackfillAsk(where="1=1"))
    assert "connector src is not in the offset store MemoryStore()" in str(caught.value)
    assert store.requests == {}


class _Undefined(Exception):
    sqlstate = "42P01"  # PostgreSQL's undefined_table


class _Unmigrated(MemoryStore):
    """A schema no worker of this version migrated: its tables are not there."""

    def _missing(self, *args: object, **kwargs: object) -> Any:
        raise ProgrammingError("SELECT …", {}, _Undefined("relation does not exist"))

    connectors = backfills = cancel_backfills = _missing


def test_a_store_without_the_tables_is_named_with_its_settings() -> None:
    for call in (
        lambda: request_backfill(_Unmigrated(), "src", config(*TABLES), BackfillAsk(where="1=1")),
        lambda: backfill_statuses(_Unmigrated(), "src"),
        lambda: cancel_backfill(_Unmigrated(), "src"),
    ):
        with pytest.raises(BackfillRequestError) as caught:
            call()
        assert str(caught.value).startswith("connector src: the offset store MemoryStore() has no backfill")
        assert "SLUICE_DATABASE_URL and SLUICE_STORE_SCHEMA here are not the workers'" in str(caught.value)


def test_errors_have_their_exit_codes_and_http_statuses() -> None:
    refused, unknown = BackfillRequestError("src", "connector src: …"), BackfillNotFoundError("src", 7)
    assert (refused.exit_code, status_of(refused)) == (2, 400)
    assert (unknown.exit_code, status_of(unknown)) == (3, 404)
    assert str(unknown) == "connector src has no backfill request 7"


# --- progress and cancel ----------------------------------------------------------------------------


def _position(request: int, rows: int, done: bool, after: list[Any]) -> Any:
    chunk = Chunk(3, after, done, generation=2, signal=f"backfill-{request}", request=request, rows=rows)
    return chunk.position()


def _statuses() -> tuple[MemoryStore, list[BackfillStatus]]:
    store = _store("src")
    first = store.add_backfill("src", ["shop.orders", "shop.items"], "id > 1")
    store.add_backfill("src", ["shop.events"], "id > 2")
    store.cancel_backfills("src", first.id)
    store.positions = {
        PartitionKey(partition_of("shop.orders")): _position(1, 1200, False, [41]),
        PartitionKey(partition_of("shop.events")): _position(2, 50, True, [99]),
        PartitionKey("0", "some-topic"): _position(2, 1, False, [1]),  # a sink's queue: not read
    }
    return store, backfill_statuses(store, "src")


def test_progress_per_request_and_table() -> None:
    _, statuses = _statuses()
    assert [s.to_json() for s in statuses] == [
        {
            "id": 1,
            "tables": ["shop.orders", "shop.items"],
            "condition": "id > 1",
            "requested_ms": 1_700_000_000_001,
            "cancelled": True,
            "progress": [
                {"table": "shop.orders", "state": "running", "rows": 1200, "last_key": encode_key([41])},
                {"table": "shop.items", "state": "cancelled", "rows": 0, "last_key": None},
            ],
        },
        {
            "id": 2,
            "tables": ["shop.events"],
            "condition": "id > 2",
            "requested_ms": 1_700_000_000_002,
            "cancelled": False,
            "progress": [{"table": "shop.events", "state": "done", "rows": 50, "last_key": "[99]"}],
        },
    ]
    assert backfill_statuses(_store("src"), "src") == []


def test_cancel_one_all_and_an_unknown_one() -> None:
    store = _store("src")
    for where in ("a", "b", "c"):
        store.add_backfill("src", ["shop.orders"], where)
    assert cancel_backfill(store, "src", 2) == [2]
    assert cancel_backfill(store, "src", 2) == []  # cancelled before: nothing now, no error
    assert cancel_backfill(store, "src") == [1, 3]
    with pytest.raises(BackfillNotFoundError, match="connector src has no backfill request 9"):
        cancel_backfill(store, "src", 9)


# --- what people see ---------------------------------------------------------------------------------


def _text(renderable: Any) -> str:
    console = render.console()
    with console.capture() as captured:
        console.print(renderable)
    return captured.get()


def test_the_table_shows_each_request_and_table() -> None:
    _, statuses = _statuses()
    text = _text(render.backfills_table("src", statuses))
    lines = [" ".join(line.replace("│", " ").split()) for line in text.splitlines()]
    assert "backfills of src" in lines[0]
    assert any(line.startswith("1 shop.orders id > 1 running 1,200 [41]") for line in lines), text
    assert any(line.startswith("1 shop.items id > 1 cancelled 0 -") for line in lines), text
    assert any(line.startswith("2 shop.events id > 2 done 50 [99]") for line in lines), text
    assert "no backfill requests" in _text(render.backfills_table("src", []))


def test_status_shows_the_newest_requests_briefly() -> None:
    store = _store("src")
    for i in range(7):
        store.add_backfill("src", [f"t{i}"], "1=1")
    statuses = backfill_statuses(store, "src")
    text = _text(render.backfills_table("src", statuses, brief=True))
    assert "condition" not in text and "last key" not in text
    assert " t1 " not in text and " t2 " in text and " t6 " in text
    assert "2 older: sluice connector backfill src" in text


def test_created_requests_are_listed_with_what_to_do_next() -> None:
    created = [Backfill(4, ("shop.orders", "shop.items"), "created_at >= '2024-05-01'", 0)]
    text = _text(render.backfills_created("src", created))
    assert "4" in text and "shop.orders, shop.items" in text and "created_at >= '2024-05-01'" in text
    assert "progress: sluice connector backfill src; cancel: --cancel ID" in text


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--where", "x", "--cancel"], "give a range (--where, or --from/--to), --status or --cancel"),
        (["--status", "--from", "1"], "give a range (--where, or --from/--to), --status or --cancel"),
        (["3"], "a request ID goes with --cancel: sluice connector backfill src --cancel 3"),
        (["-t", "shop.orders"], "--table goes with the range to re-read"),
        (["--cancel", "x"], "Invalid value for 'ID'"),
    ],
)
def test_command_line_mistakes_are_one_line_and_exit_2(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["connector", "backfill", "src", *argv]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1 and fragment in lines[0], captured.err
    assert lines[0].startswith("sluice connector backfill: ")


# --- the client and the REST routes, with no services ---------------------------------------------------


@dataclass
class OfflineClient(SluiceClient):
    """SluiceClient with its Temporal calls answered here: one connector, ``src``."""

    configs: dict[str, dict[str, str]] = field(default_factory=dict)

    async def config(self, name: str) -> dict[str, str]:
        if name not in self.configs:
            raise ConnectorNotFoundError(name)
        return dict(self.configs[name])

    async def status(self, name: str) -> Any:
        return await self.config(name)


def _offline() -> OfflineClient:
    return OfflineClient(cast(Any, None), store=_store("src"), configs={"src": config(*TABLES)})


def test_the_client_checks_stores_lists_and_cancels() -> None:
    client = _offline()

    async def run() -> None:
        created = await client.backfill("src", ["shop.items"], low="2024-01-01", high="2024-02-01")
        assert [(r.id, r.tables) for r in created] == [(1, ("shop.items",))]
        assert created[0].condition == "created_at >= '2024-01-01' AND created_at < '2024-02-01'"
        assert [s.request.id for s in await client.backfills("src")] == [1]
        assert await client.cancel_backfill("src") == [1]
        with pytest.raises(ConnectorNotFoundError):
            await client.backfill("nope", where="1=1")

    asyncio.run(run())


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(RestSettings(token="t"), client=_offline())
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": "Bearer t"}
    async with httpx.AsyncClient(transport=transport, base_url="http://sluice", headers=headers) as h:
        yield h


async def test_rest_requests_list_and_cancel(http: httpx.AsyncClient) -> None:
    path = "/sluice/connectors/src/backfills"
    made = await http.post(path, json={"tables": ["shop.orders", "shop.events"], "from": 100})
    assert made.status_code == 201, made.text
    assert [(r["tables"], r["condition"]) for r in made.json()["backfills"]] == [
        (["shop.orders"], "created_at >= '100'"),
        (["shop.events"], "id >= '100'"),
    ]
    listed = (await http.get(path)).json()["backfills"]
    assert [(r["id"], [p["state"] for p in r["progress"]]) for r in listed] == [
        (1, ["waiting"]),
        (2, ["waiting"]),
    ]
    assert (await http.delete(f"{path}/2")).json() == {"cancelled": [2]}
    assert (await http.delete(path)).json() == {"cancelled": [1]}


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "fragment"),
    [
        ("POST", "src", {"tables": "shop.orders", "where": "1=1"}, 400, "'tables' must be a list of strings"),
        ("POST", "src", {"from": {"a": 1}}, 400, "field 'from' must be a string or a number"),
        ("POST", "src", {"where": 5}, 400, "fields 'where' and 'column' must be strings"),
        ("POST", "src", {}, 400, "connector src: say what to re-read"),
        ("POST", "src", {"tables": ["x"], "where": "1=1"}, 400, "connector src does not read 'x'"),
        ("POST", "nope", {"where": "1=1"}, 404, "connector nope not found"),
        ("GET", "nope", None, 404, "connector nope not found"),
        ("DELETE", "src/9", None, 404, "connector src has no backfill request 9"),
        ("DELETE", "src/0", None, 400, "invalid request"),
        ("DELETE", "src/x", None, 400, "invalid request"),
    ],
)
async def test_rest_errors_are_kafka_error_bodies(
    http: httpx.AsyncClient, method: str, path: str, body: Any, status: int, fragment: str
) -> None:
    url = f"/sluice/connectors/{path.split('/')[0]}/backfills" + (
        "/" + path.split("/")[1] if "/" in path else ""
    )
    answer = await http.request(method, url, content=json.dumps(body) if body is not None else None)
    assert answer.status_code == status, answer.text
    assert answer.json()["error_code"] == status and fragment in answer.json()["message"], answer.text


async def test_rest_changes_need_the_token(http: httpx.AsyncClient) -> None:
    path = "/sluice/connectors/src/backfills"
    assert (await http.post(path, json={"where": "1=1"}, headers={"Authorization": ""})).status_code == 401
    assert (await http.delete(path, headers={"Authorization": ""})).status_code == 401
    assert (await http.get(path, headers={"Authorization": ""})).status_code == 200


async def test_openapi_declares_the_bodies_and_statuses(http: httpx.AsyncClient) -> None:
    paths = (await http.get("/openapi.json")).json()["paths"]
    collection, one = (
        paths["/sluice/connectors/{name}/backfills"],
        paths["/sluice/connectors/{name}/backfills/{id}"],
    )
    assert set(collection) == {"post", "get", "delete"} and set(one) == {"delete"}
    body = collection["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert set(body["properties"]) == {"tables", "where", "column", "from", "to"}
    assert {"201", "400", "401", "404", "413", "500", "503"} <= set(collection["post"]["responses"])
    for operation in (collection["get"], collection["delete"], one["delete"]):
        assert {"200", "400", "401", "404", "500", "503"} <= set(operation["responses"])
