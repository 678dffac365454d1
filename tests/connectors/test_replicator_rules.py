"""The replicator's pure rules, table by table: what it copies and where (RocketMQ Connect's
Replicator keys), which messages its filters keep, and how consumer offsets translate."""

from __future__ import annotations

import pyarrow as pa
import pytest

from sluice.connectors.replicator.filters import copied, parse_property_filter
from sluice.connectors.replicator.topics import CopiedTopic, copied_topics, parse_topic_tags, target_topic
from sluice.connectors.replicator.translation import (
    Copy,
    OffsetSync,
    SyncIndex,
    first_after,
    forward_only,
    least,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("TopicTest,*", {"TopicTest": None}),
        ("test1", {"test1": None}),
        ("t1,TagA||TagB;t2,*", {"t1": frozenset({"TagA", "TagB"}), "t2": None}),
        (" t1 , TagA ; ;t2", {"t1": frozenset({"TagA"}), "t2": None}),
    ],
)
def test_topic_tags_read_as_rocketmq_connect_writes_them(text: str, expected: dict[str, object]) -> None:
    assert parse_topic_tags(text) == expected


@pytest.mark.parametrize("text", ["", ";", "t,a,b"])
def test_topic_tags_that_name_nothing_or_too_much_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_topic_tags(text)


@pytest.mark.parametrize(
    ("source", "config", "expected"),
    [
        ("orders", {}, "orders"),
        ("orders", {"dest.topic": "all"}, "all"),
        ("orders", {"topic.rename.format": "${topic}.replica"}, "orders.replica"),
        ("orders", {"dest.topic": "all", "topic.rename.format": "${topic}.r"}, "all"),
        ("src%orders", {"src.instanceid": "src", "dest.instanceid": "dst"}, "dst%orders"),
        ("%RETRY%g1", {"dest.topic": "all"}, "%RETRY%g1"),
        ("%RETRY%g1", {"dest.retrytopic": "retries"}, "retries"),
        ("%DLQ%g1", {"dest.dlqtopic": "dead"}, "dead"),
        ("%RETRY%src%g1", {"src.instanceid": "src", "dest.instanceid": "dst"}, "%RETRY%dst%g1"),
    ],
)
def test_where_a_source_topic_is_copied_to(source: str, config: dict[str, str], expected: str) -> None:
    assert target_topic(source, config) == expected


def test_retry_and_dead_letter_topics_of_the_listed_groups_are_copied_when_enabled() -> None:
    config = {
        "src.topictags": "orders,a",
        "src.retrygids": ["g1"],
        "enable.retrysync": True,
        "enable.dlqsync": False,
    }
    assert copied_topics(config) == (
        CopiedTopic("orders", "orders", frozenset({"a"})),
        CopiedTopic("%RETRY%g1", "%RETRY%g1", None),
    )


def _props(rows: list[dict[str, str]]) -> pa.Array:
    return pa.array([list(r.items()) for r in rows], pa.map_(pa.string(), pa.string()))


@pytest.mark.parametrize(
    ("tags", "filter_text", "operator", "expected"),
    [
        (None, "", "and", [True, True, True, True]),
        (frozenset({"a"}), "", "and", [True, False, False, False]),  # an untagged message matches only *
        (None, "color", "and", [True, True, False, False]),
        (None, "color=red,size", "and", [True, False, False, False]),
        (None, "color=red,size", "or", [True, False, True, False]),
    ],
)
def test_which_messages_are_copied(
    tags: frozenset[str] | None, filter_text: str, operator: str, expected: list[bool]
) -> None:
    properties = _props([{"color": "red", "size": "1"}, {"color": "blue"}, {"size": "2"}, {}])
    wanted = parse_property_filter(filter_text, operator) if filter_text else None
    kept = copied(
        pa.array(["a", "b", None, "c"]), properties, wanted_tags=tags, wanted=wanted, target_label=""
    )
    assert kept.to_pylist() == expected


def test_a_message_that_came_from_the_target_is_not_copied_back() -> None:
    properties = _props([
        {"connect-ext-REPLICATOR-BORN-SOURCE": "c_dr_r,"},
        {"REPLICATOR-BORN-SOURCE": "c_main_r,c_dr_r,"},
        {"connect-ext-REPLICATOR-BORN-SOURCE": "c_other_r,"},
        {},
    ])  # fmt: skip
    kept = copied(
        pa.array([None] * 4, pa.string()), properties, wanted_tags=None, wanted=None, target_label="c_dr_r"
    )
    assert kept.to_pylist() == [False, False, True, True]


def _copies(*rows: tuple[int, str | None, int | None]) -> list[Copy]:
    return [Copy(*r) for r in rows]


@pytest.mark.parametrize(
    ("copies", "committed", "end", "expected"),
    [
        # one source queue: the copy of the committed offset (exact)
        (_copies((10, "p", 5), (11, "p", 6), (12, "p", 7)), 6, 13, 11),
        # the committed offset was filtered out: the next copy
        (_copies((10, "p", 5), (11, "p", 9)), 6, 12, 11),
        # everything copied was consumed: the queue's end
        (_copies((10, "p", 5), (11, "p", 6)), 7, 12, 12),
        # another source queue's copies in between are passed over
        (_copies((10, "q", 50), (11, "p", 5), (12, "q", 51), (13, "p", 6)), 6, 14, 13),
    ],
)
def test_first_copy_at_or_above_a_committed_offset(
    copies: list[Copy], committed: int, end: int, expected: int
) -> None:
    assert first_after(copies, "p", committed, end) == expected


def test_a_scan_starts_at_the_latest_sync_at_or_below_the_committed_offset() -> None:
    index = SyncIndex()
    index.add(
        [
            OffsetSync("p", 100, "t", "b:0", 40),
            OffsetSync("p", 0, "t", "b:0", 0),
            OffsetSync("p", 300, "t", "b:0", 90),
        ]
    )
    assert [index.scan_start("p", "t", "b:0", c) for c in (0, 99, 100, 299, 300, 10**9)] == [
        0,
        0,
        40,
        40,
        90,
        90,
    ]
    assert index.scan_start("p", "t", "b:1", 5) is None
    assert index.feeds("t") == {"b:0": ["p"]}


@pytest.mark.parametrize(("offsets", "expected"), [([5, 3, 9], 3), ([5, None], None), ([], None)])
def test_a_target_queue_fed_by_several_source_queues_takes_the_least(
    offsets: list[int | None], expected: int | None
) -> None:
    assert least(offsets) == expected


def test_a_target_group_is_never_moved_backwards() -> None:
    assert forward_only({"q0": 10, "q1": None, "q2": 50}, {"q0": 20, "q1": 5, "q2": 40}) == {
        "q0": 20,
        "q1": 5,
    }


def test_a_pinned_partition_goes_to_its_queue_and_the_others_by_key() -> None:
    from sluice.connectors.arrow_messages import MESSAGE_SCHEMA, key_slots, sharded

    rows = [("t/b:0", "k1"), ("t/b:1", "k1"), ("other", "k1"), ("t/b:1", None)]
    messages = pa.Table.from_pylist(
        [
            {"partition": p, "offset": i, "body": b"x", "keys": k, "properties": []}
            for i, (p, k) in enumerate(rows)
        ],
        schema=MESSAGE_SCHEMA,
    )
    by_key = int(key_slots(pa.array(["k1"]), 4)[0])
    queues = sharded(messages, ("b:0", "b:1", "b:2", "b:3"), {"t/b:0": 3, "t/b:1": 2}).column("queue")
    assert queues.to_pylist() == [3, 2, by_key, 2]
