"""Dummy sink: the file sink with faults that fail *mid-write*, leaving a partial batch behind.

``fail.at.offset``: lines before that record offset are written and flushed, then it raises naming
the record position. ``fail.once.marker``: the first attempt writes half of the batch then raises.
Both leave exactly the partial write a crashed worker would, so tests can check that re-running the
plan repairs it. ``fail.on.close``: ``close()`` raises (the runtime logs it and goes on).
``open.slow.ms``: opening the task takes that long.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, Any

from sluice.connectors.api import Delivery
from sluice.connectors.config import ConfigDef, ConfigField, non_empty
from sluice.connectors.dummy.faults import (
    FAULT_FIELDS,
    InjectedFault,
    fail_once,
    sleep_if_slow,
    sleep_on_open,
)
from sluice.connectors.file.sink import FileSinkConnector, FileSinkTask

if TYPE_CHECKING:
    import pyarrow as pa


class DummySinkTask(FileSinkTask):
    delivery = Delivery.EXACTLY_ONCE

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        super().__init__(config, task_id)
        sleep_on_open(config)

    def emit(self, fh: IO[bytes], lines: pa.Table) -> None:
        sleep_if_slow(self.config)
        fail_at = int(self.config.get("fail.at.offset", -1))
        pending = list(
            zip(*(lines.column(c).to_pylist() for c in ("partition", "offset", "line")), strict=True)
        )
        once = fail_once(self.config, f"write to {self.path}")
        stop_after = len(pending) // 2 if once else None
        for n, (partition, offset, line) in enumerate(pending):
            if offset == fail_at or n == stop_after:
                fh.flush()
                raise InjectedFault(
                    f"connector {self.name!r}: injected failure writing "
                    f"partition {partition!r} offset {offset}"
                )
            fh.write(line + b"\n")

    def close(self) -> None:
        super().close()
        if self.config.get("fail.on.close"):
            raise InjectedFault(f"connector {self.name!r}: injected failure in close()")


class DummySinkConnector(FileSinkConnector):
    plugin_name = "dummy-sink"
    task_class = DummySinkTask
    config_def = ConfigDef(
        (ConfigField("file", str, doc="path the records are appended to", validator=non_empty), *FAULT_FIELDS)
    )
