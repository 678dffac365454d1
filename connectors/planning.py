"""Pure micro-batch planning: where to start, how much to admit, how to split for Spark.

Modelled on Spark's Kafka source, which plans in two pure steps (``latestOffset(start, readLimit)``
then ``KafkaOffsetRangeCalculator``) so that the plan is a value that can be recorded before it runs
and re-run identically after a crash. Nothing here does I/O: the caller looks up committed and
latest positions (PostgreSQL, the broker) and hands them in, which keeps every rule testable with
table-driven cases.

Positions are "the next position to read" per partition; ranges are half-open ``[start, end)``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final, Literal

from sluice.connectors.model import PartitionRange
from sluice.connectors.positions import Position, as_position


class PlanningError(ValueError):
    """Positions handed to the planner are inconsistent (unknown, vanished or truncated partition)."""


# --- where to start -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Earliest:
    """Start at the earliest position the source still retains."""


@dataclass(frozen=True)
class Latest:
    """Start at the current end: only data written after the connector starts is read."""


@dataclass(frozen=True)
class SpecificPositions:
    """Start at given positions; partitions not listed start at ``default``.

    Why a default: partitions appear over time (a topic gains queues), and the policy is resolved
    again for partitions the offset store has never seen.
    """

    positions: Mapping[str, Position | int] = field(default_factory=dict)
    default: Literal["earliest", "latest"] = "earliest"


@dataclass(frozen=True)
class AtTimestamp:
    """Start at the first record stored at or after ``timestamp_ms`` (epoch milliseconds).

    Resolving it needs the source (RocketMQ's search-by-timestamp), so ``resolve_start`` refuses it;
    see ``sluice.connectors.rocketmq.offsets.resolve_start_policy``.
    """

    timestamp_ms: int


StartPolicy = Earliest | Latest | SpecificPositions | AtTimestamp


def resolve_start(
    policy: StartPolicy,
    earliest: Mapping[str, Position | int],
    latest: Mapping[str, Position | int],
    *,
    partitions: Sequence[str] | None = None,
) -> dict[str, Position]:
    """Turn a start policy into committed positions, once, for ``partitions`` (default: all in latest).

    A specific position outside ``[earliest, latest]`` is kept when below earliest (the data-loss
    check reports it, naming the range, under the connector's policy) but refused when beyond latest:
    there is nothing there yet, so the connector configuration is wrong.
    """
    keys = list(partitions) if partitions is not None else list(latest)
    for key in keys:
        if key not in earliest or key not in latest:
            raise PlanningError(f"start policy: partition {key!r} is unknown to the source")
    first = {k: as_position(earliest[k]) for k in keys}
    last = {k: as_position(latest[k]) for k in keys}
    if isinstance(policy, Earliest):
        return first
    if isinstance(policy, Latest):
        return last
    if isinstance(policy, SpecificPositions):
        fallback = first if policy.default == "earliest" else last
        out: dict[str, Position] = {}
        for key in keys:
            raw = policy.positions.get(key)
            if raw is None:
                out[key] = fallback[key]
                continue
            if isinstance(raw, int) and raw < 0:
                raise PlanningError(f"start policy: position {raw} of partition {key!r} is negative")
            pos = as_position(raw)
            if pos > last[key]:
                raise PlanningError(
                    f"start policy: position {pos} of partition {key!r} is beyond the latest position "
                    f"{last[key]}"
                )
            out[key] = pos
        return out
    if isinstance(policy, AtTimestamp):
        raise PlanningError(
            "start policy: a timestamp must be resolved by the source (e.g. "
            "sluice.connectors.rocketmq.offsets.resolve_start_policy), not by resolve_start"
        )
    raise TypeError(f"not a start policy: {policy!r}")


# --- admission ----------------------------------------------------------------------------------------


@lru_cache(maxsize=65_536)
def natural_key(partition: str) -> tuple[object, ...]:
    """Sort key ordering "broker-a:2" before "broker-a:10" so plans read naturally and stably
    (cached: every planning sorts the task's partitions, an idle task's every second)."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", partition))


def _check_positions(committed: Mapping[str, int], latest: Mapping[str, int]) -> None:
    for key in latest:
        if key not in committed:
            raise PlanningError(
                f"partition {key!r} has no committed position; resolve the start policy for new "
                "partitions before planning"
            )
    for key, pos in committed.items():
        if key not in latest:
            raise PlanningError(
                f"partition {key!r} has a committed position {pos} but vanished from the source"
            )
        if latest[key] < pos:
            raise PlanningError(
                f"partition {key!r}: latest position {latest[key]} is below the committed position {pos} "
                "(the source was truncated or recreated)"
            )


def admit(committed: Mapping[str, int], latest: Mapping[str, int], max_span: int | None) -> dict[str, int]:
    """The end of the next batch per partition, admitting at most ``max_span`` records in total.

    Like Spark Kafka's ``maxOffsetsPerTrigger``, but the budget is shared by max-min fairness
    (water-filling) rather than proportionally: a partition whose backlog is below its fair share
    gets all of it, and what it leaves is split evenly among the larger ones. So a small partition is
    never starved by a big one. The integer remainder goes one record each to the partitions with
    the largest backlog (ties by natural key order); when the budget is smaller than the number of
    busy partitions this rotates the budget among them batch after batch instead of always favouring
    the same ones.

    ``committed`` must hold every partition of ``latest`` (new partitions get their position from
    the resolved start policy first); a partition missing from ``latest`` or behind ``committed``
    raises ``PlanningError`` naming it, because that is data loss for the caller to handle.
    """
    _check_positions(committed, latest)
    backlog = {k: latest[k] - committed[k] for k in latest}
    if max_span is None:
        return dict(latest)
    grant = share_budget(backlog, max_span)
    return {k: committed[k] + (grant[k] or 0) for k in latest}


def share_budget(backlog: Mapping[str, int | None], budget: int | None) -> dict[str, int | None]:
    """How many units each partition may take in the next batch (the fairness rule of ``admit``).

    A backlog of None is unknown (a composite position: the source cannot count what lies ahead
    without reading it); it is treated as larger than any budget, so such a partition gets a fair
    share and the source's ``batch_end`` decides where that many units end.
    """
    if budget is not None and budget < 0:
        raise PlanningError(f"max_span must be >= 0, got {budget}")
    if budget is None:
        return dict(backlog)  # None: no limit at all
    known = {k: (b if b is not None else budget + 1) for k, b in backlog.items()}
    if sum(known.values()) <= budget:
        return dict(known)
    return dict(_water_fill(known, budget))


def _water_fill(backlog: Mapping[str, int], budget: int) -> dict[str, int]:
    order = sorted(backlog, key=lambda k: (backlog[k], natural_key(k)))
    grant: dict[str, int] = {}
    remaining = budget
    for i, key in enumerate(order):
        rest = order[i:]
        fair = remaining // len(rest)
        if backlog[key] <= fair:
            grant[key] = backlog[key]
            remaining -= backlog[key]
            continue
        # Every partition left has a backlog above the fair share: all get it, plus the remainder.
        for k in rest:
            grant[k] = fair
        extra = remaining - fair * len(rest)
        for k in sorted(rest, key=lambda k: (-backlog[k], natural_key(k)))[:extra]:
            grant[k] += 1
        break
    return grant


#: A task's first batch after it starts (a new connector, a restart, a failover) takes at most this
#: many units; the batches after it take the configured size.
FIRST_BATCH_UNITS: Final = {"records": 1_000, "bytes": 256 * 1024}


def ramped_budget(configured: int | None, unit: str, batches_planned: int) -> int | None:
    """The budget of a task's next new batch, after ``batches_planned`` new batches this attempt.

    A full-size first batch (100,000 rows in the benchmarks) made a new connector's first rows wait
    for all of them to be read, sent, pulled and written. A small first batch puts them in the
    target within a batch's fixed cost. Only the first: a geometric ramp (x8 a batch) cost 15 % of
    bench-db's throughput, each small batch paying the whole fixed cost of a batch. ``unit`` is the
    source's ``position_unit`` (``records`` or ``bytes``); a sink counts records.
    """
    if batches_planned > 0:
        return configured
    first = FIRST_BATCH_UNITS.get(unit, FIRST_BATCH_UNITS["records"])
    return first if configured is None else min(configured, first)


def linger_s(planned_records: int, budget: int | None, linger_ms: int) -> float:
    """How long a sink waits for more messages before running a batch of ``planned_records``
    (``batch.linger.ms``, once): not at all for a full batch or with no linger set.

    Each sink batch pays a fixed cost (~0.3 s on two cores) however few messages it holds. A sink
    that runs as soon as any message arrives keeps up with a busy source in many small batches,
    each paying it, on the cores the source needs: once the sink's fixed cost fell from ~0.6 to
    ~0.3 s, bench-pipeline's sink ran 25 batches instead of 16. With 300 ms it ran 6 instead of 11
    and the pipeline 8-17 % faster (docs/performance.md). Waiting trades that for latency, as a
    Kafka producer's ``linger.ms`` does.
    """
    if linger_ms <= 0 or (budget is not None and planned_records >= budget):
        return 0.0
    return linger_ms / 1000


# --- splitting and plans ---------------------------------------------------------------------------


def split_ranges(ranges: Sequence[PartitionRange], max_per_split: int) -> list[PartitionRange]:
    """Split ranges into Spark input partitions of at most ``max_per_split`` records each.

    A large range becomes ``ceil(size / max_per_split)`` pieces of near-equal size (so no tiny
    trailing task), in order; empty ranges are dropped because a Spark task for them costs more
    than it reads.
    """
    if max_per_split <= 0:
        raise PlanningError(f"max_per_split must be > 0, got {max_per_split}")
    out: list[PartitionRange] = []
    for r in ranges:
        if r.is_empty:
            continue
        pieces = -(-r.size // max_per_split)
        base, extra = divmod(r.size, pieces)
        start = r.start.offset
        for i in range(pieces):
            end = start + base + (1 if i < extra else 0)
            out.append(PartitionRange.offsets(r.partition, start, end, r.topic))
            start = end
    return out


def pack_splits(sizes: Sequence[int], min_per_task: int, max_tasks: int) -> list[list[int]]:
    """Group splits (their record counts, in order) into Spark tasks: as many tasks as hold at
    least ``min_per_task`` records each, at most ``max_tasks`` and at most one per split, with the
    splits dealt largest first to the emptiest task; each task's splits keep their order.

    Why: a Spark task costs ~0.1-0.2 s of fixed overhead here (a Python worker round trip, a few
    broker requests), so a batch of 1,500 messages spread over four queues must not pay it four
    times, while a large batch still uses every core.
    """
    if min_per_task <= 0 or max_tasks <= 0:
        raise PlanningError(f"min_per_task and max_tasks must be > 0, got {min_per_task}, {max_tasks}")
    if not sizes:
        return []
    count = max(1, min(len(sizes), max_tasks, sum(sizes) // min_per_task))
    tasks: list[list[int]] = [[] for _ in range(count)]
    loads = [0] * count
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        emptiest = min(range(count), key=lambda t: (loads[t], t))
        tasks[emptiest].append(i)
        loads[emptiest] += sizes[i]
    return [sorted(task) for task in tasks]
