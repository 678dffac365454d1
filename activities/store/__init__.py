"""PostgreSQL offset and state store: committed positions, the batch ledger, migrations."""

from sluice.activities.store.errors import (
    BatchAlreadyCommittedError,
    PlanConflictError,
    PlanNotRecordedError,
    PositionRegressionError,
    StoreError,
)
from sluice.activities.store.ledger import BatchRecord
from sluice.activities.store.offsets import OffsetStore

__all__ = [
    "BatchAlreadyCommittedError",
    "BatchRecord",
    "OffsetStore",
    "PlanConflictError",
    "PlanNotRecordedError",
    "PositionRegressionError",
    "StoreError",
]
