"""connectors.prefetch: items made ahead on their own thread, in order, errors where they happened."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import closing

import pytest

from sluice.connectors.prefetch import prefetched


@pytest.mark.parametrize("depth", [1, 2, 5])
@pytest.mark.parametrize("count", [0, 1, 7, 100])
def test_items_come_in_order_and_all_of_them(depth: int, count: int) -> None:
    assert list(prefetched(iter(range(count)), depth)) == list(range(count))


def test_an_error_is_raised_after_the_items_made_before_it() -> None:
    def failing() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("queue 3 offset 17: truncated")

    got = []
    with pytest.raises(ValueError, match="queue 3 offset 17"):
        for item in prefetched(failing(), 4):
            got.append(item)
    assert got == [1, 2]


def test_items_are_made_on_another_thread_while_the_caller_works() -> None:
    made_on: set[str] = set()
    second_made = threading.Event()

    def items() -> Iterator[int]:
        for i in range(3):
            made_on.add(threading.current_thread().name)
            if i == 1:
                second_made.set()
            yield i

    out = prefetched(items(), 1, name="test-prefetch")
    assert next(out) == 0
    # the caller holds item 0; item 1 is made meanwhile without the caller asking
    assert second_made.wait(5)
    assert list(out) == [1, 2]
    assert made_on == {"test-prefetch"}


def test_the_producer_stays_within_its_depth() -> None:
    made = []

    def items() -> Iterator[int]:
        for i in range(100):
            made.append(i)
            yield i

    out = prefetched(items(), 2)
    assert next(out) == 0
    time.sleep(0.3)
    # item 0 taken, two queued, one more made and waiting for room
    assert len(made) <= 4
    out.close()


def test_closing_early_stops_the_producer_and_closes_its_generator() -> None:
    closed = threading.Event()
    threads_before = set(threading.enumerate())

    def endless() -> Iterator[int]:
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed.set()

    with closing(prefetched(endless(), 2, name="test-endless")) as out:
        assert [next(out) for _ in range(5)] == [0, 1, 2, 3, 4]
    assert closed.wait(5)
    deadline = time.monotonic() + 5
    while any(t.name == "test-endless" for t in set(threading.enumerate()) - threads_before):
        assert time.monotonic() < deadline, "the producer thread did not stop"
        time.sleep(0.02)
