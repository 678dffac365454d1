"""Connector plugins as both APIs list them, their config definitions, and config validation with
per-field errors in Kafka Connect's ``ConfigInfos`` shape (RocketMQ Connect answers "not
implemented" there; Sluice runs the connector's own ``validate``).

Every name users' files carry is listed: built-in short names, entry points and the class-name
aliases of Kafka Connect and RocketMQ Connect (connectors/plugins.py).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from typing import Any

from sluice.connectors.config import ConfigField, FieldError
from sluice.worker.rest.errors import RestError

_TYPES = {str: "STRING", int: "INT", float: "DOUBLE", bool: "BOOLEAN", list: "LIST"}


def version() -> str:
    try:
        return importlib.metadata.version("sluice")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _connector_class(name: str) -> type[Any]:
    # connector plugins (~35 ms): loaded on first use, not when the REST app is imported
    from sluice.connectors.plugins import PluginNotFoundError, load_connector_class

    try:
        return load_connector_class(name)
    except PluginNotFoundError as exc:
        raise RestError(404, f"connector plugin {name!r} not found: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a plugin failing to import is that plugin's error
        raise RestError(404, f"connector plugin {name!r} cannot be loaded: {exc}") from None


def kind_of(cls: type[Any]) -> str:
    from sluice.connectors.api import SinkConnector  # connector plugins: see _connector_class

    return "sink" if issubclass(cls, SinkConnector) else "source"


def plugins() -> list[tuple[str, str]]:
    """(class name, "source"|"sink") for every name a config may give, sorted by name."""
    from sluice.connectors.plugins import connector_aliases, known_connectors  # see _connector_class

    out: list[tuple[str, str]] = []
    for name in sorted({*known_connectors(), *connector_aliases()}):
        try:
            out.append((name, kind_of(_connector_class(name))))
        except RestError:
            continue  # a broken third-party plugin is left out of the list, not the whole answer
    return out


def _type_name(f: ConfigField) -> str:
    if f.secret:
        return "PASSWORD"
    return _TYPES.get(getattr(f.type, "__origin__", f.type), "STRING")


def _default(f: ConfigField) -> str | None:
    if f.required or f.default is None:
        return None
    if isinstance(f.default, list | tuple):
        return ",".join(str(v) for v in f.default)
    if isinstance(f.default, bool):
        return str(f.default).lower()
    return str(f.default)


def definition(f: ConfigField, order: int) -> dict[str, Any]:
    """Kafka Connect's ConfigKeyInfo of one field (plus Sluice's ``aliases``)."""
    return {
        "name": f.name,
        "type": _type_name(f),
        "required": f.required,
        "default_value": _default(f),
        "importance": "HIGH" if f.required else "MEDIUM",
        "documentation": f.doc,
        "group": None,
        "width": "NONE",
        "display_name": f.name,
        "dependents": [],
        "order": order,
        "aliases": list(f.aliases),
    }


def config_definitions(plugin: str) -> list[dict[str, Any]]:
    fields = _connector_class(plugin).full_config_def().fields
    return [definition(f, i) for i, f in enumerate(fields)]


def validate(plugin: str, config: Mapping[str, str]) -> dict[str, Any]:
    """Kafka Connect's ConfigInfos: every declared field with its value and errors."""
    cls = _connector_class(plugin)
    given = str(config.get("connector.class") or plugin)
    errors: list[FieldError] = []
    if given != plugin:
        try:
            same = _connector_class(given) is cls
        except RestError:
            same = False
        if not same:
            errors.append(
                FieldError("connector.class", f"field 'connector.class': {given!r} is not {plugin!r}")
            )
    raw = {**config, "connector.class": given}
    fields = cls.full_config_def(str(raw.get("name") or ""))
    try:
        errors.extend(cls().validate(raw))
    except Exception as exc:  # noqa: BLE001 - plugin code raising is reported, as validate does
        errors.append(FieldError("connector.class", f"{plugin} rejected the config: {exc}"))
    canonical = fields.canonical(raw)
    by_field: dict[str, list[str]] = {}
    for e in errors:
        by_field.setdefault(e.field, []).append(e.message)
    configs = []
    names = [f.name for f in fields.fields] + sorted(set(by_field) - {f.name for f in fields.fields})
    for i, name in enumerate(names):
        f = fields[name] if name in fields else ConfigField(name, default=None)
        value = canonical.get(name)
        shown = None if value is None else ("********" if f.secret else str(value))
        configs.append(
            {
                "definition": definition(f, i),
                "value": {
                    "name": name,
                    "value": shown,
                    "recommended_values": [str(c) for c in f.choices or ()],
                    "errors": by_field.get(name, []),
                    "visible": True,
                },
            }
        )
    return {"name": plugin, "error_count": len(errors), "groups": ["Common"], "configs": configs}
