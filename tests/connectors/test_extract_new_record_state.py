"""ExtractNewRecordState over real envelope records (connectors.cdc.envelope): Debezium's delete
and tombstone modes, added fields, and the own-schema header of a mixed-topic sink batch."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sluice.activities.spark_binding import chain_frame, table_frame
from sluice.connectors.cdc.envelope import ChangeRecord, change_table, envelope
from sluice.connectors.converters import VALUE_SCHEMA_HEADER
from sluice.connectors.jdbc.types import MappedColumn
from sluice.connectors.transforms import build_chain

COLUMNS = (MappedColumn("id", "int4", "INT", False), MappedColumn("name", "text", "STRING", True))
SOURCE = (("table", "STRING"), ("lsn", "BIGINT"), ("ts_ms", "BIGINT"))


def _records(spark: Any) -> Any:
    def change(offset: int, op: str | None, key: int, before: Any, after: Any) -> ChangeRecord:
        source = {"table": "t", "lsn": 100 + offset, "ts_ms": 5}
        value = None if op is None else envelope(op, before, after, source, 5)
        return ChangeRecord(offset, {"id": key}, value, 5000)

    rows = [
        change(0, "c", 1, None, {"id": 1, "name": "a"}),
        change(1, "u", 1, {"id": 1, "name": "a"}, {"id": 1, "name": "b"}),
        change(2, "d", 1, {"id": 1, "name": "b"}, None),
        change(3, None, 1, None, None),  # the source's tombstone
    ]
    table = change_table(rows, columns=COLUMNS, key_columns=["id"], source_fields=SOURCE,
                         topic="p_public_t", partition="public.t")  # fmt: skip
    return table_frame(spark, table)


def _apply(spark: Any, df: Any, **options: str) -> list[tuple[Any, ...]]:
    config = {"transforms": "u", "transforms.u.type": "io.debezium.transforms.ExtractNewRecordState"}
    config.update({f"transforms.u.{k.replace('_', '.')}": v for k, v in options.items()})
    (transform,) = build_chain(config)
    from pyspark.sql import functions as F

    out = chain_frame([transform], df).withColumn("key", F.to_json("key")).orderBy("offset").collect()
    return [(r["offset"], r["key"], None if r["value"] is None else r["value"].asDict()) for r in out]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (  # Debezium's defaults: deletes and tombstones dropped
            {},
            [(0, '{"id":1}', {"id": 1, "name": "a"}), (1, '{"id":1}', {"id": 1, "name": "b"})],
        ),
        (  # deletes become tombstones, the source's tombstones dropped
            {"delete_handling_mode": "none"},
            [
                (0, '{"id":1}', {"id": 1, "name": "a"}),
                (1, '{"id":1}', {"id": 1, "name": "b"}),
                (2, '{"id":1}', None),
            ],
        ),
        (
            {"delete_handling_mode": "none", "drop_tombstones": "false"},
            [
                (0, '{"id":1}', {"id": 1, "name": "a"}),
                (1, '{"id":1}', {"id": 1, "name": "b"}),
                (2, '{"id":1}', None),
                (3, '{"id":1}', None),
            ],
        ),
        (
            {"delete_handling_mode": "rewrite", "add_fields": "op,source.lsn,table"},
            [
                (
                    0,
                    '{"id":1}',
                    {
                        "id": 1,
                        "name": "a",
                        "__op": "c",
                        "__source_lsn": 100,
                        "__table": "t",
                        "__deleted": "false",
                    },
                ),
                (
                    1,
                    '{"id":1}',
                    {
                        "id": 1,
                        "name": "b",
                        "__op": "u",
                        "__source_lsn": 101,
                        "__table": "t",
                        "__deleted": "false",
                    },
                ),
                (
                    2,
                    '{"id":1}',
                    {
                        "id": 1,
                        "name": "b",
                        "__op": "d",
                        "__source_lsn": 102,
                        "__table": "t",
                        "__deleted": "true",
                    },
                ),
            ],
        ),
        (  # Debezium 2.5's combined option wins
            {"delete_handling_mode": "drop", "delete_tombstone_handling_mode": "tombstone"},
            [
                (0, '{"id":1}', {"id": 1, "name": "a"}),
                (1, '{"id":1}', {"id": 1, "name": "b"}),
                (2, '{"id":1}', None),
            ],
        ),
    ],
)
def test_modes(spark: Any, options: dict[str, str], expected: list[tuple[Any, ...]]) -> None:
    assert _apply(spark, _records(spark), **options) == expected


def test_a_value_that_is_not_an_envelope_passes_unchanged(spark: Any) -> None:
    from sluice.connectors.records import Record, make_records

    df = make_records(spark, [Record("p", 0, "plain text")])
    (transform,) = build_chain({"transforms": "u", "transforms.u.type": "ExtractNewRecordState"})
    assert chain_frame([transform], df).collect() == df.collect()


def test_the_own_schema_header_becomes_the_row_type(spark: Any) -> None:
    from pyspark.sql import functions as F

    df = _records(spark)
    own = df.schema["value"].dataType.json()
    df = df.withColumn("headers", F.create_map(F.lit(VALUE_SCHEMA_HEADER), F.lit(own)))
    (transform,) = build_chain({"transforms": "u", "transforms.u.type": "ExtractNewRecordState",
                                "transforms.u.add.fields": "op"})  # fmt: skip
    headers = {r["headers"][VALUE_SCHEMA_HEADER] for r in chain_frame([transform], df).collect()}
    (header,) = headers
    assert [f["name"] for f in json.loads(header)["fields"]] == ["id", "name", "__op"]


def test_an_unknown_added_field_is_refused(spark: Any) -> None:
    (transform,) = build_chain({"transforms": "u", "transforms.u.type": "ExtractNewRecordState",
                                "transforms.u.add.fields": "nope"})  # fmt: skip
    with pytest.raises(ValueError, match="add.fields entry 'nope' is not an envelope field"):
        chain_frame([transform], _records(spark))
