"""``skipped.operations``: which change events a change-capture source leaves out (Debezium's key).

Debezium's connectors take a comma list of operation codes — ``c`` creates, ``u`` updates, ``d``
deletes, ``t`` truncates — or ``none``; the default (Debezium 2.x) is ``t``, so a TRUNCATE is not
emitted unless the user asks for it. Snapshot reads (``r``) cannot be skipped, as in Debezium.

The filter applies to the records a source *emits* (its ``read``), never to what it decodes:
positions, batch ends and the on-demand snapshot's reconciliation still see every change, so a
skipped event changes nothing but the records sent. A delete's tombstone goes with its delete
(skipping ``d`` skips both).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from sluice.connectors.cdc.envelope import OP_CREATE, OP_DELETE, OP_UPDATE, ChangeRecord
from sluice.connectors.config import ConfigField
from sluice.connectors.records import OP_TRUNCATE

FIELD_NAME: Final = "skipped.operations"
SKIPPABLE: Final = (OP_CREATE, OP_UPDATE, OP_DELETE, OP_TRUNCATE)
NONE: Final = "none"
#: Debezium 2.x's default: truncate events are not emitted unless configured.
DEFAULT: Final = (OP_TRUNCATE,)


def _problem(value: Any) -> str | None:
    items = [str(v).strip().lower() for v in value or []]
    unknown = [v for v in items if v not in (*SKIPPABLE, NONE)]
    if unknown:
        return (
            f"unknown operation(s) {unknown}: use a comma list of c (create), u (update), "
            "d (delete), t (truncate), or none"
        )
    if NONE in items and len(items) > 1:
        return "'none' cannot be combined with operation codes"
    return None


def skipped_field() -> ConfigField:
    """The config field both change-capture sources declare."""
    return ConfigField(
        FIELD_NAME,
        list[str],
        list(DEFAULT),
        doc="change events not emitted: a comma list of c, u, d, t (truncate), or none "
        "(Debezium's default t: truncates are skipped unless configured)",
        validator=_problem,
    )


def skipped(config: Mapping[str, Any]) -> frozenset[str]:
    """The operation codes ``config`` skips (a task config built by hand gets Debezium's default)."""
    raw = config.get(FIELD_NAME)
    if raw is None:
        return frozenset(DEFAULT)
    items = raw if isinstance(raw, list | tuple) else str(raw).split(",")
    codes = {str(v).strip().lower() for v in items if str(v).strip()}
    return frozenset(codes - {NONE})


def emitted(record: ChangeRecord, skip: frozenset[str]) -> bool:
    """Whether ``record`` is sent: its operation is not skipped (a tombstone counts as a delete)."""
    if not skip:
        return True
    op = OP_DELETE if record.value is None else str(record.value["op"])
    return op not in skip
