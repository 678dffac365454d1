"""`sluice verify` against a running pipeline: differences in flight are checked again, not reported.

While a pipeline runs, a row changed in the source a moment before the compare is not in the target
yet; reported as it stands, it would be a difference that is none. So the compare first reads the
source's position (where its connector would read up to now: ``SourceTask.latest_positions``,
read in this process, without committing anything), compares, and only if something differs:

1. waits until the source connector has committed at least that position (everything changed
   before the compare started has been read), then until the sink has committed its topics' ends
   as they are at that moment (and sent on; a direct pipeline commits both at once);
2. checks again only the keys that differed (``engine.verify_keys``): what still differs is real.

A pipeline that does not catch up within the timeout leaves the first compare's differences,
with a warning saying so. A source whose position cannot be read without changing its system
(``SourceTask.previewable`` False: PostgreSQL's replication slot) is compared once, with a warning.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from sluice.connectors.positions import PartitionKey, Position

if TYPE_CHECKING:
    from sluice.worker.verify.model import VerifyReport
    from sluice.worker.verify.pipelines import PipelinePlan

#: how often the committed positions are read while waiting for the pipeline to catch up
POLL_S: Final = 1.0


class Client(Protocol):
    """What of ``sluice.worker.client.Client`` this reads: connectors' committed offsets."""

    async def offsets(self, name: str) -> list[dict[str, Any]]: ...


def reached(committed: Mapping[PartitionKey, Position], point: Mapping[PartitionKey, Position]) -> bool:
    """Whether every partition of ``point`` is committed at or past it (a partition not committed
    yet has not reached it; positions of another shape, a source changed under it, have not)."""
    for key, position in point.items():
        at = committed.get(key)
        try:
            if at is None or at < position:
                return False
        except TypeError:
            return False
    return True


def source_point(
    config: Mapping[str, Any], committed: Mapping[PartitionKey, Position]
) -> dict[PartitionKey, Position] | None:
    """Where the source connector (``config``: secrets resolved) would read up to now, per partition
    of each of its tasks (split as ``create`` splits it: activities.validation); None when reading
    it would change the source's system."""
    from sluice.activities.validation import validate_config
    from sluice.connectors.api import SourceConnector, open_source_task
    from sluice.connectors.plugins import load_connector_class
    from sluice.worker.verify.model import VerifyError

    name = str(config.get("name") or "")
    result = validate_config(name, {k: str(v) for k, v in config.items()})
    if result.errors:
        raise VerifyError("; ".join(result.errors))
    cls = load_connector_class(result.connector_class)
    assert issubclass(cls, SourceConnector)
    mine = {k.name: v for k, v in committed.items() if not k.topic}
    point: dict[PartitionKey, Position] = {}
    for task_id, task_config in enumerate(result.task_configs):
        task = open_source_task(cls, task_config, task_id)
        try:
            if not task.previewable:
                return None
            point |= {PartitionKey(p): pos for p, pos in task.latest_positions(mine).items()}
        finally:
            task.close()
    return point


async def committed_positions(client: Client, name: str) -> dict[PartitionKey, Position]:
    from sluice.activities.offsets import parse_offsets

    offsets = await client.offsets(name)
    if not offsets:
        return {}
    return {
        k if isinstance(k, PartitionKey) else PartitionKey.parse(k): v
        if isinstance(v, Position)
        else Position((v,))
        for k, v in parse_offsets(name, offsets).positions.items()
    }


async def topic_ends(namesrv: str, topics: tuple[str, ...]) -> dict[PartitionKey, Position]:
    """Each queue of ``topics`` and its end, as a sink's positions name them."""
    from sluice.connectors.rocketmq.sync_client import SyncRocketMQClient

    def read() -> dict[PartitionKey, Position]:
        client = SyncRocketMQClient(namesrv)
        try:
            return {
                PartitionKey(mq.key, t): Position((client.max_offset(mq),))
                for t in topics
                for mq in client.queues(t)
            }
        finally:
            client.close()

    return await asyncio.to_thread(read)


async def caught_up(
    client: Client, plan: PipelinePlan, names: tuple[str, str | None], point: Mapping[PartitionKey, Position],
    namesrv: str, timeout_s: float,
) -> bool:  # fmt: skip
    """Wait until the source committed ``point`` and the sink its topics' ends as they were then."""
    source, sink = names
    deadline = time.monotonic() + timeout_s
    while not reached(await committed_positions(client, source), point):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(POLL_S)
    if sink is None or not plan.topics:
        return True
    ends = {k: v for k, v in (await topic_ends(namesrv, plan.topics)).items() if v.key != (0,)}
    while not reached(await committed_positions(client, sink), ends):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(POLL_S)
    return True


async def verify_live(
    client: Client,
    names: tuple[str, str | None],
    source_config: Mapping[str, Any],
    plan: PipelinePlan,
    namesrv: str,
    timeout_s: float,
    progress: Callable[[Any], None] | None = None,
) -> VerifyReport:
    """The module docstring's compare of a running pipeline."""
    from sluice.worker.verify.engine import verify, verify_keys

    committed = await committed_positions(client, names[0])
    point = await asyncio.to_thread(source_point, source_config, committed)
    report = await asyncio.to_thread(verify, plan.source_url, plan.target_url, plan.pairs, progress=progress)
    if report.equal:
        return report
    if point is None:
        for t in report.tables:
            t.warnings.append(
                f"connector {names[0]!r}: its position cannot be read without changing its source, so "
                "differences were not checked again after the pipeline caught up: some may be in flight"
            )
        return report
    if not await caught_up(client, plan, names, point, namesrv, timeout_s):
        for t in report.tables:
            if not t.equal:
                t.warnings.append(
                    f"the pipeline did not catch up within {timeout_s:.0f} s with the source's position "
                    "read when the compare started: these differences may be changes in flight"
                )
        return report
    pairs = {p.source_table: p for p in plan.pairs}
    for i, t in enumerate(report.tables):
        if t.equal or not t.key_columns:
            continue
        keys = [*t.missing, *t.extra, *(d.key for d in t.different)]
        again = await asyncio.to_thread(
            verify_keys, plan.source_url, plan.target_url, pairs[t.source_table], keys
        )
        again.rows_compared, again.seconds = t.rows_compared, t.seconds + again.seconds
        again.segments_checksummed = t.segments_checksummed
        again.warnings = [*t.warnings, *again.warnings]
        report.tables[i] = again
    return report
