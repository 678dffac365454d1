"""Planning the bisection: which key ranges to checksum, which are equal, which to split or fetch.

Pure functions, no I/O, so the rules are tested by tables of cases. A key is a tuple (one value per
key column); a ``Segment`` is the half-open range ``[lo, hi)`` of keys, ``None`` meaning unbounded.
Integer keys are split arithmetically into equal widths (no sampling: the min and max are enough);
any other key (strings, composite keys, dates) is split at quantiles of a sorted sample of keys, so
segments hold about the same number of rows whatever the keys' distribution.

The sizes are chosen so that the first pass already lands most segments under the fetch threshold:
counting and summing two thousand segments in one scan costs the database about what ten cost, and
a differing segment that is small enough is compared row by row at once instead of being split again.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Key = tuple[Any, ...]


@dataclass(frozen=True)
class Segment:
    """Keys ``lo <= key < hi`` (tuple comparison); ``None``: unbounded on that side."""

    lo: Key | None
    hi: Key | None
    #: False when the range can't be cut further (one integer, no sampled key inside): fetch it.
    splittable: bool = True


@dataclass(frozen=True)
class Checksum:
    """A segment's row count and the sum of its rows' 60-bit hashes, on one side."""

    count: int = 0
    total: int = 0


EMPTY = Checksum()


@dataclass
class Plan:
    """What to do with each checksummed segment, by index into the list that was checksummed."""

    equal: list[int] = field(default_factory=list)
    split: list[int] = field(default_factory=list)
    fetch: list[int] = field(default_factory=list)


def segment_count(rows: int, *, segments: int, fetch_threshold: int, most: int) -> int:
    """How many segments a range of ``rows`` rows (an estimate; for a differing segment, its larger
    side) is cut into: at least ``segments``, enough that each holds about a quarter of the fetch
    threshold, at most ``most``. Under the threshold even where keys are denser than the average, a
    differing segment is fetched next rather than split again; and a small one is cheap to fetch
    (rows cross the network and are compared in Python: the slow part of a difference)."""
    per_segment = max(1, fetch_threshold // 4)
    return max(1, min(most, max(segments, math.ceil(max(rows, 0) / per_segment))))


def integer_segments(lo: int, hi: int, n: int) -> list[Segment]:
    """``[lo, hi)`` cut into at most ``n`` equal-width segments (the last may be narrower): segment
    ``i`` is ``[lo + i*w, lo + (i+1)*w)`` with ``w = width(lo, hi, n)``, which is what the SQL
    ``(key - lo) DIV w`` numbers it."""
    if hi <= lo:
        return []
    w = width(lo, hi, n)
    return [
        Segment((start,), (min(hi, start + w),), splittable=min(hi, start + w) - start > 1)
        for start in range(lo, hi, w)
    ]


def width(lo: int, hi: int, n: int) -> int:
    """The width of each of ``n`` equal segments of ``[lo, hi)`` (rounded up, at least 1)."""
    return max(1, -(-(hi - lo) // max(1, n)))


def sampled_segments(lo: Key | None, hi: Key | None, sample: Sequence[Key], n: int) -> list[Segment]:
    """``[lo, hi)`` cut into at most ``n`` segments at quantiles of ``sample`` (keys, any order;
    those outside the range are ignored). Without a usable boundary: the range itself, unsplittable."""
    inside = sorted({k for k in sample if (lo is None or k > lo) and (hi is None or k < hi)})
    if not inside or n < 2:
        return [Segment(lo, hi, splittable=False)]
    step = len(inside) / n
    bounds: list[Key] = []
    for i in range(1, n):
        b = inside[min(len(inside) - 1, int(i * step))]
        if not bounds or b > bounds[-1]:
            bounds.append(b)
    edges: list[Key | None] = [lo, *bounds, hi]
    return [Segment(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]


def split_integer(segment: Segment, n: int) -> list[Segment]:
    """An integer segment cut into ``n`` equal-width parts."""
    assert segment.lo is not None and segment.hi is not None
    return integer_segments(int(segment.lo[0]), int(segment.hi[0]), n)


def index_of(key: Key, segments: Sequence[Segment]) -> int | None:
    """The index of the segment (sorted, disjoint) holding ``key``, or None."""
    starts = [s.lo for s in segments[1:] if s.lo is not None]  # only the first may be unbounded
    i = bisect.bisect_right(starts, key)
    s = segments[i] if segments else None
    if s is None or (s.lo is not None and key < s.lo) or (s.hi is not None and key >= s.hi):
        return None
    return i


def plan(
    segments: Sequence[Segment],
    source: Mapping[int, Checksum],
    target: Mapping[int, Checksum],
    fetch_threshold: int,
) -> Plan:
    """Sort checksummed ``segments`` (results by index; absent: no rows) into equal ones, ones small
    enough (larger side ``<= fetch_threshold`` rows) or impossible to split to fetch, and the rest to
    split again."""
    out = Plan()
    for i, seg in enumerate(segments):
        s, t = source.get(i, EMPTY), target.get(i, EMPTY)
        if s == t:
            out.equal.append(i)
        elif max(s.count, t.count) <= fetch_threshold or not seg.splittable:
            out.fetch.append(i)
        else:
            out.split.append(i)
    return out


def merged(segments: Sequence[Segment]) -> list[Segment]:
    """Sorted, disjoint ``segments`` with touching neighbours joined (fewer ranges in a WHERE)."""
    out: list[Segment] = []
    for seg in segments:
        if out and out[-1].hi is not None and out[-1].hi == seg.lo:
            out[-1] = Segment(out[-1].lo, seg.hi, out[-1].splittable and seg.splittable)
        else:
            out.append(seg)
    return out


def chunks(count: int, parts: int) -> list[tuple[int, int]]:
    """``range(count)`` cut into at most ``parts`` contiguous ``(start, stop)`` pieces of nearly equal
    size: one query each, run at the same time (a database runs one query on one core)."""
    parts = max(1, min(parts, count))
    return [(count * i // parts, count * (i + 1) // parts) for i in range(parts)] if count else []


def batches(segments: Sequence[Segment], size: int) -> list[list[Segment]]:
    """``segments`` in consecutive groups of at most ``size`` (one query each)."""
    return [list(segments[i : i + size]) for i in range(0, len(segments), size)]
