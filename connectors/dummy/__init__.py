"""Deterministic test connectors with fault injection (dlt's ``dummy`` destination, Singer test taps)."""

from sluice.connectors.dummy.sink import DummySinkConnector, DummySinkTask
from sluice.connectors.dummy.source import DummySourceConnector, DummySourceTask

__all__ = ["DummySinkConnector", "DummySinkTask", "DummySourceConnector", "DummySourceTask"]
