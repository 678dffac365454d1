"""What one batch writes to one table, shared by the dialect writers (write_postgres, write_mysql).

A batch reaches a writer as an Arrow table: the row's columns (in the dialect's load form), then
``__sluice_ord`` (record order: topic, partition, offset) and ``__sluice_op`` (``u`` for a row to
write, ``d`` for a tombstone that deletes its key). Within a batch the last record per key wins,
so a tombstone after an upsert deletes and an upsert after a tombstone re-inserts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

ORD_COLUMN: Final = "__sluice_ord"
OP_COLUMN: Final = "__sluice_op"
#: A row's record position, kept beside the rows so a failing row can be named (never written).
POSITION_COLUMNS: Final = ("__sluice_topic", "__sluice_partition", "__sluice_offset")


@dataclass(frozen=True)
class TableWrite:
    """One target table's share of a batch: where, which columns, how."""

    schema: str  # "" = the connection's default schema / database
    table: str
    columns: tuple[str, ...]  # data columns, in load order
    pk: tuple[str, ...]
    mode: str  # insert | upsert | update
    deletes: bool  # tombstones delete by key (delete.enabled)

    @property
    def target(self) -> str:
        """How errors name the table."""
        return f"{self.schema}.{self.table}" if self.schema else self.table
