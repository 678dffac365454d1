"""connectors.cdc.read_ahead: a read's result goes only to a planning that starts where it started;
a failed read and a read from elsewhere leave the planning to read itself."""

from __future__ import annotations

import threading

import pytest

from sluice.connectors.cdc.read_ahead import ReadAhead


def _boom() -> str:
    raise ConnectionError("server gone")


@pytest.mark.parametrize(
    ("started_at", "read", "taken_at", "expected", "hits"),
    [
        (10, lambda: "changes 10..20", 10, "changes 10..20", 1),
        (10, lambda: "changes 10..20", 11, None, 0),  # another start: read inline
        (10, _boom, 10, None, 0),  # failed: the inline read reports it
    ],
)
def test_take(started_at: int, read, taken_at: int, expected: str | None, hits: int) -> None:  # type: ignore[no-untyped-def]
    ahead: ReadAhead[int, str] = ReadAhead("connector 'c'")
    ahead.start(started_at, lambda _: read())
    assert ahead.take(taken_at) == expected
    assert ahead.hits == hits
    assert ahead.take(started_at) is None  # taken once, then forgotten


def test_nothing_started_is_nothing_to_take() -> None:
    ahead: ReadAhead[int, str] = ReadAhead("connector 'c'")
    ahead.wait()
    assert ahead.take(0) is None and ahead.hits == 0


def test_a_new_read_and_wait_wait_for_the_one_in_flight() -> None:
    ahead: ReadAhead[int, str] = ReadAhead("connector 'c'")
    release, order = threading.Event(), []

    def slow() -> str:
        release.wait(5)
        order.append("first done")
        return "first"

    ahead.start(1, lambda _: slow())
    threading.Timer(0.2, release.set).start()
    ahead.start(2, lambda _: order.append("second") or "second")  # type: ignore[func-returns-value]
    ahead.wait()
    assert order == ["first done", "second"]
    assert ahead.take(2) == "second"


def test_a_followed_read_reads_on_until_taken_and_keeps_what_it_read() -> None:
    """Each continuation starts where the last ended; one that fails keeps what was read before."""
    ahead: ReadAhead[int, list[int]] = ReadAhead("connector 'c'", follow_s=0.01)
    log: list[int] = []
    grown = threading.Event()

    def read(before: list[int] | None) -> list[int]:
        if before is not None and len(before) >= 3:
            grown.set()
            raise ConnectionError("server gone")
        log.append(len(log))  # the log grows by one record a read
        return [*(before or []), log[-1]]

    ahead.start(0, read)
    assert grown.wait(5)
    assert ahead.take(0) == [0, 1, 2]
    assert ahead.hits == 1


def test_an_unfollowed_read_reads_once() -> None:
    ahead: ReadAhead[int, int] = ReadAhead("connector 'c'", follow_s=0.01)
    calls: list[int | None] = []
    ahead.start(0, lambda before: calls.append(before) or 1, follow=False)  # type: ignore[func-returns-value]
    threading.Event().wait(0.1)
    assert ahead.take(0) == 1 and calls == [None]
