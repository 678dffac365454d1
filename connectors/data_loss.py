"""The one place data loss is decided, like Spark Kafka's ``reportDataLoss``.

Sources and sinks alike, at planning (the runtime compares the committed position with what the
source or queue still holds) and at reading (the RocketMQ reader on executors, when a pull finds
the planned range gone), call :func:`check_range`. Under policy FAIL it raises
:class:`DataLossError` naming the partition, the lost range and why; under SKIP it narrows the range
to what still exists and logs a warning.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from sluice.connectors.model import DataLossPolicy, PartitionRange
from sluice.connectors.positions import Position

log = logging.getLogger(__name__)


class DataLossError(RuntimeError):
    """Positions a batch needs are no longer (or not) in the source, and the policy says fail."""

    def __init__(self, where: str, lost: str, reason: str) -> None:
        self.where = where
        self.lost = lost
        self.reason = reason
        super().__init__(f"data loss in {where}: {lost} {reason} (set data.loss=skip to continue past it)")


def _where(r: PartitionRange, connector: str) -> str:
    part = f"topic {r.topic!r} queue {r.partition}" if r.topic else f"partition {r.partition!r}"
    return f"connector {connector!r} {part}" if connector else part


def check_range(
    r: PartitionRange,
    earliest: Position | None,
    latest: Position | None,
    policy: DataLossPolicy,
    *,
    connector: str = "",
    replaced: str = "",
    planning: bool = False,
) -> PartitionRange:
    """``r`` narrowed to what the partition still holds, or ``DataLossError`` under policy FAIL.

    ``earliest``/``latest`` are the first retained and the exclusive end position now; ``earliest``
    None means the partition vanished. Lost parts of ``[start, end)``:

    1. everything, when the partition vanished (skip: an empty range at ``end``);
    2. everything from ``start`` on, when ``replaced`` says the partition is another object now (a
       file replaced under the same name: its offsets mean something else; skip: start again at
       ``earliest`` of the new object);
    3. ``[start, earliest)`` when retention removed the beginning;
    4. ``[latest, end)`` when the partition now ends before the range does — at reading it means
       the broker lost written messages (an async-flush crash, a recreated topic). Skip: narrow to
       ``latest``.

    ``planning``: the range is ``[committed, committed)``, asking whether reading may start there;
    an empty range then still counts (a committed position below ``earliest`` or past ``latest`` —
    a truncated source — is data loss), whereas an empty planned range at reading reads nothing.
    """
    where = _where(r, connector)
    if earliest is None:
        _report(policy, where, f"[{r.start}, {r.end})", "is gone: the partition vanished")
        return replace(r, start=r.end)
    if replaced:
        _report(policy, where, f"[{r.start}, ...)", f"is gone: {replaced}")
        return replace(r, start=earliest, end=earliest)
    start, end = r.start, r.end
    if start < earliest and (planning or end > start):
        lost_end = min(earliest, end) if end > start else earliest
        _report(policy, where, f"[{start}, {lost_end})", f"was removed by retention (earliest is {earliest})")
        start, end = lost_end, max(end, lost_end)
    if latest is not None and latest < end and (planning or end > start):
        _report(
            policy,
            where,
            f"[{latest if planning else max(latest, start)}, {end})",
            f"is missing: the partition now ends at {latest} (truncated, replaced or lost by the source)",
        )
        start, end = (latest, latest) if planning else (start, max(start, latest))
    return replace(r, start=start, end=end)


def _report(policy: DataLossPolicy, where: str, lost: str, reason: str) -> None:
    if policy is DataLossPolicy.FAIL:
        raise DataLossError(where, lost, reason)
    log.warning("skipping lost data in %s: %s %s (data.loss=skip)", where, lost, reason)
