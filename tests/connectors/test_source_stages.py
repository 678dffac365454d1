"""The source side's stages over one share (connectors.source_stages), with no JVM: transforms,
converter, size check, shard, order, and what a re-run leaves out, each outcome a typed value."""

from __future__ import annotations

import zlib
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from sluice.connectors.api import SendOrder
from sluice.connectors.barriers import BARRIER_HEADER, BARRIER_QUEUES_HEADER
from sluice.connectors.converters import converter_for
from sluice.connectors.dead_letter_messages import CONNECTOR_PROPERTY, ERROR_PROPERTY, ORIGIN_OFFSET_PROPERTY
from sluice.connectors.rocketmq.limits import MAX_MESSAGE_BYTES
from sluice.connectors.source_reads import headers_where, record_table
from sluice.connectors.source_stages import SourceStages, sent_key, sent_keys
from sluice.connectors.stage_outcomes import Bad, Made
from tests.connectors.test_transforms import chain_of

QUEUES = ("b:0", "b:1", "b:2")


def _stages(
    *,
    order: SendOrder = SendOrder.SORTED,
    tolerates: bool = False,
    chain: tuple[Any, ...] = (),
    **config: str,
) -> SourceStages:
    converter = converter_for({"value.converter": "string", **config})
    return SourceStages(chain, converter, QUEUES, order, "src", 0, tolerates=tolerates)


def _made(outcome: Made | Bad) -> pa.Table:
    assert isinstance(outcome, Made), outcome
    assert outcome.records is not None
    return outcome.records


def _slot(key: str) -> int:
    return zlib.crc32(key.encode()) % len(QUEUES)


def test_messages_are_sharded_by_key_and_sent_in_source_order() -> None:
    later = record_table("t", [5, 6], ["e", "f"], keys=["k1", "k2"])
    earlier = record_table("t", [1, 2], ["a", "b"], keys=["k2", None])
    messages = _made(_stages().run([later, earlier]))
    rows = messages.select(["offset", "body", "keys", "queue"]).to_pylist()
    assert rows == [
        {"offset": 1, "body": b"a", "keys": "k2", "queue": _slot("k2")},
        {"offset": 2, "body": b"b", "keys": None, "queue": _slot("t")},  # keyless: its partition's queue
        {"offset": 5, "body": b"e", "keys": "k1", "queue": _slot("k1")},
        {"offset": 6, "body": b"f", "keys": "k2", "queue": _slot("k2")},
    ]
    kept = _made(_stages(order=SendOrder.AS_READ).run([later, earlier]))
    assert kept.column("offset").to_pylist() == [5, 6, 1, 2]  # as read: not sorted


def test_the_chain_runs_before_the_converter() -> None:
    chain = tuple(chain_of({"transforms.h.type": "HoistField$Value", "transforms.h.field": "line"}))
    records = record_table("t", [1, 2], ["a", None])
    stages = _stages(chain=chain, **{"value.converter": "json"})
    # a tombstone stays one (record_tables.rebuilt): sent with an empty body
    assert _made(stages.run([records])).column("body").to_pylist() == [b'{"line":"a"}', b""]


def test_a_record_the_source_flagged_fails_the_share_naming_it_or_is_a_dead_letter() -> None:
    records = record_table(
        "f.txt",
        [0, 1, 2],
        ["x", None, "z"],
        errors=[None, "line is not utf-8", None],
        raw=[None, b"\xff", None],
    )
    outcome = _stages().run([records])
    assert outcome == Bad("connector src: bad record at partition 'f.txt' offset 1: line is not utf-8")

    tolerated = _stages(tolerates=True).run([records])
    assert isinstance(tolerated, Made)
    assert _made(tolerated).column("body").to_pylist() == [b"x", b"z"]
    assert tolerated.dead is not None
    (letter,) = tolerated.dead.to_pylist()
    assert letter["body"] == b"\xff"  # exactly the bytes the source could not decode
    properties = dict(letter["properties"])
    assert properties[ERROR_PROPERTY] == "line is not utf-8"
    assert properties[CONNECTOR_PROPERTY] == "src"
    assert properties[ORIGIN_OFFSET_PROPERTY] == "1"


def test_a_message_over_the_brokers_limit_is_a_bad_record_and_the_rest_go_on() -> None:
    big = "v" * MAX_MESSAGE_BYTES
    records = record_table("t", [0, 1, 2], ["a", big, "c"])
    outcome = _stages().run([records])
    assert isinstance(outcome, Bad)
    assert outcome.message.startswith("connector src: bad record at partition 't' offset 1: message of ")
    assert "over RocketMQ's maximum message size of 4194304 bytes" in outcome.message

    tolerated = _stages(tolerates=True).run([records])
    assert isinstance(tolerated, Made) and tolerated.dead is not None
    assert _made(tolerated).column("body").to_pylist() == [b"a", b"c"]
    (letter,) = tolerated.dead.to_pylist()
    assert dict(letter["properties"])["sluice.truncated"] == "true"


def test_a_rerun_leaves_out_what_an_earlier_attempt_sent() -> None:
    records = record_table("t", [0, 1, 2, 3], ["a", "b", "c", "d"], keys=["k0", "k1", "k2", "k3"])
    first = _made(_stages().run([records]))
    sent = frozenset(sent_keys(first.slice(0, 2)).to_pylist())
    assert sent == {sent_key("t", 0, None), sent_key("t", 1, None)}
    again = _made(_rerun(sent).run([records]))
    assert again.column("body").to_pylist() == [b"c", b"d"]


def _rerun(sent: frozenset[str]) -> SourceStages:
    return replace(_stages(), already_sent=sent)


def test_a_barrier_goes_to_every_queue_and_a_rerun_sends_only_its_missing_copies() -> None:
    headers = headers_where([False, True], BARRIER_HEADER, "signal-1")
    records = record_table("t", [0, 1], ["a", "mark"], keys=["k", None], headers=headers)
    messages = _made(_stages().run([records]))
    barrier = messages.filter(pc.equal(messages.column("offset"), 1))
    assert barrier.column("queue").to_pylist() == [0, 1, 2]
    labels = [dict(p)[BARRIER_HEADER] for p in barrier.column("properties").to_pylist()]
    assert labels == ["0/3", "1/3", "2/3"]
    assert {dict(p)[BARRIER_QUEUES_HEADER] for p in barrier.column("properties").to_pylist()} == {
        ",".join(QUEUES)
    }

    sent = frozenset(sent_keys(messages.slice(0, 2)).to_pylist())  # the record and the first copy
    again = _made(_rerun(sent).run([records]))
    assert [dict(p)[BARRIER_HEADER] for p in again.column("properties").to_pylist()] == ["1/3", "2/3"]


def test_planning_names_a_type_the_converter_does_not_write() -> None:
    records = record_table("t", [0], [1], value_type=pa.int64())
    with pytest.raises(ValueError, match="int64"):
        _stages(**{"value.converter": "bytes"}).planned([records.schema])
