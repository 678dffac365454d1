"""What a ``_bulk`` response says about each item: written, to retry, refused, or a setup problem.

A bulk request succeeds as a whole (HTTP 200) even when items fail; each item carries its own
status. Per item, in this order:

=========================== ============ ==================================================
item                        outcome      why
=========================== ============ ==================================================
2xx                         ``OK``
``delete`` 404              ``OK``       the document is already gone: what a delete wants
429, 5xx, 409               ``RETRY``    overloaded, a shard not ready, a concurrent write
                                         (no retry changes nothing else)
401, 403                    ``FATAL``    credentials or privileges: the whole task's problem
404 (index, update)         ``FATAL``    the index is missing and cannot be created
other 4xx                   ``REJECTED`` the document itself: a mapping conflict, a value that
                                         does not parse, an id or field too long — a bad record
=========================== ============ ==================================================

Pure functions over the decoded JSON, so the table above is tested without a service.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

#: Longest reason kept per refused item (errors, dead-letter properties).
MAX_REASON_CHARS: Final = 400


class Outcome(StrEnum):
    OK = "ok"
    RETRY = "retry"
    REJECTED = "rejected"
    FATAL = "fatal"


@dataclass(frozen=True)
class ItemResult:
    """One bulk item's outcome; ``reason`` is OpenSearch's error type and reason (empty when OK)."""

    outcome: Outcome
    status: int
    reason: str = ""


def classify_status(op: str, status: int) -> Outcome:
    if 200 <= status < 300 or (op == "delete" and status == 404):
        return Outcome.OK
    if status in (409, 429) or status >= 500:
        return Outcome.RETRY
    if status in (401, 403, 404):
        return Outcome.FATAL
    return Outcome.REJECTED


def error_text(error: Any) -> str:
    """``type: reason`` of an item's error (with its first cause), cut to :data:`MAX_REASON_CHARS`."""
    if not isinstance(error, Mapping):
        return str(error or "")[:MAX_REASON_CHARS]
    text = f"{error.get('type', 'error')}: {error.get('reason', '')}"
    cause = error.get("caused_by")
    if isinstance(cause, Mapping):
        text += f" (caused by {cause.get('type', 'error')}: {cause.get('reason', '')})"
    return text[:MAX_REASON_CHARS]


def classify_item(item: Mapping[str, Any]) -> ItemResult:
    """One entry of the response's ``items``: ``{"<op>": {"status": …, "error": …}}``."""
    if len(item) != 1:
        return ItemResult(Outcome.RETRY, 0, f"unexpected bulk item {list(item)!r}")
    op, body = next(iter(item.items()))
    status = int(body.get("status", 0)) if isinstance(body, Mapping) else 0
    outcome = classify_status(op, status)
    reason = (
        "" if outcome is Outcome.OK else error_text(body.get("error") if isinstance(body, Mapping) else "")
    )
    return ItemResult(outcome, status, reason or (f"HTTP {status}" if outcome is not Outcome.OK else ""))


def classify_response(response: Mapping[str, Any], expected: int) -> list[ItemResult]:
    """Every item's result, in request order; raises ValueError when the response does not answer
    ``expected`` items (a proxy's page, a truncated body)."""
    items = response.get("items")
    if not isinstance(items, Sequence) or len(items) != expected:
        got = len(items) if isinstance(items, Sequence) else "no"
        raise ValueError(f"a bulk response with {got} items for {expected} actions")
    if not response.get("errors"):
        return [ItemResult(Outcome.OK, 200)] * expected
    return [classify_item(item) for item in items]


def to_retry(ops: Sequence[tuple[str, str, str]], results: Sequence[ItemResult]) -> list[int]:
    """Indices of the items to send again: those to retry, unless a later item of the same
    document (``(op, index, id)``'s index and id) was written — it is newer and already landed,
    and writing the older one again would undo it. An older item is kept when the newer one must
    be retried too (both go again, in order)."""
    written_after: set[tuple[str, str]] = set()
    keep: list[int] = []
    for i in range(len(ops) - 1, -1, -1):
        doc = (ops[i][1], ops[i][2])
        outcome = results[i].outcome
        if outcome is Outcome.RETRY and doc not in written_after:
            keep.append(i)
        elif outcome is Outcome.OK:
            written_after.add(doc)
    return sorted(keep)
