"""``skipped.operations`` on both change-capture sources: Debezium's values (a comma list of c, u, d,
t, or none) are accepted with Debezium 2.x's default ``t``; anything else is refused naming the
field; and the parsed set decides which records are emitted (a tombstone goes with its delete)."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.connectors.cdc import operations
from sluice.connectors.cdc.envelope import ChangeRecord
from sluice.connectors.cdc.mysql.source import MySqlCdcConnector
from sluice.connectors.cdc.postgres.source import PostgresCdcConnector

BASE = {
    "database.hostname": "localhost",
    "database.user": "u",
    "database.dbname": "d",
    "topic.prefix": "shop",
}
CONNECTORS = [PostgresCdcConnector, MySqlCdcConnector]


@pytest.mark.parametrize("connector", CONNECTORS)
@pytest.mark.parametrize(
    ("value", "skipped"),
    [
        (None, {"t"}),  # Debezium 2.x's default
        ("none", set()),
        ("c,u", {"c", "u"}),
        (" D , t ", {"d", "t"}),
        ("", {"t"}),  # empty: the default, as for every key
    ],
)
def test_accepted_values(connector: Any, value: str | None, skipped: set[str]) -> None:
    base = {**BASE, "connector.class": connector.plugin_name}
    raw = base if value is None else {**base, "skipped.operations": value}
    assert connector().validate(raw) == []
    assert operations.skipped(connector().parse(raw)) == skipped


@pytest.mark.parametrize("connector", CONNECTORS)
@pytest.mark.parametrize(
    ("value", "fragment"),
    [("x", "unknown operation(s) ['x']"), ("r", "unknown operation(s) ['r']"), ("none,t", "'none' cannot")],
)
def test_refused_values_name_the_field(connector: Any, value: str, fragment: str) -> None:
    errors = connector().validate(
        {**BASE, "connector.class": connector.plugin_name, "skipped.operations": value}
    )
    assert [e.field for e in errors] == ["skipped.operations"]
    assert fragment in errors[0].message


@pytest.mark.parametrize(
    ("op", "skip", "sent"),
    [
        ("c", {"t"}, True),
        ("t", {"t"}, False),
        ("t", set(), True),
        ("u", {"u", "t"}, False),
        (None, {"d"}, False),  # a tombstone goes with its delete
        (None, {"t"}, True),
    ],
)
def test_emitted(op: str | None, skip: set[str], sent: bool) -> None:
    value = None if op is None else {"op": op}
    assert operations.emitted(ChangeRecord(0, None, value, 0), frozenset(skip)) is sent
