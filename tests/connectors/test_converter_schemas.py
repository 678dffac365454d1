"""One sink batch, several topics with their own envelope schemas (one table each): every record is
decoded with its topic's fields, and says which fields are its own."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from connectors.converters import FIELDS_HEADER, JsonConverter, merge_schemas
from tests.connectors.test_converters import BORN, READ_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _struct(**fields: str):  # type: ignore[no-untyped-def]
    from pyspark.sql.types import _parse_datatype_string

    return _parse_datatype_string("struct<" + ",".join(f"{k}:{v}" for k, v in fields.items()) + ">")


def test_merge_schemas_table(spark: SparkSession) -> None:  # DDL parsing needs a session
    same = _struct(id="int", name="string")
    assert merge_schemas({"a": [same], "b": [same]}) == (same, None)
    merged, own = merge_schemas(
        {"orders": [_struct(id="int", total="double")], "products": [_struct(id="int", sku="string")]}
    )
    assert merged.simpleString() == "struct<id:int,total:double,sku:string>"
    assert own == {"orders": ["id", "total"], "products": ["id", "sku"]}
    # A column added within one topic's batch: one topic, the union of its schemas.
    grown, own = merge_schemas({"t": [_struct(id="int"), _struct(id="int", note="string")]})
    assert grown.simpleString() == "struct<id:int,note:string>" and own is None
    with pytest.raises(ValueError, match="field 'id' is int in topic 'a' but string in topic 'b'"):
        merge_schemas({"a": [_struct(id="int")], "b": [_struct(id="string")]})


def _envelope(fields: list[tuple[str, str]], payload: dict[str, object]) -> bytes:
    schema = {
        "type": "struct",
        "fields": [{"type": t, "optional": True, "field": n} for n, t in fields],
        "optional": False,
    }
    return json.dumps({"schema": schema, "payload": payload}).encode()


def test_one_batch_of_two_topics_decodes_each_with_its_own_fields(spark: SparkSession) -> None:
    rows = [
        ("orders", "broker-a:0", 0, 0, None, None, {}, BORN, BORN,
         _envelope([("id", "int32"), ("total", "float64")], {"id": 1, "total": 9.5})),
        ("products", "broker-a:1", 0, 1, None, None, {}, BORN, BORN,
         _envelope([("id", "int32"), ("sku", "string")], {"id": 7, "sku": "K-7"})),
    ]  # fmt: skip
    out = JsonConverter(schemas_enable=True).to_records(spark.createDataFrame(rows, READ_SCHEMA))
    got = {r["topic"]: (r["value"].asDict(), r["headers"][FIELDS_HEADER]) for r in out.collect()}
    assert got == {
        "orders": ({"id": 1, "total": 9.5, "sku": None}, "id,total"),
        "products": ({"id": 7, "total": None, "sku": "K-7"}, "id,sku"),
    }
