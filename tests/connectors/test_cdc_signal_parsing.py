"""Pure parts of on-demand snapshots: signal rows as Debezium users write them (connectors.cdc.signals)
and the snapshot generations they open or stop, the reconciliation filter and key-derived offsets
(connectors.cdc.ondemand). The databases are exercised in test_{mysql,postgres}_cdc_signal.py."""

from __future__ import annotations

import json
import logging

import pytest

from sluice.connectors.cdc import ondemand as od
from sluice.connectors.cdc.signals import EXECUTE, STOP, Signal, parse
from sluice.connectors.cdc.snapshot import Chunk, Rows, finished, first_position, partition_of
from sluice.connectors.jdbc.types import MappedColumn
from sluice.connectors.positions import Position

CAPTURED = ["shop.orders", "shop.customers", "shop.order_lines"]


def _row(sid: str, kind: str, data: object) -> dict[str, str]:
    return {"id": sid, "type": kind, "data": data if isinstance(data, str) else json.dumps(data)}


@pytest.mark.parametrize(
    ("row", "want"),
    [
        (
            _row("a", EXECUTE, {"data-collections": ["shop.orders"], "type": "incremental"}),
            (EXECUTE, ("shop.orders",)),
        ),
        (
            _row("b", EXECUTE, {"data-collections": ["shop.orders"]}),
            (EXECUTE, ("shop.orders",)),
        ),  # type defaults
        (
            _row("c", EXECUTE, {"data-collections": ["shop.orders"], "type": "BLOCKING"}),
            (EXECUTE, ("shop.orders",)),
        ),
        (
            _row("d", EXECUTE, {"data-collections": ["shop\\.order.*"]}),
            (EXECUTE, ("shop.orders", "shop.order_lines")),
        ),
        (
            _row("e", STOP, {"data-collections": ["shop.customers"], "type": "incremental"}),
            (STOP, ("shop.customers",)),
        ),
        (_row("f", STOP, {"type": "incremental"}), (STOP, tuple(CAPTURED))),  # no list: every table
    ],
)
def test_signals_debezium_users_write_are_understood(
    row: dict[str, str], want: tuple[str, tuple[str, ...]]
) -> None:
    signal = parse(row, 1234, CAPTURED, "connector 'c'")
    assert signal == Signal(row["id"], want[0], want[1], 1234)


@pytest.mark.parametrize(
    ("row", "why"),
    [
        (_row("x1", "pause-snapshot", {}), "only execute-snapshot and stop-snapshot"),
        (_row("x2", "log", {"message": "hi"}), "only execute-snapshot"),
        (_row("x3", EXECUTE, "{not json"), "not JSON"),
        (_row("x4", EXECUTE, "[1]"), "not a JSON object"),
        (_row("x5", EXECUTE, {"data-collections": "shop.orders"}), "must be a list"),
        (_row("x6", EXECUTE, {"data-collections": []}), "names no table"),
        (_row("x7", EXECUTE, {"data-collections": ["shop.nope"]}), "'shop.nope' is not a captured table"),
        (_row("x8", EXECUTE, {"data-collections": ["shop.orders"], "type": "parallel"}), "not one of"),
    ],
)
def test_bad_signals_are_skipped_with_a_warning_naming_the_id(
    row: dict[str, str], why: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="sluice.connectors.cdc.signals"):
        assert parse(row, 1, CAPTURED, "connector 'c'") is None
    assert f"connector 'c': signal '{row['id']}'" in caplog.text and why in caplog.text, caplog.text


def _at(position: Position | None) -> Chunk:
    assert position is not None
    return Chunk.of(position)


def test_signals_open_and_stop_generations_and_positions_only_grow() -> None:
    idle = first_position("7:4", done=True)
    ondemand = od.OnDemand(10, lambda *a: Rows((), (), [], []))
    go = Signal("s1", EXECUTE, ("shop.orders",), 99)
    moved = ondemand.apply({partition_of("shop.orders"): idle}, [go])
    opened = moved[partition_of("shop.orders")]
    assert opened > idle and _at(opened) == Chunk(1, None, False, "7:4", 1, "s1", 99)
    assert finished(["shop.orders"], {partition_of("shop.orders"): opened})  # a generation holds no log
    again = ondemand.apply(
        {partition_of("shop.orders"): opened}, [go, Signal("s2", EXECUTE, ("shop.orders",), 100)]
    )
    assert _at(again[partition_of("shop.orders")]).generation == 3
    stop = Signal("s3", STOP, ("shop.orders",), 101)
    stopped = ondemand.apply({partition_of("shop.orders"): opened}, [stop])[partition_of("shop.orders")]
    assert stopped > opened and _at(stopped).done and _at(stopped).generation == 1
    assert ondemand.apply({partition_of("shop.orders"): idle}, [stop]) == {}  # nothing running: no move
    assert ondemand.apply({}, [go]) == {}  # a table without a snapshot partition


def test_the_reconciliation_drops_changed_keys_and_offsets_depend_on_the_key_only() -> None:
    column = MappedColumn("id", "int", "INT", False)
    rows = Rows((column,), ("id",), [[1, 2, 3]], [[i] for i in (1, 2, 3)])
    kept = od.kept(rows, {od.key_text([2])})
    assert kept.values == [[1, 3]] and kept.row_keys == [[1], [3]]
    offsets = {od.offset_of([i]) for i in range(1000)}
    assert len(offsets) == 1000 and all(od.OFFSET_BASE <= o < 2**63 for o in offsets)
    assert od.offset_of([5]) == od.offset_of([5]) and od.offset_of(["a", 1]) != od.offset_of(["a", 2])


@pytest.mark.parametrize(
    ("data", "conditions"),
    [
        (  # Debezium 2.4+
            {
                "data-collections": ["shop.orders", "shop.customers"],
                "additional-conditions": [{"data-collection": "shop.orders", "filter": "id > 100"}],
            },
            (("shop.orders", "id > 100"),),
        ),
        (  # Debezium 2.0-2.3: one filter for every table named
            {"data-collections": ["shop.orders", "shop.customers"], "additional-condition": "region = 'eu'"},
            (("shop.customers", "region = 'eu'"), ("shop.orders", "region = 'eu'")),
        ),
        (  # a regular expression, as data-collections are matched
            {
                "data-collections": ["shop\\..*s"],
                "additional-conditions": [{"data-collection": "shop.orders", "filter": "x"}],
            },
            (("shop.orders", "x"),),
        ),
    ],
)
def test_additional_conditions_filter_the_tables_they_name(
    data: dict[str, object], conditions: tuple[tuple[str, str], ...]
) -> None:
    signal = parse(_row("f", EXECUTE, data), 5, CAPTURED, "connector 'c'")
    assert signal is not None and signal.conditions == conditions
    opened = od.opened(first_position("o", done=True), signal, "shop.orders")
    assert Chunk.of(opened).condition == dict(conditions).get("shop.orders", "")


@pytest.mark.parametrize(
    "data",
    [
        {
            "data-collections": ["shop.orders"],
            "additional-conditions": [{"data-collection": "shop.customers", "filter": "x"}],
        },
        {"data-collections": ["shop.orders"], "additional-conditions": [{"filter": "x"}]},
        {"data-collections": ["shop.orders"], "additional-conditions": "x"},
        {"data-collections": ["shop.orders"], "additional-condition": 3},
    ],
)
def test_unusable_additional_conditions_skip_the_signal_with_a_warning(
    data: dict[str, object], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert parse(_row("bad-cond", EXECUTE, data), 5, CAPTURED, "connector 'c'") is None
    assert "bad-cond" in caplog.text


def test_a_request_applied_is_carried_through_a_later_signal_s_generation() -> None:
    from_request = Signal("backfill-7", EXECUTE, ("shop.orders",), 9, (("shop.orders", "id < 5"),), 7)
    at = od.opened(first_position("o", done=True), from_request, "shop.orders")
    by_row = Signal("resnap", EXECUTE, ("shop.orders",), 10)
    later = Chunk.of(od.opened(at, by_row, "shop.orders"))
    assert (later.request, later.condition, later.generation) == (7, "", 2)
