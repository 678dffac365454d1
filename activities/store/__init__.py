"""PostgreSQL offset and state store: committed positions, the batch ledger, migrations."""

from activities.store.errors import (
    BatchAlreadyCommittedError,
    PlanConflictError,
    PlanNotRecordedError,
    PositionRegressionError,
    StoreError,
)
from activities.store.ledger import BatchRecord
from activities.store.offsets import OffsetStore

__all__ = [
    "BatchAlreadyCommittedError",
    "BatchRecord",
    "OffsetStore",
    "PlanConflictError",
    "PlanNotRecordedError",
    "PositionRegressionError",
    "StoreError",
]
