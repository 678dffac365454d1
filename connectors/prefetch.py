"""An iterator's next items made on a thread of their own while the caller works on the last one.

Why: a sink batch run in Arrow (activities.sink_runner) pulls its messages and parses them into
columns (rocketmq.codec, rocketmq.arrow_decode), then decodes their envelopes (arrow_envelopes):
done one after the other, one thread waits while the other works. Much of either side runs in
Arrow kernels, socket reads or the broker, with the GIL released, so the pull of chunk k+1 and
the decode of chunk k overlap even on two cores.

The producer thread stops when the consumer closes the iterator (or drops it), within one item;
an error in the producer is raised in the consumer, at the item where it happened.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator, Iterable
from typing import Final, Generic, TypeVar

T = TypeVar("T")

#: How often a blocked producer looks whether the consumer has gone (seconds).
_POLL_S: Final = 0.1


class _End:
    """The producer's last item: its iterator was exhausted, or raised ``error``."""

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


class _Producer(Generic[T]):
    def __init__(self, items: Iterable[T], depth: int, name: str) -> None:
        self.items = items
        self.ready: queue.Queue[T | _End] = queue.Queue(maxsize=max(1, depth))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        iterator = iter(self.items)
        end = _End(None)
        try:
            for item in iterator:
                if not self._put(item):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which raises it
            end = _End(exc)
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:  # a generator's own clean-up runs here, on its thread
                close()
        self._put(end)

    def _put(self, item: T | _End) -> bool:
        """Queue ``item`` once there is room; False when the consumer went away first."""
        while not self.stop.is_set():
            try:
                self.ready.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False


def prefetched(
    items: Iterable[T], depth: int = 1, *, name: str = "sluice-prefetch"
) -> Generator[T, None, None]:
    """``items``, in order, with up to ``depth`` of them made ahead on a thread named ``name``."""
    producer = _Producer(items, depth, name)
    producer.thread.start()
    try:
        while True:
            item = producer.ready.get()
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
            yield item
    finally:
        producer.stop.set()
