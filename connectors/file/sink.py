"""File sink: one line per record, exactly once by truncating to the length recorded with the plan.

Lifecycle per batch: 1. ``prepare(plan)`` records the file's current length in the plan;
2. ``write`` truncates the file back to that length (undoing whatever a crashed attempt of the same
plan wrote), appends the records' lines in (topic, partition, offset) order and fsyncs. Re-running a
plan therefore always leaves the same file; a plan recorded for an earlier ``file`` (the connector
was reconfigured before it committed) is restated for the new file (``restate``). Values are written
as lines: binary values (``value.converter=bytes``) byte for byte, whatever their encoding — so a
dead-letter topic of undecodable lines dumps back to the very bytes — strings as UTF-8,
structs/arrays/maps as JSON, null as ``null`` (as Kafka's FileStreamSink prints it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, Any, Final

from sluice.connectors.api import Delivery, SinkConnector, SinkTask
from sluice.connectors.config import ConfigDef, ConfigError, ConfigField, FieldError, non_empty
from sluice.connectors.model import BatchPlan

if TYPE_CHECKING:
    import pyarrow as pa

LENGTH_STATE: Final = "file.length"
PATH_STATE: Final = "file.path"  # the file the length belongs to (plans recorded before 0.2 lack it)


def _writable_path(value: Any) -> str | None:
    """Validator of ``file``: a path, not a directory (checked again at first use, since the config
    may be validated on another machine, or the path replaced later)."""
    return non_empty(value) or ("is a directory, not a file" if os.path.isdir(str(value)) else None)


def value_line(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The values as the bytes of their lines, as earlier releases wrote them with Spark: binary as
    it is (never decoded: it need not be text), strings as UTF-8, structs/arrays/maps as
    ``to_json(value, {"ignoreNullFields": "false"})`` (connectors.spark_json), other values as
    Spark's ``CAST(value AS STRING)``; null as ``null``."""
    # pyarrow: config validation imports this module (the file-sink class)
    import pyarrow as pa
    import pyarrow.compute as pc

    from sluice.connectors.spark_json import cast_text, json_values

    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    kind = values.type
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return pc.fill_null(values, pa.scalar(b"null", kind)).cast(pa.binary())
    if pa.types.is_nested(kind):  # structs, lists, maps
        text = json_values(values, keep_nulls=True)
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        text = values
    else:
        text = cast_text(values)
    return pc.fill_null(text, "null").cast(pa.binary())


class FileSinkTask(SinkTask):
    delivery = Delivery.EXACTLY_ONCE

    def __init__(self, config: Mapping[str, Any], task_id: int) -> None:
        super().__init__(config, task_id)
        self.path = str(config["file"])

    def _size(self) -> int:
        try:
            return os.path.getsize(self.path)
        except FileNotFoundError:
            return 0

    def prepare(self, plan: BatchPlan) -> dict[str, str]:
        return {LENGTH_STATE: str(self._size()), PATH_STATE: self.path}

    def restate(self, plan: BatchPlan) -> dict[str, str] | None:
        """A plan recorded for another file (``file`` reconfigured before it committed) is written
        to this file, from its length now; the runtime stores the new state before the write."""
        if plan.sink_state.get(PATH_STATE, self.path) == self.path:
            return None
        return self.prepare(plan)

    def lines(self, records: pa.Table) -> pa.Table:
        """``partition, offset, line`` (bytes) of the whole batch, in write order (topic, partition,
        offset). Every line is made before the first byte is written, so a value that cannot be
        written leaves the file untouched."""
        # pyarrow: config validation imports this module (the file-sink class)
        import pyarrow as pa

        order = [("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")]
        ordered = records.select(["topic", "partition", "offset", "value"]).sort_by(order)
        return pa.table(
            {
                "partition": ordered.column("partition"),
                "offset": ordered.column("offset"),
                "line": value_line(ordered.column("value")),
            }
        )

    def emit(self, fh: IO[bytes], lines: pa.Table) -> None:
        """Append the lines (overridden by the dummy sink to inject faults mid-write)."""
        if lines.num_rows:
            fh.write(b"\n".join(lines.column("line").to_pylist()) + b"\n")

    def write(self, records: pa.Table, plan: BatchPlan) -> None:
        where = f"connector {self.name!r} file {self.path!r} batch {plan.batch_id}"
        parent = os.path.dirname(os.path.abspath(self.path))
        problem = "is a directory, not a file" if os.path.isdir(self.path) else None
        if os.path.exists(parent) and not os.path.isdir(parent):
            problem = f"is under {parent!r}, which is not a directory"
        if problem:  # at first use too: validation may have run elsewhere, or the path changed since
            message = f"connector {self.name!r}: field 'file': {self.path!r} {problem}"
            raise ConfigError([FieldError("file", message)])
        if LENGTH_STATE not in plan.sink_state:
            raise ValueError(f"{where}: plan has no {LENGTH_STATE!r} sink state (prepare() was not recorded)")
        length = int(plan.sink_state[LENGTH_STATE])
        size = self._size()
        if size < length:
            raise ValueError(
                f"{where}: file is {size} bytes, shorter than the {length} recorded with the plan "
                "(changed outside Sluice?)"
            )
        os.makedirs(parent, exist_ok=True)
        with open(self.path, "ab") as fh:
            fh.truncate(length)  # undo a partial write of an earlier attempt of this plan
            fh.seek(length)
            self.emit(fh, self.lines(records))
            fh.flush()
            os.fsync(fh.fileno())


class FileSinkConnector(SinkConnector):
    """Config: ``file`` — the path lines are appended to (one task: the file is one ordered stream)."""

    plugin_name = "file-sink"
    task_class = FileSinkTask
    config_def = ConfigDef(
        (
            ConfigField(
                "file",
                str,
                doc="path of the file to append to",
                validator=_writable_path,
                aliases=("filename",),
            ),
        )
    )
