"""What one batch writes to one table, shared by the dialect writers (write_postgres, write_mysql).

A batch reaches a writer as an Arrow table: the row's columns (in the dialect's load form), then
``__sluice_ord`` (record order: topic, partition, offset) and ``__sluice_op`` (``u`` for a row to
write, ``d`` for a tombstone that deletes its key). Within a batch the last record per key wins,
so a tombstone after an upsert deletes and an upsert after a tombstone re-inserts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import pyarrow as pa

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


def unique_keys(rows: pa.Table, pk: Sequence[str]) -> bool:
    """Whether no key value repeats in ``rows``, so a writer may merge the staged rows as they are,
    without reducing them to the last per key first (a sort of the batch in the database).

    False, to be safe, for a key column whose equality the database may see otherwise than Arrow
    (floating point: ``-0.0 = 0.0``) or that Arrow cannot group.
    """
    import pyarrow as pa  # pyarrow: config validation imports the writers (the jdbc-sink class)

    keys = list(pk)
    exact = (pa.types.is_integer, pa.types.is_string, pa.types.is_large_string, pa.types.is_binary,
             pa.types.is_decimal, pa.types.is_date, pa.types.is_timestamp)  # fmt: skip
    if not all(any(kind(rows.schema.field(k).type) for kind in exact) for k in keys):
        return False
    return rows.select(keys).group_by(keys).aggregate([]).num_rows == rows.num_rows
