"""Each transform on a small batch of records in Arrow, compared row by row with the expected
records; a chain with Spark SQL through the batch's Spark job (spark_binding.chain_frame)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from sluice.connectors.config import ConfigError
from sluice.connectors.records import ERROR_COLUMN, Record, RecordError, good_arrow_records, make_records
from sluice.connectors.transforms import apply_chain, build_chain, runs_in_arrow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

VALUE = pa.struct(
    [
        ("id", pa.int32()), ("name", pa.string()), ("email", pa.string()), ("score", pa.string()),
        ("ts", pa.string()), ("addr", pa.struct([("city", pa.string()), ("zip", pa.string())])),
    ]
)  # fmt: skip
TS = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def rec(offset: int, value: Any, topic: str = "orders", headers: dict[str, str] | None = None) -> Record:
    return Record(
        partition="p0", offset=offset, value=value, topic=topic, headers=headers or {}, timestamp=TS
    )


def table(records: list[Record], value_type: pa.DataType | None = None) -> pa.Table:
    """Records as a batch's record table (the record columns' Arrow types)."""
    schema = pa.schema(
        [
            ("topic", pa.string()), pa.field("partition", pa.string(), nullable=False),
            pa.field("offset", pa.int64(), nullable=False), ("key", pa.string()),
            ("value", value_type or pa.string()),
            ("headers", pa.map_(pa.string(), pa.string())), ("timestamp", pa.timestamp("us", tz="UTC")),
        ]
    )  # fmt: skip
    rows = [dict(zip(schema.names, r.as_row(), strict=True)) for r in records]
    for row in rows:
        row["headers"] = list(row["headers"].items())
    return pa.Table.from_pylist(rows, schema=schema)


def person(i: int, name: str, score: str = "1", ts: str = "2024-05-01 10:00:00") -> dict[str, Any]:
    return {
        "id": i,
        "name": name,
        "email": f"{name}@x.org",
        "score": score,
        "ts": ts,
        "addr": {"city": "Oslo", "zip": f"0{i}"},
    }


@pytest.fixture(scope="module")
def people() -> pa.Table:
    rows = [
        rec(0, person(1, "ann")),
        rec(1, person(2, "bob", score="2")),
        rec(2, None),  # a tombstone stays a tombstone
    ]
    return table(rows, VALUE)


def chain_of(config: dict[str, str]) -> list[Any]:
    aliases = sorted({k.split(".")[1] for k in config if k.startswith("transforms.")})
    return build_chain({"transforms": ",".join(aliases), **config})


def run(records: pa.Table, config: dict[str, str]) -> list[dict[str, Any]]:
    out = apply_chain(chain_of(config), records)
    return sorted(out.to_pylist(), key=lambda r: r["offset"])


def values(rows: list[dict[str, Any]]) -> list[Any]:
    return [r["value"] for r in rows]


def test_insert_field(people: pa.Table) -> None:
    rows = run(
        people,
        {
            "transforms.a.type": "InsertField$Value",
            "transforms.a.topic.field": "src_topic",
            "transforms.a.offset.field": "pos!",
            "transforms.a.static.field": "origin",
            "transforms.a.static.value": "erp",
        },
    )
    assert values(rows)[0] == {**person(1, "ann"), "src_topic": "orders", "pos": 0, "origin": "erp"}
    assert values(rows)[1]["pos"] == 1
    assert values(rows)[2] is None


def test_replace_field_include_exclude_rename(people: pa.Table) -> None:
    rows = run(
        people,
        {
            "transforms.r.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
            "transforms.r.include": "id,name,email",
            "transforms.r.exclude": "email",
            "transforms.r.renames": "name:full_name",
        },
    )
    assert values(rows) == [{"id": 1, "full_name": "ann"}, {"id": 2, "full_name": "bob"}, None]


def test_mask_field(people: pa.Table) -> None:
    rows = run(people, {"transforms.m.type": "MaskField$Value", "transforms.m.fields": "email,id"})
    assert [(v["id"], v["email"], v["name"]) for v in values(rows)[:2]] == [(0, "", "ann"), (0, "", "bob")]
    rows = run(
        people,
        {
            "transforms.m.type": "MaskField$Value",
            "transforms.m.fields": "email",
            "transforms.m.replacement": "***",
        },
    )
    assert values(rows)[0]["email"] == "***"


def test_cast_fields_and_bad_value_is_flagged(people: pa.Table) -> None:
    rows = run(people, {"transforms.c.type": "Cast$Value", "transforms.c.spec": "score:int64,id:string"})
    assert [(v["id"], v["score"]) for v in values(rows)[:2]] == [("1", 1), ("2", 2)]
    assert all(r[ERROR_COLUMN] is None for r in rows)

    bad = table([rec(6, person(4, "di", score=" 12 ")), rec(7, person(3, "cy", score="lots"))], VALUE)
    chain = build_chain(
        {"transforms": "c", "transforms.c.type": "Cast$Value", "transforms.c.spec": "score:int32"}
    )
    out = apply_chain(chain, bad)
    assert [v["score"] for v in out.column("value").to_pylist()] == [12, None]
    with pytest.raises(RecordError) as info:
        good_arrow_records(out, "connector 'x'")
    assert str(info.value) == (
        "connector 'x': bad record at topic 'orders' partition 'p0' offset 7: "
        "transform 'c' (Cast$Value): cannot cast field 'score' to int32"
    )


@pytest.mark.parametrize(
    ("spec", "given", "expected"),
    [
        ("int64", ["42", "7"], [42, 7]),
        ("int8", ["300", "-5"], [None, -5]),  # out of range: flagged, not wrapped
        ("string", [1.0, 2.5], ["1.0", "2.5"]),  # as Java writes a double
        ("int32", [1.9, -1.9], [1, -1]),  # toward zero, as Java's (int) cast
        ("boolean", ["true", "false"], [True, False]),
    ],
)
def test_cast_whole_value(spec: str, given: list[Any], expected: list[Any]) -> None:
    kind = pa.float64() if isinstance(given[0], float) else pa.string()
    config = {"transforms.c.type": "Cast", "transforms.c.spec": spec}
    rows = run(table([rec(i, v) for i, v in enumerate(given)], kind), config)
    assert values(rows) == expected
    assert [r[ERROR_COLUMN] is not None for r in rows] == [v is None for v in expected]


def test_flatten(people: pa.Table) -> None:
    rows = run(people, {"transforms.f.type": "Flatten$Value", "transforms.f.delimiter": "_"})
    assert values(rows)[0] == {
        "id": 1,
        "name": "ann",
        "email": "ann@x.org",
        "score": "1",
        "ts": "2024-05-01 10:00:00",
        "addr_city": "Oslo",
        "addr_zip": "01",
    }


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (
            {"target.type": "Timestamp", "format": "yyyy-MM-dd HH:mm:ss"},
            datetime(2024, 5, 1, 10, 0, tzinfo=UTC),
        ),
        ({"target.type": "Timestamp"}, datetime(2024, 5, 1, 10, 0, tzinfo=UTC)),
        ({"target.type": "string", "format": "dd/MM/yyyy'T'HH"}, None),
        ({"target.type": "unix", "unix.precision": "seconds"}, 1714557600),
        (
            {"target.type": "unix", "format": "yyyy-MM-dd HH:mm:ss"},
            int(datetime(2024, 5, 1, 10, tzinfo=UTC).timestamp() * 1000),
        ),
        ({"target.type": "Date", "format": "yyyy-MM-dd HH:mm:ss"}, date(2024, 5, 1)),
        ({"target.type": "string", "format": "dd/MM/yyyy"}, None),  # input unparseable with this format
    ],
)
def test_timestamp_converter(people: pa.Table, options: dict[str, str], expected: Any) -> None:
    config = {"transforms.t.type": "TimestampConverter$Value", "transforms.t.field": "ts"}
    config.update({f"transforms.t.{k}": v for k, v in options.items()})
    rows = run(people, config)
    assert values(rows)[0]["ts"] == expected
    if expected is None:
        assert (
            rows[0][ERROR_COLUMN]
            == "transform 't' (TimestampConverter$Value): cannot parse field 'ts' as a timestamp"
        )


def test_extract_hoist_value_to_key(people: pa.Table) -> None:
    rows = run(
        people,
        {
            "transforms.a.type": "ValueToKey",
            "transforms.a.fields": "id",
            "transforms.b.type": "ExtractField$Value",
            "transforms.b.field": "addr",
        },
    )
    assert [(r["key"], r["value"]) for r in rows] == [
        ({"id": 1}, {"city": "Oslo", "zip": "01"}),
        ({"id": 2}, {"city": "Oslo", "zip": "02"}),
        (None, None),
    ]
    rows = run(
        people,
        {
            "transforms.a.type": "ExtractField$Value",
            "transforms.a.field": "name",
            "transforms.b.type": "HoistField$Value",
            "transforms.b.field": "who",
        },
    )
    assert values(rows) == [{"who": "ann"}, {"who": "bob"}, None]


MIXED = [
    rec(0, "a", topic="orders", headers={"trace": "1"}),
    rec(1, "b", topic="orders-eu"),
    rec(2, None, topic="audit"),
    rec(3, "d", topic="audit", headers={"trace": "2"}),
]


@pytest.fixture(scope="module")
def mixed() -> pa.Table:
    return table(MIXED)


@pytest.fixture(scope="module")
def mixed_frame(spark: SparkSession) -> DataFrame:
    return make_records(spark, MIXED)


def run_in_spark(records: DataFrame, config: dict[str, str]) -> list[dict[str, Any]]:
    from sluice.activities.spark_binding import chain_frame

    out = chain_frame(chain_of(config), records)
    return [r.asDict(recursive=True) for r in out.orderBy("offset").collect()]


@pytest.mark.parametrize(
    ("config", "offsets"),
    [
        (
            {
                "transforms.f.predicate": "isOrders",
                "predicates": "isOrders",
                "predicates.isOrders.type": "TopicNameMatches",
                "predicates.isOrders.pattern": "orders.*",
            },
            [2, 3],
        ),
        (
            {
                "transforms.f.predicate": "isOrders",
                "transforms.f.negate": "true",
                "predicates": "isOrders",
                "predicates.isOrders.type": "TopicNameMatches",
                "predicates.isOrders.pattern": "orders",
            },
            [0],
        ),
        (
            {
                "transforms.f.predicate": "h",
                "predicates": "h",
                "predicates.h.type": "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
                "predicates.h.name": "trace",
            },
            [1, 2],
        ),
        (
            {"transforms.f.predicate": "t", "predicates": "t", "predicates.t.type": "RecordIsTombstone"},
            [0, 1, 3],
        ),
    ],
    ids=["topic-matches", "negate-whole-name", "has-header", "tombstone"],
)
def test_filter(mixed: pa.Table, config: dict[str, str], offsets: list[int]) -> None:
    rows = run(mixed, {"transforms.f.type": "Filter", **config})
    assert [r["offset"] for r in rows] == offsets


def test_a_filter_keeps_a_record_a_transform_before_it_flagged(mixed: pa.Table) -> None:
    from sluice.connectors.record_tables import flag

    flagged = flag(mixed, pa.array([False, False, True, False]), "undecodable")
    config = {"transforms.f.type": "Filter", "transforms.f.predicate": "t", "predicates": "t",
              "predicates.t.type": "RecordIsTombstone"}  # fmt: skip
    rows = run(flagged, config)
    assert [(r["offset"], r[ERROR_COLUMN]) for r in rows] == [
        (0, None),
        (1, None),
        (2, "undecodable"),
        (3, None),
    ]


def test_a_filter_with_a_sql_condition_runs_in_spark(mixed_frame: DataFrame) -> None:
    config = {"transforms.f.type": "Filter", "transforms.f.condition": "value = 'b' OR value IS NULL"}
    assert not runs_in_arrow(chain_of(config))
    assert [r["offset"] for r in run_in_spark(mixed_frame, config)] == [0, 3]


def test_arrow_stages_and_sql_in_one_spark_job_equal_the_stages_alone(
    mixed_frame: DataFrame, mixed: pa.Table
) -> None:
    """A chain of Arrow stages around a Spark SQL stage, run in a Spark job (``chain_frame``):
    the records are what the Arrow stages make on their own, with the SQL applied between."""
    router = {"transforms.a.type": "RegexRouter", "transforms.a.regex": "orders(-.*)?",
              "transforms.a.replacement": "sales$1"}  # fmt: skip
    tail = {"transforms.c.type": "HoistField$Value", "transforms.c.field": "text"}
    sql = {"transforms.b.type": "sql", "transforms.b.filter": "value IS NOT NULL"}
    in_spark = run_in_spark(mixed_frame, {**router, **sql, **tail})
    alone = [r for r in run(mixed, {**router, **tail}) if r["value"] is not None]
    for row in [*in_spark, *alone]:
        row["headers"] = dict(row["headers"])
        row["timestamp"] = row["timestamp"].replace(tzinfo=None) if row["timestamp"] else None
    assert in_spark == alone
    assert [r["topic"] for r in in_spark] == ["sales", "sales-eu", "audit"]


def test_regex_router_and_rename(mixed: pa.Table) -> None:
    rows = run(
        mixed,
        {
            "transforms.r.type": "RegexRouter",
            "transforms.r.regex": "orders(-.*)?",
            "transforms.r.replacement": "sales$1",
        },
    )
    assert [r["topic"] for r in rows] == ["sales", "sales-eu", "audit", "audit"]
    rows = run(mixed, {"transforms.r.type": "topic-rename", "transforms.r.renames": "audit:log,orders:o"})
    assert [r["topic"] for r in rows] == ["o", "orders-eu", "log", "log"]


def test_sql_statement_filter_select(mixed_frame: DataFrame) -> None:
    rows = run_in_spark(
        mixed_frame,
        {
            "transforms.s.type": "sql",
            "transforms.s.statement": "SELECT topic, partition, offset, key, upper(value) AS value, "
            "headers, timestamp FROM records WHERE value IS NOT NULL",
        },
    )
    assert [(r["offset"], r["value"]) for r in rows] == [(0, "A"), (1, "B"), (3, "D")]
    rows = run_in_spark(
        mixed_frame,
        {
            "transforms.s.type": "sql",
            "transforms.s.filter": "topic LIKE 'orders%'",
            "transforms.s.select": "* EXCEPT (value), concat(value, '!') AS value",
        },
    )
    assert [(r["offset"], r["value"]) for r in rows] == [(0, "a!"), (1, "b!")]
    rows = run_in_spark(  # the sql transform's own example: a later column replaces one of its name
        mixed_frame, {"transforms.s.type": "sql", "transforms.s.select": "*, upper(value) AS value"}
    )
    assert [(r["offset"], r["value"]) for r in rows] == [(0, "A"), (1, "B"), (2, None), (3, "D")]


def test_sql_output_must_keep_record_columns(mixed_frame: DataFrame) -> None:
    from sluice.activities.spark_binding import chain_frame

    chain = build_chain(
        {"transforms": "s", "transforms.s.type": "sql", "transforms.s.statement": "SELECT value FROM records"}
    )
    with pytest.raises(
        RecordError, match=r"transform 's' \(SqlTransform\$Value\): output lacks record column"
    ):
        chain_frame(chain, mixed_frame)


@pytest.mark.parametrize(
    ("config", "messages"),
    [
        (
            {"transforms": "a", "transforms.a.type": "Filter"},
            ["transform 'a': set exactly one of a predicate or option 'condition'"],
        ),
        (
            {"transforms": "a", "transforms.a.type": "Filter", "transforms.a.predicate": "p"},
            ["transform 'a': predicate 'p' is not declared in 'predicates' with a 'predicates.p.type'"],
        ),
        (
            {
                "transforms": "a,b",
                "transforms.a.type": "RegexRouter",
                "transforms.a.regex": "(",
                "transforms.a.replacement": "x",
                "transforms.b.type": "ReplaceField$Value",
                "transforms.b.renames": "a",
            },
            [
                "transform 'a': option 'regex': not a valid regular expression "
                "(missing ), unterminated subpattern at position 0)",
                "transform 'b': option 'renames': expected old:new pairs, got ['a']",
            ],
        ),
        (
            {
                "transforms": "a",
                "transforms.a.type": "InsertField$Value",
                "transforms.a.predicate": "p",
                "predicates": "p",
                "predicates.p.type": "RecordIsTombstone",
            },
            ["transform 'a': predicates are only supported on Filter"],
        ),
        ({"transforms": "a"}, ["transform 'a': 'transforms.a.type' is required"]),
        (
            {"transforms": "a", "transforms.a.type": "MaskField$Value"},
            ["transform 'a': field 'fields' is required (fields to mask)"],
        ),
    ],
    ids=[
        "filter-needs-predicate",
        "undeclared-predicate",
        "all-errors",
        "predicate-elsewhere",
        "no-type",
        "missing-option",
    ],
)
def test_chain_config_errors(config: dict[str, str], messages: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        build_chain(config)
    assert [e.message for e in info.value.errors] == messages


def test_field_transform_on_string_value_is_a_clear_error(mixed: pa.Table) -> None:
    chain = build_chain(
        {"transforms": "x", "transforms.x.type": "MaskField$Value", "transforms.x.fields": "a"}
    )
    with pytest.raises(
        ValueError,
        match=r"transform 'x' \(MaskField\$Value\): needs a struct value, got string \(use a json",
    ):
        apply_chain(chain, mixed)
