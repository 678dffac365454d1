"""Finding plugin classes by name: installed entry points and ``package.module:Class`` paths.

The generic half of plugin loading, kept apart from what is loaded: ``sluice.connectors.plugins``
checks for a :class:`~sluice.connectors.api.Connector`, ``sluice.connectors.transforms`` for a
``Transform``, and both build on this module, which imports neither — so the contract, the
transforms and the plugin registry import one another without a cycle.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Final

CONNECTOR_GROUP: Final = "sluice.connectors"
TRANSFORM_GROUP: Final = "sluice.transforms"

#: The repository's folders, importable only as ``sluice.<folder>`` since 0.1's one module identity.
#: A config written earlier may name a class by the old top-level path (``connectors.file.source:…``);
#: it still loads (stored configs and workflow histories keep working).
_FOLDERS: Final = frozenset({"workflows", "activities", "connectors", "worker", "deploy"})


class PluginNotFoundError(LookupError):
    """An unknown plugin name; the message lists the known names."""


def _entry_points(group: str, extra: Iterable[EntryPoint] | None) -> dict[str, EntryPoint]:
    found = {ep.name: ep for ep in entry_points(group=group)}
    for ep in extra or ():
        if ep.group == group:
            found[ep.name] = ep
    return found


def connector_entry_points(extra: Iterable[EntryPoint] | None = None) -> dict[str, EntryPoint]:
    """Installed ``sluice.connectors`` entry points (``extra`` adds some, e.g. in tests)."""
    return _entry_points(CONNECTOR_GROUP, extra)


def transform_entry_points(extra: Iterable[EntryPoint] | None = None) -> dict[str, EntryPoint]:
    return _entry_points(TRANSFORM_GROUP, extra)


def import_path(path: str) -> Any:
    """The object at ``package.module:Attr`` (or ``package.module.Attr``)."""
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ImportError(f"not a 'module:Class' path: {path!r}")
    if module_name.partition(".")[0] in _FOLDERS:
        module_name = f"sluice.{module_name}"
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def looks_like_path(name: str) -> bool:
    return ":" in name or "." in name
