"""The search attributes Sluice writes, named once: the workflow upserts them, the local stack
registers them, the worker checks them at start and clients filter on them.

An unregistered attribute fails every workflow task that upserts it, in a loop (docs/design.md), so the
worker refuses to start without them.
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

CONNECTOR_NAME = SearchAttributeKey.for_keyword("ConnectorName")
CONNECTOR_CLASS = SearchAttributeKey.for_keyword("ConnectorClass")
CONNECTOR_STATE = SearchAttributeKey.for_keyword("ConnectorState")
CONNECTOR_KIND = SearchAttributeKey.for_keyword("ConnectorKind")

ALL: tuple[SearchAttributeKey[str], ...] = (CONNECTOR_NAME, CONNECTOR_CLASS, CONNECTOR_STATE, CONNECTOR_KIND)
# Name -> the type `temporal operator search-attribute create --type` takes.
REGISTRATION: dict[str, str] = {key.name: "Keyword" for key in ALL}


def missing_message(missing: list[str], namespace: str) -> str:
    """One line naming what is missing and the command that registers it."""
    commands = "; ".join(
        f"temporal operator search-attribute create --namespace {namespace} --name {name} --type Keyword"
        for name in missing
    )
    names = ", ".join(missing)
    return f"search attributes {names} are not registered on namespace {namespace}; run: {commands}"
