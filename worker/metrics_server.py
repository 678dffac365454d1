"""The worker's ``/metrics`` (Prometheus text) and ``/healthz`` endpoint.

One endpoint serves both Sluice's task series (activities.metrics, with the process's CPU and
memory) and the Temporal SDK's worker metrics (task slots, poll and schedule latencies, activity
and workflow task outcomes). The SDK's Rust core can only export to an HTTP listener of its own,
so the worker starts that on a loopback port nobody scrapes and this server folds its families
into each scrape: a monitoring system needs one target per worker, not two.

The port is bound before the worker connects to anything, so a port already taken stops the
worker at once with an error naming ``SLUICE_METRICS_PORT``, with nothing half-started.
"""

from __future__ import annotations

import socket
import threading
import urllib.request
from collections.abc import Iterable, Iterator
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import REGISTRY, make_wsgi_app
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

HEALTH_PATH = "/healthz"
#: How long a scrape waits for the SDK's own exporter (it answers from memory, on loopback).
SDK_SCRAPE_TIMEOUT_S = 2.0


class MetricsPortError(RuntimeError):
    """The metrics port cannot be bound (taken, or not ours to take)."""


class SdkMetrics(Collector):
    """The Temporal SDK's metrics, read from its loopback exporter at each scrape."""

    def __init__(self, address: str) -> None:
        self.url = f"http://{address}/metrics"

    def describe(self) -> Iterable[Metric]:
        return []  # names unknown until the SDK has run; registering must not scrape it

    def collect(self) -> Iterable[Metric]:
        try:
            with urllib.request.urlopen(self.url, timeout=SDK_SCRAPE_TIMEOUT_S) as answer:  # noqa: S310
                text = answer.read().decode()
        except OSError:
            return []  # the SDK's exporter is not up yet (or gone): Sluice's own series still go out
        return list(text_string_to_metric_families(text))


def free_loopback_address() -> str:
    """A loopback ``host:port`` free now, for the SDK's private exporter."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    """No access log line per scrape."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


def _app(metrics_app: Any) -> Any:
    def app(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        if environ.get("PATH_INFO") == HEALTH_PATH:
            start_response("200 OK", [("Content-Type", "text/plain; charset=utf-8")])
            return iter([b"ok\n"])
        return metrics_app(environ, start_response)

    return app


class MetricsServer:
    """Serves ``/metrics`` and ``/healthz`` on a daemon thread until ``close``."""

    def __init__(self, host: str, port: int, sdk_address: str | None = None) -> None:
        if sdk_address is not None:
            REGISTRY.register(SdkMetrics(sdk_address))
        try:
            self._server = make_server(
                host, port, _app(make_wsgi_app(REGISTRY)), _ThreadingServer, handler_class=_QuietHandler
            )
        except OSError as exc:
            raise MetricsPortError(
                f"cannot serve metrics on {host}:{port} (SLUICE_METRICS_HOST / SLUICE_METRICS_PORT): "
                f"{exc.strerror or exc}; choose a free port, e.g. SLUICE_METRICS_PORT={port + 1}"
            ) from None
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="sluice-metrics", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
