"""The workflow's offset updates (workflows/offsets.py) through SluiceClient, with stand-in offset
activities over an in-memory store: alter and reset only while STOPPED and only once the tasks
have stopped, what ``offsets`` returns is what ``alter_offsets`` takes, bad entries are refused."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio import activity
from temporalio.exceptions import ApplicationError

from sluice.activities.offsets import OFFSETS_ERROR, OffsetsFormatError, offsets_to_json, parse_offsets
from sluice.connectors.positions import PartitionKey, Position, as_position
from sluice.worker.client import SluiceClient
from sluice.worker.errors import ConnectorOffsetsError, ConnectorStateError
from sluice.workflows.types import (
    ALTER_OFFSETS_ACTIVITY,
    READ_OFFSETS_ACTIVITY,
    RESET_OFFSETS_ACTIVITY,
    AlterOffsets,
    ConnectorState,
    OffsetsChange,
    TaskState,
)
from tests.workflows.conftest import WorkerFactory, wait_for
from tests.workflows.stand_ins import STAND_INS
from tests.workflows.test_connector_workflow import _start, _tasks_are

stored: dict[str, dict[PartitionKey, Position]] = {}


@activity.defn(name=READ_OFFSETS_ACTIVITY)
async def read_stand_in(connector: str) -> list[dict[str, Any]]:
    return offsets_to_json(stored.get(connector, {}))


@activity.defn(name=ALTER_OFFSETS_ACTIVITY)
async def alter_stand_in(change: OffsetsChange) -> None:
    try:
        parsed = parse_offsets(change.connector, change.offsets)
    except OffsetsFormatError as exc:
        raise ApplicationError(str(exc), type=OFFSETS_ERROR, non_retryable=True) from None
    mine = stored.setdefault(change.connector, {})
    for key in parsed.clear:
        mine.pop(key, None)
    mine.update({PartitionKey.parse(str(k)): as_position(v) for k, v in parsed.positions.items()})


@activity.defn(name=RESET_OFFSETS_ACTIVITY)
async def reset_stand_in(connector: str) -> None:
    stored.pop(connector, None)


@pytest.fixture
async def sluice(connector_worker: WorkerFactory) -> AsyncIterator[SluiceClient]:
    async with connector_worker([*STAND_INS, read_stand_in, alter_stand_in, reset_stand_in]) as (c, q):
        yield SluiceClient(c, q)


async def test_offsets_round_trip_only_while_stopped(sluice: SluiceClient) -> None:
    name = f"off-{uuid.uuid4().hex[:8]}"
    stored[name] = {PartitionKey("/data/in.txt"): Position.of(120, file="inode-7")}
    await _start(sluice, name, {"tasks.max": "1"})
    await wait_for(lambda: _tasks_are(sluice, name, TaskState.RUNNING), 30, "task running")

    got = await sluice.offsets(name)  # readable in any state
    assert got == [
        {
            "partition": {"partition": "/data/in.txt"},
            "offset": {"position": {"v": 1, "key": [120], "meta": {"file": "inode-7"}}},
        }
    ]
    with pytest.raises(ConnectorStateError, match=f"connector {name} is RUNNING"):
        await sluice.alter_offsets(name, got)
    with pytest.raises(ConnectorStateError, match="STOPPED"):
        await sluice.reset_offsets(name)

    assert (await sluice.stop(name)).state == ConnectorState.STOPPED
    got[0]["offset"]["position"]["key"] = [0]  # rewind what get returned, and give it back
    queue = {"partition": {"partition": "broker-a:1", "topic": "T"}, "offset": {"position": 5}}
    await sluice.alter_offsets(name, [*got, queue])  # right after stop: waits for the task to stop
    assert await _tasks_are(sluice, name, TaskState.STOPPED)
    assert [e["offset"]["position"]["key"] for e in await sluice.offsets(name)] == [[0], [5]]

    await sluice.alter_offsets(
        name, [{"partition": {"partition": "broker-a:1", "topic": "T"}, "offset": None}]
    )
    assert [e["partition"]["partition"] for e in await sluice.offsets(name)] == ["/data/in.txt"]
    await sluice.reset_offsets(name)
    assert await sluice.offsets(name) == []
    assert (await sluice.resume(name)).state == ConnectorState.RUNNING
    await sluice.delete(name)


@pytest.mark.parametrize(
    ("offsets", "message"),
    [
        ([], "non-empty list"),
        ([{"partition": {"partition": "a"}}], "offsets[0] must be an object with exactly"),
        ([{"partition": {"partition": ""}, "offset": None}], "offsets[0]: 'partition.partition'"),
        ([{"partition": {"file": "a"}, "offset": None}], "unknown partition field(s) ['file']"),
        ([{"partition": {"partition": "a"}, "offset": {"position": {"v": 9, "key": [1]}}}], "version 9"),
        ([{"partition": {"partition": "a"}, "offset": {"pos": 1}}], "offsets[0]: 'offset' must be null"),
        (
            [
                {"partition": {"partition": "a"}, "offset": None},
                {"partition": {"partition": "a"}, "offset": None},
            ],
            "offsets[1]: partition 'a' given twice",
        ),
    ],
)
async def test_malformed_alter_is_refused_naming_the_entry(
    sluice: SluiceClient, offsets: list[dict[str, Any]], message: str
) -> None:
    name = f"off-bad-{uuid.uuid4().hex[:8]}"
    await _start(sluice, name, {"tasks.max": "1"})
    await sluice.stop(name)
    with pytest.raises(ConnectorOffsetsError) as client_side:
        await sluice.alter_offsets(name, offsets)
    assert message in str(client_side.value) and name in str(client_side.value)
    # The same rules hold for a caller that skips the client (e.g. `temporal workflow update`).
    with pytest.raises(ConnectorOffsetsError) as worker_side:
        await sluice._update_raw(name, "alter_offsets", AlterOffsets(offsets), None)
    assert message in str(worker_side.value)
    assert stored.get(name, {}) == {}
    await sluice.delete(name)


async def test_offsets_of_unknown_and_deleted_connectors_are_not_found(sluice: SluiceClient) -> None:
    """Deleted connectors have no offsets to read; unknown ones are not found."""
    from sluice.worker.errors import ConnectorNotFoundError

    with pytest.raises(ConnectorNotFoundError):
        await sluice.offsets(f"never-{uuid.uuid4().hex[:6]}")
    name = f"off-del-{uuid.uuid4().hex[:8]}"
    await _start(sluice, name, {"tasks.max": "1"})
    await sluice.delete(name)
    with pytest.raises(ConnectorNotFoundError):
        await sluice.offsets(name)
