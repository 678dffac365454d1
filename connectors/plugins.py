"""Plugin discovery: built-in connectors and transforms, plus third-party ones via entry points.

A third-party package declares, in its pyproject.toml::

    [project.entry-points."sluice.connectors"]
    my-source = "my_pkg.source:MySourceConnector"
    [project.entry-points."sluice.transforms"]
    MyTransform = "my_pkg.transforms:MyTransform"

Names are resolved in this order: built-in short name, entry point name, dotted path
(``package.module:Class`` or ``package.module.Class``). Nothing is imported until a name is asked for,
so listing plugins stays cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from connectors.api import Connector
    from connectors.transforms import Transform

CONNECTOR_GROUP: Final = "sluice.connectors"
TRANSFORM_GROUP: Final = "sluice.transforms"

BUILTIN_CONNECTORS: Final = {
    "file-source": "connectors.file.source:FileSourceConnector",
    "file-sink": "connectors.file.sink:FileSinkConnector",
    "dummy-source": "connectors.dummy:DummySourceConnector",
    "dummy-sink": "connectors.dummy:DummySinkConnector",
    "postgres-sink": "connectors.postgres.sink:PostgresSinkConnector",
}


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


def known_connectors(extra: Iterable[EntryPoint] | None = None) -> list[str]:
    return sorted({*BUILTIN_CONNECTORS, *connector_entry_points(extra)})


def _import_path(path: str) -> Any:
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ImportError(f"not a 'module:Class' path: {path!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _looks_like_path(name: str) -> bool:
    return ":" in name or "." in name


def load_connector_class(name: str, extra: Iterable[EntryPoint] | None = None) -> type[Connector]:
    """The connector class for a short name, entry point name or dotted path; unknown -> clear error."""
    from connectors.api import Connector

    key = name.strip()
    eps = connector_entry_points(extra)
    try:
        if key in BUILTIN_CONNECTORS:
            cls = _import_path(BUILTIN_CONNECTORS[key])
        elif key in eps:
            cls = eps[key].load()
        elif _looks_like_path(key):
            cls = _import_path(key)
        else:
            raise PluginNotFoundError(
                f"unknown connector {key!r}; known: {', '.join(known_connectors(extra))} "
                f"(or a 'package.module:Class' path)"
            )
    except (ImportError, AttributeError) as exc:
        raise PluginNotFoundError(f"connector {key!r} cannot be loaded: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, Connector)):
        raise PluginNotFoundError(f"connector {key!r} resolves to {cls!r}, which is not a Connector subclass")
    return cls


def load_transform_class(
    name: str, known: Iterable[str] = (), extra: Iterable[EntryPoint] | None = None
) -> type[Transform]:
    """A third-party transform class by entry point name or dotted path (built-ins are in the registry).

    A ``$Key``/``$Value`` suffix selects the variant and is not part of the entry point name.
    """
    from connectors.transforms import Transform

    key = name.strip()
    base = key.partition("$")[0]
    eps = transform_entry_points(extra)
    try:
        if key in eps:
            cls = eps[key].load()
        elif base in eps:
            cls = eps[base].load()
        elif _looks_like_path(base):
            cls = _import_path(base)
        else:
            listed = sorted({*known, *eps})
            raise PluginNotFoundError(f"unknown transform type {key!r}; known: {', '.join(listed)}")
    except (ImportError, AttributeError) as exc:
        raise PluginNotFoundError(f"transform {key!r} cannot be loaded: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, Transform)):
        raise PluginNotFoundError(f"transform {key!r} resolves to {cls!r}, which is not a Transform subclass")
    return cls
