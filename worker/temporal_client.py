"""Connecting to Temporal the same way from workers, the CLI and the Python client.

Why short-lived processes own their Temporal runtime
----------------------------------------------------
Every Temporal client runs on a ``temporalio.runtime.Runtime``: a Rust (Tokio) thread pool that
calls back into Python. By default the SDK keeps one in a module global, so it is only torn down
while the interpreter is finalizing; its threads then take and release the GIL of a dying
interpreter, and about one short CLI run in ten died with ``Fatal Python error:
PyGILState_Release`` (exit 134) or a segmentation fault (139) *after* the command had succeeded
(temporalio/sdk-python#300). :class:`OwnedRuntime` gives a command its own runtime and releases
it — the last reference — while the interpreter is fully alive: the SDK then shuts the Tokio pool
down with the GIL released and joins its threads, so nothing foreign is running at exit.
"""

from __future__ import annotations

import dataclasses
import gc
import time
import weakref

from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.runtime import Runtime, TelemetryConfig

from sluice.worker.codec import FernetCodec
from sluice.worker.errors import TemporalUnavailableError


async def connect(address: str, namespace: str, runtime: Runtime | None = None) -> Client:
    """A client with the payload codec of Sluice's settings (``SLUICE_PAYLOAD_KEY``).

    ``runtime`` None uses the SDK's process-wide default (right for long-lived workers).
    """
    from sluice.worker.settings import settings  # pydantic: not in the light client's imports

    key = settings().payload_key
    return await connect_with_key(address, namespace, runtime, key.get_secret_value() if key else None)


async def connect_with_key(
    address: str, namespace: str, runtime: Runtime | None = None, payload_key: str | bytes | None = None
) -> Client:
    """A client with an encrypting payload codec when ``payload_key`` is given (worker.codec);
    unreachable Temporal is a one-line error naming it. Needs only temporalio (the light client)."""
    converter = DataConverter.default
    if payload_key:
        key = payload_key.encode() if isinstance(payload_key, str) else payload_key
        converter = dataclasses.replace(converter, payload_codec=FernetCodec(key))
    try:
        return await Client.connect(address, namespace=namespace, data_converter=converter, runtime=runtime)
    except RuntimeError as exc:  # the SDK's "Failed client connect: ..." (no typed error exists)
        if "connect" not in str(exc).lower():
            raise
        raise TemporalUnavailableError(address, _connect_reason(str(exc))) from exc


def _connect_reason(text: str) -> str:
    """'connection refused' rather than a page of Rust debug output."""
    lowered = text.lower()
    for needle, reason in (
        ("connection refused", "connection refused"),
        ("timed out", "timed out"),
        ("dns", "name resolution failed"),
        ("failed to lookup", "name resolution failed"),
    ):
        if needle in lowered:
            return reason
    return text.splitlines()[0][:200]


class OwnedRuntime:
    """A Temporal runtime a short-lived process creates, lends to its clients, and releases.

    Use::

        owned = OwnedRuntime()
        code = asyncio.run(main(owned.runtime))   # clients made with runtime=owned.runtime
        owned.release()                            # Tokio threads joined; safe to exit

    Clients hold the runtime, so they (and any exception traceback whose frames reference them)
    must be gone before :meth:`release`; it collects cycles and reports whether the runtime was
    really freed, so a caller can fall back to a hard exit instead of crashing in finalization.
    """

    def __init__(self) -> None:
        self._runtime: Runtime | None = Runtime(telemetry=TelemetryConfig())
        self._ref = weakref.ref(self._runtime)

    @property
    def runtime(self) -> Runtime:
        if self._runtime is None:
            raise RuntimeError("the Temporal runtime was already released")
        return self._runtime

    def release(self) -> bool:
        """Drop this owner's reference; True when the runtime (and its threads) are gone."""
        self._runtime = None
        # Several passes, a moment apart: in a long-lived process (a test session) the runtime can
        # sit behind objects whose finalizers free it only on a later collection, or behind the
        # core's last callbacks into Python, which a loaded machine runs a little later.
        for attempt in range(10):
            if self._ref() is None:
                break
            gc.collect()
            if attempt >= 2:
                time.sleep(0.05)
        return self._ref() is None
