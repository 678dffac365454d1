"""ExtractNewRecordState and truncate events (op ``t``, no key, no before/after), table-driven:
dropped by default as Debezium's transform does, whatever the delete mode; with
``drop.truncates=false`` passed on in order as a null record marked by the header ``__op=t`` (what
jdbc-sink's ``truncate.enabled`` acts on), the rows around it unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.activities.spark_binding import chain_frame, table_frame
from sluice.connectors.cdc.envelope import ChangeRecord, change_table, envelope
from sluice.connectors.jdbc.types import MappedColumn
from sluice.connectors.records import OP_HEADER
from sluice.connectors.transforms import build_chain

COLUMNS = (MappedColumn("id", "int4", "INT", False), MappedColumn("name", "text", "STRING", True))
SOURCE = (("table", "STRING"), ("lsn", "BIGINT"), ("ts_ms", "BIGINT"))
ROW_A = {"id": 1, "name": "a"}
ROW_B = {"id": 2, "name": "b"}


def _records(spark: Any) -> Any:
    def change(offset: int, op: str, key: int | None, before: Any, after: Any) -> ChangeRecord:
        source = {"table": "t", "lsn": 100 + offset, "ts_ms": 5}
        value = envelope(op, before, after, source, 5)
        return ChangeRecord(offset, None if key is None else {"id": key}, value, 5000)

    rows = [
        change(0, "c", 1, None, ROW_A),
        change(1, "t", None, None, None),  # TRUNCATE
        change(2, "c", 2, None, ROW_B),
        change(3, "d", 2, ROW_B, None),
    ]
    table = change_table(rows, columns=COLUMNS, key_columns=["id"], source_fields=SOURCE,
                         topic="p_public_t", partition="public.t")  # fmt: skip
    return table_frame(spark, table)


def _apply(spark: Any, **options: str) -> list[tuple[Any, ...]]:
    config = {"transforms": "u", "transforms.u.type": "io.debezium.transforms.ExtractNewRecordState"}
    config.update({f"transforms.u.{k.replace('_', '.')}": v for k, v in options.items()})
    (transform,) = build_chain(config)
    from pyspark.sql import functions as F

    unwrapped = chain_frame([transform], _records(spark))
    out = unwrapped.withColumn("key", F.to_json("key")).orderBy("offset").collect()
    return [
        (
            r["offset"],
            r["key"],
            None if r["value"] is None else r["value"].asDict(),
            (r["headers"] or {}).get(OP_HEADER),
        )
        for r in out
    ]


TRUNCATE = (1, None, None, "t")


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, [(0, '{"id":1}', ROW_A, None), (2, '{"id":2}', ROW_B, None)]),  # Debezium: dropped
        (
            {"delete_handling_mode": "none"},
            [(0, '{"id":1}', ROW_A, None), (2, '{"id":2}', ROW_B, None), (3, '{"id":2}', None, None)],
        ),
        (
            {"drop_truncates": "false"},
            [(0, '{"id":1}', ROW_A, None), TRUNCATE, (2, '{"id":2}', ROW_B, None)],
        ),
        (  # the replica of docs/connectors.md: deletes as tombstones, truncates passed on
            {"delete_tombstone_handling_mode": "tombstone", "drop_truncates": "false"},
            [
                (0, '{"id":1}', ROW_A, None),
                TRUNCATE,
                (2, '{"id":2}', ROW_B, None),
                (3, '{"id":2}', None, None),
            ],
        ),
        (
            {"delete_handling_mode": "rewrite", "drop_truncates": "false"},
            [
                (0, '{"id":1}', {**ROW_A, "__deleted": "false"}, None),
                TRUNCATE,
                (2, '{"id":2}', {**ROW_B, "__deleted": "false"}, None),
                (3, '{"id":2}', {**ROW_B, "__deleted": "true"}, None),
            ],
        ),
    ],
)
def test_truncate_events(spark, options: dict[str, str], expected: list[tuple[Any, ...]]) -> None:
    assert _apply(spark, **options) == expected
