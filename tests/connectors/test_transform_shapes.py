"""How each transform moves a record's topic and fields (``Transform.reshape``), which `sluice verify`
follows to pair a target table's columns with the source's: one row per chain, table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.connectors.transforms import NotFollowable, RecordShape, build_chain, reshape_chain

SOURCE = RecordShape("shop.orders", (("id", "id"), ("name", "name"), ("price", "price"), ("note", "note")))


def _chain(**transforms: dict[str, str]) -> dict[str, Any]:
    config: dict[str, Any] = {"transforms": ",".join(transforms)}
    for alias, options in transforms.items():
        config.update({f"transforms.{alias}.{k}": v for k, v in options.items()})
    return config


def _fields(**named: str | None) -> tuple[tuple[str, str | None], ...]:
    return tuple(named.items())


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, SOURCE),
        (_chain(r={"type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
                   "renames": "name:full_name", "exclude": "note"}),
         RecordShape("shop.orders", _fields(id="id", full_name="name", price="price"))),
        (_chain(r={"type": "ReplaceField$Value", "include": "id,price"}),
         RecordShape("shop.orders", _fields(id="id", price="price"))),
        (_chain(r={"type": "ReplaceField$Key", "renames": "id:key"}), SOURCE),
        (_chain(i={"type": "InsertField$Value", "topic.field": "src_topic", "static.field": "origin!",
                   "static.value": "x"}),
         RecordShape("shop.orders", (*SOURCE.fields, ("src_topic", None), ("origin", None)))),
        (_chain(m={"type": "MaskField$Value", "fields": "name"}),
         RecordShape("shop.orders", _fields(id="id", name=None, price="price", note="note"))),
        (_chain(c={"type": "Cast$Value", "spec": "price:float64"}), SOURCE),
        (_chain(k={"type": "ValueToKey", "fields": "id"}), SOURCE),
        (_chain(route={"type": "org.apache.kafka.connect.transforms.RegexRouter",
                       "regex": r"shop\.(.*)", "replacement": "copy_$1"}),
         RecordShape("copy_orders", SOURCE.fields)),
        (_chain(route={"type": "RegexRouter", "regex": "other", "replacement": "x"}), SOURCE),
        (_chain(t={"type": "TopicRename", "renames": "shop.orders:orders"}),
         RecordShape("orders", SOURCE.fields)),
        (_chain(unwrap={"type": "io.debezium.transforms.ExtractNewRecordState",
                        "add.fields": "op,source.ts_ms", "delete.handling.mode": "rewrite"}),
         RecordShape("shop.orders",
                     (*SOURCE.fields, ("__op", None), ("__source_ts_ms", None), ("__deleted", None)))),
        # in order: the rename sees the router's topic, the exclude the renamed field
        (_chain(route={"type": "RegexRouter", "regex": r".*\.(.*)", "replacement": "$1"},
                r={"type": "ReplaceField$Value", "renames": "note:memo"},
                x={"type": "ReplaceField$Value", "exclude": "memo"}),
         RecordShape("orders", _fields(id="id", name="name", price="price"))),
    ],
)  # fmt: skip
def test_a_chain_reshapes_a_record_as_it_transforms_it(config: dict[str, Any], expected: RecordShape) -> None:
    assert reshape_chain(build_chain(config), SOURCE) == expected


@pytest.mark.parametrize(
    ("config", "named"),
    [
        (_chain(f={"type": "Filter", "predicate": "p"}, **{}) | {"predicates": "p",
         "predicates.p.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
         "predicates.p.pattern": "x"}, "transform 'f' (Filter$Value)"),
        (_chain(h={"type": "HoistField$Value", "field": "row"}), "transform 'h' (HoistField$Value)"),
        (_chain(e={"type": "ExtractField$Value", "field": "id"}), "transform 'e' (ExtractField$Value)"),
    ],
)  # fmt: skip
def test_a_transform_that_cannot_be_followed_is_named(config: dict[str, Any], named: str) -> None:
    with pytest.raises(
        NotFollowable, match=named.replace("(", r"\(").replace(")", r"\)").replace("$", r"\$")
    ):
        reshape_chain(build_chain(config), SOURCE)
