"""`sluice plugins [NAME]`: which connectors this installation runs, and one connector's fields.

Read from this process's own plugin discovery (built-ins and the ``sluice.connectors`` entry
points), as Kafka Connect's ``GET /connector-plugins`` reads the worker's plugin path: the CLI is
installed with the worker, so what it sees is what ``sluice worker`` loads.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from sluice.worker import cli_render as render
from sluice.worker.cli_common import DebugOpt, Output, OutputOpt, begin
from sluice.worker.errors import UsageError


def plugin_rows() -> list[dict[str, Any]]:
    """Each connector plugin: name, kind, class path, and the class-name aliases that run it."""
    # connector plugins (~40 ms): loaded by the commands that use them, not at the CLI's start
    from sluice.connectors.api import SinkConnector
    from sluice.connectors.plugins import (
        BUILTIN_CONNECTORS,
        connector_aliases,
        connector_entry_points,
        known_connectors,
        load_connector_class,
    )

    aliases = connector_aliases()
    eps = connector_entry_points()
    rows = []
    for name in known_connectors():
        try:
            cls = load_connector_class(name)
            kind = "sink" if issubclass(cls, SinkConnector) else "source"
        except Exception as exc:  # noqa: BLE001 - a broken third-party plugin is listed, not fatal
            kind = f"cannot load: {exc}"
        path = BUILTIN_CONNECTORS.get(name) or eps[name].value
        rows.append(
            {
                "name": name,
                "kind": kind,
                "class": path,
                "aliases": sorted(a for a, n in aliases.items() if n == name),
            }
        )
    return rows


def plugin_fields(name: str) -> list[dict[str, Any]]:
    """The config fields of one connector plugin (its own and the common ones)."""
    from sluice.connectors.plugins import PluginNotFoundError, load_connector_class  # see plugin_rows

    try:
        cls = load_connector_class(name)
    except PluginNotFoundError as exc:
        raise UsageError(str(exc)) from exc
    rows = []
    for f in cls.full_config_def().fields:
        kind = getattr(f.type, "__name__", str(f.type))
        rows.append(
            {
                "name": f.name,
                "type": kind,
                "required": f.required,
                "default": None if f.required else f.default,
                "secret": f.secret,
                "doc": f.doc,
                "aliases": list(f.aliases),
                "choices": list(f.choices) if f.choices else None,
            }
        )
    return rows


def plugins(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="a plugin's name or class: show its config fields")] = "",
    output: OutputOpt = Output.TABLE,
    debug: DebugOpt = False,
) -> None:
    """List connector plugins (with the Kafka/RocketMQ class names they accept), or one plugin's fields."""
    begin(ctx, debug)
    if name:
        rows = plugin_fields(name)
        if output == Output.JSON:
            render.print_json({"name": name, "fields": rows})
        else:
            render.console().print(render.plugin_fields_table(name, rows))
        return
    listed = plugin_rows()
    if output == Output.JSON:
        render.print_json(listed)
    else:
        render.console().print(render.plugins_table(listed))
