"""A chunk's SQL tail (connectors.cdc.snapshot.ChunkQuery.sql_tail): the one place both CDC sources
spell a chunk's bounds, filter, order and limit; each database only quotes keys and casts bounds."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.connectors.cdc.snapshot import ChunkQuery

MYSQL = (["`id`"], ["%s"])
POSTGRES = (['t."a"', 't."b"'], ["%s::integer", "%s::text"])


@pytest.mark.parametrize(
    ("query", "spelling", "tail", "params"),
    [
        (ChunkQuery("d.t", ("id",)), MYSQL, " ORDER BY `id`", []),
        (ChunkQuery("d.t", ("id",), limit=0), MYSQL, " ORDER BY `id` LIMIT 0", []),
        (
            ChunkQuery("d.t", ("id",), after=[7], limit=100),
            MYSQL,
            " WHERE (`id`) > (%s) ORDER BY `id` LIMIT 100",
            [7],
        ),
        (
            ChunkQuery("d.t", ("id",), after=[7], upto=[9], condition="k > 1"),
            MYSQL,
            " WHERE (k > 1) AND (`id`) > (%s) AND (`id`) <= (%s) ORDER BY `id`",
            [7, 9],
        ),
        (
            ChunkQuery("public.t", ("a", "b"), upto=[3, "x"]),
            POSTGRES,
            ' WHERE (t."a", t."b") <= (%s::integer, %s::text) ORDER BY t."a", t."b"',
            ["3", "x"],
        ),
    ],
)
def test_a_chunks_bounds_filter_order_and_limit(
    query: ChunkQuery, spelling: tuple[list[str], list[str]], tail: str, params: list[Any]
) -> None:
    keys, bounds = spelling
    convert = str if spelling is POSTGRES else (lambda v: v)
    assert query.sql_tail(keys, bounds, convert) == (tail, params)
