"""Errors of the offset store; each names the connector, task and batch it is about.

They are plain exceptions with a readable message, so a Temporal activity failing with one shows
the operator exactly which batch was refused and why (never a database URL or password).
"""

from __future__ import annotations


class StoreError(Exception):
    """Base class of every refusal by the offset store."""


def batch_ref(connector: str, task_id: int, batch_id: int) -> str:
    return f"connector {connector!r} task {task_id} batch {batch_id}"


class PlanConflictError(StoreError):
    """A plan with the same identity but different ranges, or out of order, was offered."""


class PlanNotRecordedError(StoreError):
    """A batch was committed without having been recorded first (the protocol records, then runs)."""


class BatchAlreadyCommittedError(StoreError):
    """The batch was committed before; committing it again would double-count its records."""


class PositionRegressionError(StoreError):
    """Committing would move a stored position backwards."""
