"""The bisection's planning rules, case by case (pure functions: no services).

The engine trusts these to cover every key exactly once: integer segments must tile ``[lo, hi)``
and number rows exactly as the SQL ``(key - lo) DIV width`` does, sampled segments must tile the
parent range, and ``plan`` must never call a differing segment equal.
"""

from __future__ import annotations

import pytest

from sluice.worker.verify.bisection import (
    Checksum,
    Segment,
    batches,
    chunks,
    index_of,
    integer_segments,
    merged,
    plan,
    sampled_segments,
    segment_count,
    split_integer,
    width,
)


def _bounds(segments: list[Segment]) -> list[tuple[object, object]]:
    return [(None if s.lo is None else s.lo[0], None if s.hi is None else s.hi[0]) for s in segments]


@pytest.mark.parametrize(
    ("lo", "hi", "n", "expected"),
    [
        (0, 10, 2, [(0, 5), (5, 10)]),
        (0, 10, 3, [(0, 4), (4, 8), (8, 10)]),  # width rounded up, the last is narrower
        (1, 2, 4, [(1, 2)]),  # one key: one segment, whatever n
        (-5, 5, 2, [(-5, 0), (0, 5)]),
        (0, 7, 7, [(i, i + 1) for i in range(7)]),
        (0, 7, 100, [(i, i + 1) for i in range(7)]),  # never narrower than one key
        (5, 5, 3, []),  # empty range
        (10**15, 10**15 + 4, 2, [(10**15, 10**15 + 2), (10**15 + 2, 10**15 + 4)]),
    ],
)
def test_integer_segments_tile_the_range(lo: int, hi: int, n: int, expected: list[tuple[int, int]]) -> None:
    assert _bounds(integer_segments(lo, hi, n)) == expected


@pytest.mark.parametrize(("lo", "hi", "n"), [(0, 1000, 7), (-37, 1000, 64), (3, 10, 3), (0, 2_000_000, 1000)])
def test_integer_segments_are_numbered_as_the_sql_numbers_them(lo: int, hi: int, n: int) -> None:
    segs = integer_segments(lo, hi, n)
    w = width(lo, hi, n)
    for key in range(lo, hi, max(1, (hi - lo) // 5000)):
        i = (key - lo) // w  # the SQL: (key - lo) DIV w
        seg_lo, seg_hi = segs[i].lo, segs[i].hi
        assert seg_lo is not None and seg_hi is not None
        assert seg_lo[0] <= key < seg_hi[0]
        assert index_of((key,), segs) == i


@pytest.mark.parametrize(
    ("segment", "splittable"),
    [
        (Segment((0,), (1,)), [False]),
        (Segment((0,), (2,)), [False, False]),
        (Segment((0,), (5,)), [True, True, False]),  # n=3: widths 2, 2, 1
    ],
)
def test_integer_split_marks_single_keys_unsplittable(segment: Segment, splittable: list[bool]) -> None:
    assert [s.splittable for s in split_integer(segment, 3)] == splittable


@pytest.mark.parametrize(
    ("rows", "segments", "threshold", "most", "expected"),
    [
        (0, 64, 2000, 10_000, 64),  # at least `segments`
        (1_000_000, 64, 2000, 10_000, 2000),  # ~a quarter of the threshold per segment
        (1_000_001, 64, 2000, 10_000, 2001),
        (100_000_000, 64, 2000, 10_000, 10_000),  # capped
        (50, 2, 20, 100, 10),
        (-1, 4, 10, 100, 4),  # unknown estimate
        (10, 64, 2000, 8, 8),  # the cap wins over `segments`
    ],
)
def test_segment_count(rows: int, segments: int, threshold: int, most: int, expected: int) -> None:
    assert segment_count(rows, segments=segments, fetch_threshold=threshold, most=most) == expected


@pytest.mark.parametrize(
    ("lo", "hi", "sample", "n", "expected"),
    [
        # quantiles of the sample (any order), open ends kept open
        (None, None, [("d",), ("a",), ("c",), ("b",)], 2, [(None, "c"), ("c", None)]),
        (None, None, [("d",), ("a",), ("c",), ("b",)], 4, [(None, "b"), ("b", "c"), ("c", "d"), ("d", None)]),
        # keys outside [lo, hi) and equal to lo are ignored (no empty first segment)
        (("b",), ("e",), [("a",), ("b",), ("c",), ("d",), ("z",)], 2, [("b", "d"), ("d", "e")]),
        # duplicates collapse: fewer segments than asked
        (None, None, [("a",), ("a",), ("a",)], 5, [(None, "a"), ("a", None)]),
        # code-point order: upper case before lower case, accents after ASCII
        (None, None, [("é",), ("a",), ("B",), ("b",)], 4, [(None, "a"), ("a", "b"), ("b", "é"), ("é", None)]),
    ],
)
def test_sampled_segments(
    lo: tuple[str] | None,
    hi: tuple[str] | None,
    sample: list[tuple[str]],
    n: int,
    expected: list[tuple[object, object]],
) -> None:
    segs = sampled_segments(lo, hi, sample, n)
    assert _bounds(segs) == expected
    assert all(s.splittable for s in segs)


@pytest.mark.parametrize(
    ("lo", "hi", "sample"),
    [(None, None, []), (("b",), ("c",), [("a",), ("b",), ("c",)])],  # nothing strictly inside
)
def test_sampled_segments_without_a_boundary_is_the_range_unsplittable(
    lo: tuple[str] | None, hi: tuple[str] | None, sample: list[tuple[str]]
) -> None:
    assert sampled_segments(lo, hi, sample, 4) == [Segment(lo, hi, splittable=False)]


def test_sampled_segments_composite_keys() -> None:
    sample = [(2, "a"), (1, "b"), (1, "a"), (2, "b")]
    segs = sampled_segments((1, "a"), None, sample, 3)
    assert [(s.lo, s.hi) for s in segs] == [((1, "a"), (2, "a")), ((2, "a"), (2, "b")), ((2, "b"), None)]
    assert index_of((1, "zz"), segs) == 0
    assert index_of((2, "aa"), segs) == 1
    assert index_of((0, "a"), segs) is None


EQ = Checksum(10, 123)


@pytest.mark.parametrize(
    ("source", "target", "splittable", "equal", "split", "fetch"),
    [
        ({0: EQ, 1: EQ}, {0: EQ, 1: EQ}, True, [0, 1], [], []),
        ({}, {}, True, [0, 1], [], []),  # no rows on either side
        ({0: EQ}, {0: Checksum(10, 124)}, True, [1], [], [0]),  # same count, other content
        ({0: EQ}, {}, True, [1], [], [0]),  # rows missing from the target
        ({}, {1: Checksum(3000, 1)}, True, [0], [1], []),  # too many rows: split
        ({0: Checksum(2000, 1)}, {0: Checksum(2000, 2)}, True, [1], [], [0]),  # at the threshold: fetch
        ({0: Checksum(2001, 1)}, {0: Checksum(1, 2)}, True, [1], [0], []),  # larger side decides
        ({0: Checksum(9000, 1)}, {}, False, [1], [], [0]),  # can't split: fetch whatever its size
    ],
)
def test_plan(
    source: dict[int, Checksum],
    target: dict[int, Checksum],
    splittable: bool,
    equal: list[int],
    split: list[int],
    fetch: list[int],
) -> None:
    segs = [Segment((0,), (5,), splittable), Segment((5,), (10,), splittable)]
    p = plan(segs, source, target, fetch_threshold=2000)
    assert (p.equal, p.split, p.fetch) == (equal, split, fetch)


@pytest.mark.parametrize(
    ("segments", "expected"),
    [
        ([], []),
        ([((0,), (5,)), ((5,), (9,))], [((0,), (9,))]),
        ([((0,), (5,)), ((6,), (9,))], [((0,), (5,)), ((6,), (9,))]),
        ([(None, (5,)), ((5,), None)], [(None, None)]),
        ([((0,), (1,)), ((1,), (2,)), ((3,), (4,)), ((4,), (5,))], [((0,), (2,)), ((3,), (5,))]),
    ],
)
def test_merged_joins_touching_neighbours(segments: list[tuple], expected: list[tuple]) -> None:
    assert [(s.lo, s.hi) for s in merged([Segment(lo, hi) for lo, hi in segments])] == expected


@pytest.mark.parametrize(
    ("count", "parts", "expected"),
    [
        (10, 2, [(0, 5), (5, 10)]),
        (5, 2, [(0, 2), (2, 5)]),
        (1, 4, [(0, 1)]),
        (0, 2, []),
        (1000, 3, [(0, 333), (333, 666), (666, 1000)]),
    ],
)
def test_chunks(count: int, parts: int, expected: list[tuple[int, int]]) -> None:
    assert chunks(count, parts) == expected


def test_batches() -> None:
    segs = [Segment((i,), (i + 1,)) for i in range(5)]
    assert [len(b) for b in batches(segs, 2)] == [2, 2, 1]
